"""Wiring of the stages: responses → checks → scores → store, for recorded or live runs.

`Recorder` is the one place that turns a response into stored rows and a verdict, so that
`callgate score` (recorded responses) and `callgate run` (live calls) score identically.
"""

from __future__ import annotations

import asyncio
from collections.abc import Container, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from callgate.checks.check import check_response
from callgate.checks.fault_replay import FaultReplayError, replayed
from callgate.checks.recovery import recovery_of
from callgate.checks.verdict import ServerErrors, Verdict
from callgate.errors import CallgateError
from callgate.scoring.exclusion import DEFAULT_MAX_EXCLUDED
from callgate.scoring.probing import keep_probe
from callgate.scoring.recovery import RecoveryTally
from callgate.scoring.result import GateRecord, not_a_result
from callgate.scoring.scores import ScoreBuilder, Scores
from callgate.store.db import Store, verdict_row
from callgate.store.rows import judgement_row, response_row
from callgate.store.web_rows import AttemptMarks
from callgate.suites.environment import EnvironmentError_
from callgate.suites.responses import Response, read_response_lines
from callgate.suites.shard import Shard
from callgate.suites.suite import Case, Suite, case_tags
from callgate.suites.surface import surface_json
from callgate.version import __version__

# The judge is loaded only where a run uses one: scoring recorded answers without a judge does
# not pay for importing it (about a tenth of a second per command).
if TYPE_CHECKING:
    from callgate.judging.step import JudgedTally, JudgeStep, Outcome, Payloads
    from callgate.scoring.behaviour import BehaviourJudges

BATCH = 2000
FAILURES_KEPT = 50  # failed attempts kept in memory for the printed report


@dataclass
class Recorder:
    """Checks responses for one run, buffers their rows and scores them as they stream."""

    suite: Suite
    store: Store
    run_id: int
    keep_verdicts: bool = False
    judge: JudgeStep | None = None
    server_errors: ServerErrors = "exclude"  # or count them as wrong answers (check_response)
    # With a share, a finished run above it is marked "not a result" as it is finished
    # (scoring.result), as decided by `decided_by`; the record is kept in `not_a_result`.
    max_excluded: float | None = None
    decided_by: Literal["run", "score"] = "score"
    not_a_result: GateRecord | None = field(default=None, init=False)
    builder: ScoreBuilder = field(init=False)
    _awaiting_judge: list[tuple[Case, Response, str | None, Verdict]] = field(
        default_factory=list)
    judged_tally: JudgedTally | None = None  # made with the judge
    # The judges beyond the call (scoring.behaviour), and the figures they gave.
    behaviour: BehaviourJudges | None = None
    _behaviour_figures: dict[str, Any] = field(default_factory=dict)
    verdicts: list[Verdict] = field(default_factory=list)
    failures: list[Verdict] = field(default_factory=list)
    _failed_cases: set[str] = field(default_factory=set)
    _repeat_slots: list[int] = field(default_factory=list)  # failures[i] repeats a kept case
    _responses: list[tuple[Any, ...]] = field(default_factory=list)
    _verdicts: list[tuple[Any, ...]] = field(default_factory=list)
    _marks: list[tuple[str | int, ...]] = field(default_factory=list)  # attempt_tools rows
    recovery: RecoveryTally = field(default_factory=RecoveryTally)  # docs/faults.md

    def __post_init__(self) -> None:
        self._marker = AttemptMarks(self.run_id, self.suite.raw_tools)
        self.builder = ScoreBuilder(
            tags_of=case_tags(self.suite.cases), policies=self.suite.policy_names(),
            policy_max_rise=self.suite.policies.max_rise or 0.0,
            unwarranted_calls_max_rise=(self.suite.policies.unwarranted_calls.max_rise
                                        if self.suite.policies.unwarranted_calls else None),
            no_call_cases={case_id for case_id, kind in self.suite.case_expect_types().items()
                           if kind == "no_call"})
        if self.judge is not None and self.judged_tally is None:
            from callgate.judging.step import JudgedTally

            self.judged_tally = JudgedTally()

    def check(self, response: Response, case: Case | None = None) -> Verdict:
        """The deterministic checks of one answer (they may run the suite's environment);
        `case` is its case, when the caller has it already."""
        suite = self.suite
        if case is None:
            case = suite.cases[response.case_id]
        return check_response(
            case, response, suite.parameter_schemas, suite.validators, rules=suite.match,
            environment=suite.environment, server_errors=self.server_errors,
            policies=suite.policies,
        )

    def add(self, response: Response, body: str | None = None,
            checked: Verdict | None = None) -> Verdict:
        """Record one answer; `checked` is its `check`, when the caller ran it already."""
        case = self.suite.cases[response.case_id]
        try:  # a recorded answer the fault plan cannot be read into is refused (exit 2)
            response = replayed(self.suite, case, response)
        except FaultReplayError as exc:
            raise CallgateError(str(exc)) from None
        verdict = checked if checked is not None else self.check(response, case)
        if verdict.status == "pending_judge" and self.judge is not None:
            # Judged in one concurrent batch at the end (judge_pending); the rows wait too.
            self._awaiting_judge.append((case, response, body, verdict))
            return verdict
        return self._record(response, body, verdict, case)

    def _record(self, response: Response, body: str | None, verdict: Verdict,
                case: Case | None = None) -> Verdict:
        """Score and buffer one checked attempt; `case` is its case, when the caller has it."""
        usage = response.usage
        prompt_tokens = usage.prompt_tokens if usage else None
        completion_tokens = usage.completion_tokens if usage else None
        self.builder.add(
            verdict,
            cost=response.cost,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            latency_ms=response.latency_ms,
            provider=response.provider,
            failed_request=response.error is not None,
        )
        if body is None:
            body = response.model_dump_json(exclude_none=True)
        self._responses.append(response_row(
            run=self.run_id,
            case_id=response.case_id,
            repeat=response.repeat,
            finish_reason=response.finish_reason,
            provider=response.provider,
            cost=response.cost,
            latency_ms=response.latency_ms,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            error_kind=response.error.kind if response.error else None,
            body=body,
        ))
        self._marks += self._marker.of(response.case_id, response.repeat, body)
        self._verdicts.append(verdict_row(self.run_id, verdict))
        # recovery_of finds nothing in an attempt that met no fault: its case is not read then
        if verdict.status == "scored" and response.faults:
            case = case or self.suite.cases[response.case_id]
            self.recovery.add(case.id, recovery_of(self.suite.faults.after_fault(case),
                                                   response, case.called_as()))
        if self.behaviour is not None:
            self.behaviour.offer(self.suite, case or self.suite.cases[verdict.case_id],
                                 response, verdict)
        if self.keep_verdicts:
            self.verdicts.append(verdict)
        if not (verdict.status == "scored" and verdict.right_arguments):
            self._keep_failure(verdict)
        if len(self._verdicts) >= BATCH:
            self.flush()
        return verdict

    def _keep_failure(self, verdict: Verdict) -> None:
        """Keep up to FAILURES_KEPT failed attempts, as many distinct cases as there are: a
        case's further failed repeats give way to the first failure of another case."""
        if verdict.case_id not in self._failed_cases:
            self._failed_cases.add(verdict.case_id)
            if len(self.failures) < FAILURES_KEPT:
                self.failures.append(verdict)
            elif self._repeat_slots:
                self.failures[self._repeat_slots.pop(0)] = verdict  # keeps arrival order
        elif len(self.failures) < FAILURES_KEPT:
            self._repeat_slots.append(len(self.failures))
            self.failures.append(verdict)

    def flush(self) -> None:
        if self._verdicts:
            self.store.add_attempts(self._responses, self._verdicts, self._marks)
            self._responses.clear()
            self._verdicts.clear()
            self._marks.clear()

    @property
    def awaiting_judge(self) -> int:
        """How many attempts wait for the judge (recorded by judge_pending or keep_unjudged)."""
        return len(self._awaiting_judge)

    async def judge_pending(self) -> None:
        """Send the attempts waiting for the judge to it (`JudgeStep.judge_all`: cached, each
        verdict committed as it arrives, so call this outside any transaction), and record the
        ones it answered or failed on. If judging is cut short (an exception, Ctrl-C), the
        attempts judged so far are recorded and the others stay waiting, for keep_unjudged to
        record as pending."""
        from callgate.judging.payloads import judge_payloads

        step, waiting = self.judge, list(self._awaiting_judge)
        if step is None or not waiting:
            return
        attempts: dict[int, Payloads | str] = {}
        for index, (case, response, _, _) in enumerate(waiting):
            try:
                attempts[index] = judge_payloads(self.suite, case, response)
            except EnvironmentError_ as exc:  # the checks met it too: not the judge's to decide
                attempts[index] = f"the environment failed while replaying the calls: {exc}"
        done: dict[int, Outcome] = {}
        try:
            await step.judge_all(self.store, attempts, done)
        finally:
            self._record_judged(waiting, done)

    def _record_judged(self, waiting: list[tuple[Case, Response, str | None, Verdict]],
                       done: Mapping[int, Outcome]) -> None:
        """Record the attempts the judge answered (or failed on); the rest keep waiting."""
        from callgate.judging.judge import JudgeOutputError, apply_judgement

        assert self.judge is not None and self.judged_tally is not None
        fingerprint = self.judge.fingerprint
        self._awaiting_judge = [item for index, item in enumerate(waiting) if index not in done]
        judgements = []
        for index, (_, response, body, verdict) in enumerate(waiting):
            output = done.get(index)
            if output is None:
                continue
            if isinstance(output, str):
                pending = verdict.model_copy(update={"tool_reason": f"judge failed: {output}"})
                self._record(response, body, pending)
                continue
            if isinstance(output, JudgeOutputError):
                self.judged_tally.judge_errors += 1
                self._record(response, body, verdict.model_copy(update={
                    "status": "judge_error", "tool_reason": f"judge error: {output}"}))
                continue
            self._record(response, body, apply_judgement(verdict, output))
            self.judged_tally.add(verdict, output)
            judgements.append(judgement_row(
                run=self.run_id, case_id=verdict.case_id, repeat=verdict.repeat,
                fingerprint=fingerprint, tool_choice=output.tool_choice,
                arguments=output.arguments, reason=output.reason))
        if judgements:
            self.store.save_judgements(judgements)

    @property
    def awaiting_behaviour(self) -> bool:
        return self.behaviour is not None and bool(self.behaviour.waiting)

    async def judge_behaviour(self) -> None:
        """The judges beyond the call over the attempts they are for (after the judge's)."""
        if self.behaviour is not None:
            self._behaviour_figures = await self.behaviour.judge(self.suite, self.store)

    def keep_unjudged(self) -> None:
        """Record the attempts the judge did not get to (a run stopped early) as pending."""
        waiting, self._awaiting_judge = self._awaiting_judge, []
        for _, response, body, verdict in waiting:
            self._record(response, body, verdict)

    def finish(self, status: str = "done", stopped: str | None = None) -> Scores:
        """Write the last rows and the scores, and set the run's status (and, for a finished
        run that is mostly excluded attempts, its "not a result" record) in the same step.
        `stopped`: the budget ended the run before every attempt was called; kept in the
        scores, and the run is not released until a gate decides on what it paired."""
        if self._awaiting_judge:
            raise RuntimeError("judge_pending() or keep_unjudged() must run before finish()")
        self.flush()
        scores = self.builder.build().model_copy(update={"server_errors": self.server_errors,
                                                          "recovery": self.recovery.shares()
                                                          or None,
                                                          **self._behaviour_figures})
        if self.judge is not None:
            from callgate.judging.step import judged_shares

            assert self.judged_tally is not None
            scores = scores.model_copy(update={
                "judged": judged_shares(self.judged_tally, self.judge.fingerprint,
                                        self.judge.certificate),
                "uncalibrated": self.judge.certificate is None,
            })
        record = None
        if status == "done" and self.max_excluded is not None:
            record = not_a_result(self.decided_by, scores.attempts, scores.excluded,
                                  self.max_excluded)
        if stopped is not None:
            scores = scores.model_copy(update={"stopped": stopped})
            if status == "done" and record is None:
                record = GateRecord(outcome="inconclusive", released=False,
                                    decided_by=self.decided_by,
                                    max_excluded=(self.max_excluded if self.max_excluded
                                                  is not None else DEFAULT_MAX_EXCLUDED),
                                    messages=[f"the budget ended the run ({stopped}): gate it "
                                              "to decide on the cases paired so far, or run "
                                              "the same command again to resume"])
        document = scores.model_dump(mode="json")
        if self.suite.gate_figures is not None:  # the suite's gated figures, for the gate
            document["gate_figures"] = list(self.suite.gate_figures)
        ended = self.store.finish_run(self.run_id, document, status,
                                      record.model_dump_json() if record is not None else None,
                                      attempts_marked=True)
        self.not_a_result = record if ended == "done" else None
        return scores


@dataclass(frozen=True)
class RunResult:
    run_id: int
    suite: Suite
    model: str
    release: str
    scores: Scores
    verdicts: list[Verdict]  # every attempt's verdict, when asked to keep them
    failures: list[Verdict]  # the first FAILURES_KEPT attempts that were not fully right
    missing: list[str]  # case ids with no response at all
    agent: str = ""  # the stable name the release is filed under (its lineage)
    # The record left when most attempts were excluded (exit 3 in the CLI), else None.
    not_a_result: GateRecord | None = None


def score_responses(
    suite: Suite,
    responses: Iterable[tuple[Response, str | None]],
    store: Store,
    *,
    model: str,
    release: str,
    source: str = "recorded",
    keep_verdicts: bool = True,
    judge: JudgeStep | None = None,
    shard: Shard | None = None,
    server_errors: ServerErrors = "exclude",
    agent: str | None = None,
    model_params: Mapping[str, Any] | None = None,
    max_excluded: float = DEFAULT_MAX_EXCLUDED,
    behaviour: BehaviourJudges | None = None,
) -> RunResult:
    """Check, score and store responses: all of it lands, or none. The rows are written in
    short transactions under a run that stays `running` (unseen by every read) until its
    scores are written; if anything fails before, the run and its rows are deleted. Other
    processes can write to the store meanwhile.

    With a judge, attempts whose case expects one are judged after the deterministic checks,
    outside the transaction, so each verdict the judge is paid for is committed as it arrives
    and a re-run takes it from the cache whatever happens next. The run row stays `running`
    until the judged rows and the scores are written together; if judging is cut short, the
    attempts not judged are recorded as pending and the run is marked `interrupted`.

    With a shard, only the responses to the cases of that shard are scored (the others are
    skipped), and the run is stored as that shard of its release.

    The release belongs to `agent` (default: `model`, the model id the answers came from).
    A run with more than `max_excluded` of its attempts excluded is stored marked "not a
    result" (inconclusive, never a baseline): `RunResult.not_a_result` holds the record."""
    fingerprint = judge.fingerprint if judge else None
    new_suite = store.save_suite(suite)
    keep_probe(store, suite)
    with store.atomic():  # the run is made with its fault plan (merge reads it), or not at all
        run_id = store.replace_run(suite, agent or model, release, source, __version__,
                                   fingerprint, shard=(shard.index, shard.count) if shard else None,
                                   model=model, model_params=model_params,
                                   tool_surface=surface_json(suite))
        if suite.faults.plan is not None:
            store.set_run_fault_plan(run_id, suite.faults.plan.model_dump(mode="json"))
    if shard is not None:
        responses = ((r, b) for r, b in responses if shard.holds(r.case_id))
    recorder = Recorder(suite, store, run_id, keep_verdicts=keep_verdicts, judge=judge,
                        server_errors=server_errors, max_excluded=max_excluded,
                        behaviour=behaviour)
    seen: set[str] = set()
    try:
        for response, body in responses:
            recorder.add(response, body)
            seen.add(response.case_id)
        if recorder.awaiting_judge or recorder.awaiting_behaviour:
            recorder.flush()  # the checked rows land with the run row, still `running`
        else:
            scores = recorder.finish()
    except BaseException:
        store.discard_run(run_id)
        if new_suite:  # a bad responses file leaves the store as it was
            store.discard_suite_if_unused(suite.fingerprint)
        raise
    if recorder.awaiting_judge or recorder.awaiting_behaviour:
        completed = False
        try:
            if recorder.awaiting_judge:
                asyncio.run(recorder.judge_pending())
            asyncio.run(recorder.judge_behaviour())
            completed = True
        finally:
            with store.atomic():
                recorder.keep_unjudged()
                scores = recorder.finish("done" if completed else "interrupted")
    missing = [case_id for case_id in suite.cases
               if case_id not in seen and (shard is None or shard.holds(case_id))]
    return RunResult(run_id, suite, model, release, scores, recorder.verdicts,
                     recorder.failures, missing, agent or model, recorder.not_a_result)


def score_file(
    suite: Suite,
    responses_path: Path | str,
    store: Store,
    *,
    model: str,
    release: str,
    keep_verdicts: bool = True,
    judge: JudgeStep | None = None,
    shard: Shard | None = None,
    server_errors: ServerErrors = "exclude",
    agent: str | None = None,
    max_excluded: float = DEFAULT_MAX_EXCLUDED,
    behaviour: BehaviourJudges | None = None,
) -> RunResult:
    """Score a recorded-responses file (JSON Lines) against a suite and store everything.

    Args:
        suite: the suite the responses answer (`load_suite`).
        responses_path: the JSON Lines file (`read_responses` reads the same format).
        store: the store the run, its responses and verdicts are written to.
        model: the model id the answers came from; release: the release label (a re-scored
            release replaces the earlier run once this one finishes).
        agent: the stable name the release belongs to, its lineage for the gate (default:
            the model id).
        keep_verdicts: keep every verdict in memory (`RunResult.verdicts`).
        judge: the judge step for `judge` cases (`judge_step`); None leaves them pending.
        behaviour: the judges beyond the call (scoring.behaviour.BehaviourJudges: answer_kind,
            claim_support); their figures land in the scores, the verdicts stay as checked.
        server_errors: "count" scores a server error as a wrong answer instead of excluding it.
        max_excluded: above this share of excluded attempts (truncated, provider, environment
            or judge errors) the run is stored as not a result, as `callgate score` stores it.

    Returns the RunResult (run id, scores, failures, case ids with no response, and the
    "not a result" record when most attempts were excluded)."""
    stream = read_response_lines(responses_path, suite.cases.keys(), _Looping(suite),
                                 _WithUserTurns(suite))
    return score_responses(suite, stream, store, model=model, release=release,
                           keep_verdicts=keep_verdicts, judge=judge, shard=shard,
                           server_errors=server_errors, agent=agent,
                           max_excluded=max_excluded, behaviour=behaviour)


class _Looping(Container[str]):
    """The ids of the suite's cases whose calls get results (`Suite.loops`), each case built
    only when a response names it."""

    def __init__(self, suite: Suite) -> None:
        self._suite = suite
        self._known: dict[object, bool] = {}  # asked once per case: a line each is the rule

    def __contains__(self, case_id: object) -> bool:
        known = self._known.get(case_id)
        if known is None:
            cases = self._suite.cases
            known = self._known[case_id] = (case_id in cases
                                            and self._suite.loops(cases[str(case_id)]))
        return known


class _WithUserTurns(Mapping[str, Case]):
    """The suite's cases with later user turns, by id, each built only when asked for."""

    def __init__(self, suite: Suite) -> None:
        self._cases = suite.cases
        self._without: set[str] = set()  # the ids asked for already that have none

    def __getitem__(self, case_id: str) -> Case:
        found: Case | None = self.get(case_id)
        if found is None:
            raise KeyError(case_id)
        return found

    def get(self, case_id: str, default: Any = None) -> Any:  # no KeyError raised per line
        if case_id in self._without or case_id not in self._cases:
            return default
        case = self._cases[case_id]
        if not case.user_turns:
            self._without.add(case_id)
            return default
        return case

    def __iter__(self) -> Iterator[str]:
        return (case_id for case_id, case in self._cases.items() if case.user_turns)

    def __len__(self) -> int:
        return sum(1 for _ in self)
