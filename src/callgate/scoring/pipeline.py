"""Wiring of the stages: responses → checks → scores → store, for recorded or live runs.

`Recorder` is the one place that turns a response into stored rows and a verdict, so that
`callgate score` (recorded responses) and `callgate run` (live calls) score identically.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from callgate.checks.check import check_response
from callgate.checks.verdict import ServerErrors, Verdict
from callgate.errors import CallgateError
from callgate.models.config import Candidate
from callgate.scoring.scores import ScoreBuilder, Scores
from callgate.store.db import Store, verdict_row
from callgate.suites.environment import EnvironmentError_
from callgate.suites.responses import Response, read_response_lines
from callgate.suites.shard import Shard
from callgate.suites.suite import Case, Suite, case_tags
from callgate.version import __version__

# The judge is loaded only where a run uses one: scoring recorded answers without a judge does
# not pay for importing it (about a tenth of a second per command).
if TYPE_CHECKING:
    from callgate.judging.calibration import Certificate
    from callgate.judging.judge import (
        Complete,
        Judge,
        JudgeModel,
        JudgeOutput,
        JudgeOutputError,
        JudgeSpec,
    )

BATCH = 2000
FAILURES_KEPT = 50  # failed attempts kept in memory for the printed report


@dataclass
class JudgeStep:
    """The judge as a run uses it: certified (or knowingly not) and callable."""

    judge: Judge
    complete: Complete
    certificate: Certificate | None  # None only when scoring --uncalibrated
    concurrency: int = 8
    aclose: Callable[[], Awaitable[None]] | None = None  # closes the client after judging
    model: JudgeModel | None = None  # a live run paces its requests (running.pacing)
    calls: int = 0
    cache_hits: int = 0


def at_endpoint(judge: Judge, api_base: str | None, api_key_env: str | None = None) -> Judge:
    """The same judge reached at another endpoint (a proxy, a local vLLM or Ollama server).

    The fingerprint is kept: it names what decides (prompt, model snapshot, parameters), and
    the endpoint only says where that model is served, as a key only says who pays. The key of
    the spec's own endpoint is never sent elsewhere: only `api_key_env` given here is used."""
    if api_base is None:
        if api_key_env is None:
            return judge
        return _with_spec(judge, judge.spec.model_copy(update={"api_key_env": api_key_env}))
    try:  # the candidates' rules: no credentials or query string in the URL, a NAME for the key
        Candidate.model_validate({"model": judge.spec.model, "api_base": api_base,
                                  "api_key_env": api_key_env})
    except ValueError as exc:
        first = exc.errors()[0] if hasattr(exc, "errors") else {"msg": str(exc)}
        field = ".".join(str(part) for part in first.get("loc", ())) or "--api-base"
        raise CallgateError(f"--{field.replace('_', '-')}: {first['msg']}") from None
    spec = judge.spec.model_copy(update={"api_base": api_base, "api_key_env": api_key_env})
    return _with_spec(judge, spec)


def _with_spec(judge: Judge, spec: JudgeSpec) -> Judge:
    """The judge with another endpoint: the client (its candidate) follows the spec."""
    from callgate.judging.judge import judge_candidate

    return judge.model_copy(update={"spec": spec, "candidate": judge_candidate(spec)})


def judge_step(spec_path: Path | str, store: Store, *, uncalibrated: bool,
               environ: Mapping[str, str], concurrency: int = 8,
               api_base: str | None = None, api_key_env: str | None = None) -> JudgeStep:
    """Load a judge for a run: refuse it without a certificate for its exact fingerprint,
    unless the user knowingly scores uncalibrated. `spec_path` may be a bundled judge's name."""
    from callgate.judging.bundled import judge_spec
    from callgate.judging.calibration import require_certificate
    from callgate.judging.judge import JudgeModel, load_judge

    judge = at_endpoint(load_judge(judge_spec(spec_path)), api_base, api_key_env)
    try:
        certificate = require_certificate(judge, store)
    except CallgateError:
        if not uncalibrated:
            raise
        certificate = None
    model = JudgeModel(judge, environ, concurrency=concurrency)
    return JudgeStep(judge, model.complete, certificate, concurrency, model.aclose, model)


@dataclass
class JudgedTally:
    """What the judge decided over a run's judged attempts, on the quantities calibration
    measures its error rates on.

    tool_choice: the judge's tool_choice over every judged attempt. arguments: the judge's
    pass/fail over the attempts whose tool choice it passed, leaving out its n/a (calibration
    counts only items a person labelled pass or fail) and the attempts whose arguments already
    failed JSON or schema validation (failures the judge did not decide; counted apart)."""

    n: int = 0
    tool_choice: int = 0
    arguments_n: int = 0
    arguments: int = 0
    not_applicable: int = 0
    deterministic_failures: int = 0
    judge_errors: int = 0  # replies that were not a verdict: in no share, counted here

    def add(self, verdict: Verdict, output: JudgeOutput) -> None:
        """`verdict` is the attempt's verdict before the judge (its JSON/schema findings)."""
        self.n += 1
        if output.tool_choice != "pass":
            return
        self.tool_choice += 1
        if verdict.arguments in ("invalid_json", "schema_violation"):
            self.deterministic_failures += 1
        elif output.arguments == "n/a":
            self.not_applicable += 1
        else:
            self.arguments_n += 1
            self.arguments += output.arguments == "pass"


def judged_shares(tally: JudgedTally, step: JudgeStep) -> dict[str, Any]:
    """Raw and Rogan–Gladen corrected shares of the judged attempts, per dimension, each over
    the attempts its calibration rates apply to (see `JudgedTally`)."""
    from callgate.judging.calibration import dimension_rates
    from callgate.judging.judge import corrected_share

    out: dict[str, Any] = {"n": tally.n, "fingerprint": step.judge.fingerprint,
                           "certified": step.certificate is not None}
    for dim, successes, n in (("tool_choice", tally.tool_choice, tally.n),
                              ("arguments", tally.arguments, tally.arguments_n)):
        rates = dimension_rates(step.certificate, dim) if step.certificate else None
        share = corrected_share(successes, n, *rates) if rates and n else None
        out[dim] = share or {"raw": 100 * successes / n if n else None, "corrected": None,
                             "low": None, "high": None, "n": n}
    out["arguments"]["not_applicable"] = tally.not_applicable
    out["judge_errors"] = tally.judge_errors
    out["arguments"]["deterministic_failures"] = tally.deterministic_failures
    # Which estimator each figure is (an audit adds ppi++: callgate judge audit RUN).
    out["estimators"] = {"raw": "raw", "corrected": "rogan_gladen",
                         "figures": "checks, with the judge's verdicts as given"}
    return out


@dataclass
class Recorder:
    """Checks responses for one run, buffers their rows and scores them as they stream."""

    suite: Suite
    store: Store
    run_id: int
    keep_verdicts: bool = False
    judge: JudgeStep | None = None
    server_errors: ServerErrors = "exclude"  # or count them as wrong answers (check_response)
    builder: ScoreBuilder = field(init=False)
    _awaiting_judge: list[tuple[Case, Response, str | None, Verdict]] = field(
        default_factory=list)
    judged_tally: JudgedTally = field(default_factory=JudgedTally)
    verdicts: list[Verdict] = field(default_factory=list)
    failures: list[Verdict] = field(default_factory=list)
    _failed_cases: set[str] = field(default_factory=set)
    _repeat_slots: list[int] = field(default_factory=list)  # failures[i] repeats a kept case
    _responses: list[tuple] = field(default_factory=list)
    _verdicts: list[tuple] = field(default_factory=list)
    _schemas: dict[str, Any] = field(init=False)

    def __post_init__(self) -> None:
        self.builder = ScoreBuilder(tags_of=case_tags(self.suite.cases))
        self._schemas = {name: t.function.parameters for name, t in self.suite.tools.items()}

    def add(self, response: Response, body: str | None = None) -> Verdict:
        case = self.suite.cases[response.case_id]
        verdict = check_response(
            case, response, self._schemas, self.suite.validators, rules=self.suite.match,
            environment=self.suite.environment, server_errors=self.server_errors,
        )
        if verdict.status == "pending_judge" and self.judge is not None:
            # Judged in one concurrent batch at the end (judge_pending); the rows wait too.
            self._awaiting_judge.append((case, response, body, verdict))
            return verdict
        return self._record(response, body, verdict)

    def _record(self, response: Response, body: str | None, verdict: Verdict) -> Verdict:
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
        self._responses.append(
            (
                self.run_id,
                response.case_id,
                response.repeat,
                response.finish_reason,
                response.provider,
                response.cost,
                response.latency_ms,
                prompt_tokens,
                completion_tokens,
                response.error.kind if response.error else None,
                body if body is not None else response.model_dump_json(exclude_none=True),
            )
        )
        self._verdicts.append(verdict_row(self.run_id, verdict))
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
            self.store.add_attempts(self._responses, self._verdicts)
            self._responses.clear()
            self._verdicts.clear()

    @property
    def awaiting_judge(self) -> int:
        """How many attempts wait for the judge (recorded by judge_pending or keep_unjudged)."""
        return len(self._awaiting_judge)

    async def judge_pending(self) -> None:
        """Send the attempts waiting for the judge to it, at most `concurrency` at a time.

        Verdicts are cached by judge fingerprint + case + response, each committed as it
        arrives (call this outside any transaction, so none is lost with a rollback), and stored
        with the fingerprint and reason. A judge that cannot be reached leaves the attempt
        pending; a reply that is not a verdict (after the spec's retries) makes it a judge_error.
        If judging is cut short (an exception, Ctrl-C), the attempts judged so far are recorded
        and the others stay waiting, for keep_unjudged to record as pending."""
        from callgate.judging.judge import (
            JudgeCallError,
            JudgeOutput,
            JudgeOutputError,
            cache_key,
            judge_once,
        )
        from callgate.judging.payloads import judge_payloads

        step, waiting = self.judge, list(self._awaiting_judge)
        if step is None or not waiting:
            return
        gate = asyncio.Semaphore(step.concurrency)
        fingerprint = step.judge.fingerprint
        # A verdict; a JudgeOutputError (no verdict: judge_error); or why it is still pending.
        done: dict[int, JudgeOutput | JudgeOutputError | str] = {}

        async def one(index: int, case: Case, response: Response) -> None:
            try:
                case_doc, response_doc = judge_payloads(self.suite, case, response)
            except EnvironmentError_ as exc:  # the checks met it too: not the judge's to decide
                done[index] = f"the environment failed while replaying the calls: {exc}"
                return
            key = cache_key(fingerprint, case_doc, response_doc)
            cached = self.store.judge_outputs([key])
            if key in cached:
                step.cache_hits += 1
                done[index] = JudgeOutput.model_validate_json(cached[key])
                return
            async with gate:
                try:
                    output = await judge_once(
                        step.judge, step.complete, tools=case_doc["tools"],
                        conversation=case_doc["messages"], rubric=case_doc["rubric"],
                        response=response_doc)
                except JudgeOutputError as exc:
                    done[index] = exc
                    return
                except JudgeCallError as exc:
                    done[index] = str(exc)
                    return
            self.store.save_judge_outputs([(key, fingerprint, output.model_dump_json())])
            step.calls += 1
            done[index] = output

        tasks = [asyncio.ensure_future(one(index, case, response))
                 for index, (case, response, _, _) in enumerate(waiting)]
        try:
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:  # one failed: stop the others (their outputs so far are saved)
                task.cancel()
            try:
                await asyncio.gather(*tasks, return_exceptions=True)
                if step.aclose is not None:
                    await step.aclose()
            finally:
                self._record_judged(waiting, done)

    def _record_judged(self, waiting: list[tuple[Case, Response, str | None, Verdict]],
                       done: Mapping[int, JudgeOutput | JudgeOutputError | str]) -> None:
        """Record the attempts the judge answered (or failed on); the rest keep waiting."""
        from callgate.judging.judge import JudgeOutputError, apply_judgement

        fingerprint = self.judge.judge.fingerprint if self.judge else ""
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
            judgements.append((self.run_id, verdict.case_id, verdict.repeat, fingerprint,
                               output.tool_choice, output.arguments, output.reason))
        if judgements:
            self.store.save_judgements(judgements)

    def keep_unjudged(self) -> None:
        """Record the attempts the judge did not get to (a run stopped early) as pending."""
        waiting, self._awaiting_judge = self._awaiting_judge, []
        for _, response, body, verdict in waiting:
            self._record(response, body, verdict)

    def finish(self, status: str = "done") -> Scores:
        """Write the last rows and the scores, and set the run's status in the same step."""
        if self._awaiting_judge:
            raise RuntimeError("judge_pending() or keep_unjudged() must run before finish()")
        self.flush()
        scores = self.builder.build().model_copy(update={"server_errors": self.server_errors})
        if self.judge is not None:
            scores = scores.model_copy(update={
                "judged": judged_shares(self.judged_tally, self.judge),
                "uncalibrated": self.judge.certificate is None,
            })
        self.store.finish_run(self.run_id, scores.model_dump(mode="json"), status)
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

    The release belongs to `agent` (default: `model`, the model id the answers came from)."""
    fingerprint = judge.judge.fingerprint if judge else None
    new_suite = store.save_suite(suite)
    run_id = store.replace_run(suite, agent or model, release, source, __version__, fingerprint,
                               shard=(shard.index, shard.count) if shard else None,
                               model=model, model_params=model_params)
    if shard is not None:
        responses = ((r, b) for r, b in responses if shard.holds(r.case_id))
    recorder = Recorder(suite, store, run_id, keep_verdicts=keep_verdicts, judge=judge,
                        server_errors=server_errors)
    seen: set[str] = set()
    try:
        for response, body in responses:
            recorder.add(response, body)
            seen.add(response.case_id)
        if recorder.awaiting_judge:
            recorder.flush()  # the checked rows land with the run row, still `running`
        else:
            scores = recorder.finish()
    except BaseException:
        store.discard_run(run_id)
        if new_suite:  # a bad responses file leaves the store as it was
            store.discard_suite_if_unused(suite.fingerprint)
        raise
    if recorder.awaiting_judge:
        completed = False
        try:
            asyncio.run(recorder.judge_pending())
            completed = True
        finally:
            with store.atomic():
                recorder.keep_unjudged()
                scores = recorder.finish("done" if completed else "interrupted")
    missing = [case_id for case_id in suite.cases
               if case_id not in seen and (shard is None or shard.holds(case_id))]
    return RunResult(run_id, suite, model, release, scores, recorder.verdicts,
                     recorder.failures, missing, agent or model)


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
        server_errors: "count" scores a server error as a wrong answer instead of excluding it.

    Returns the RunResult (run id, scores, failures, case ids with no response)."""
    multi_turn = {case_id for case_id, case in suite.cases.items() if suite.loops(case)}
    stream = read_response_lines(responses_path, set(suite.cases), multi_turn)
    return score_responses(suite, stream, store, model=model, release=release,
                           keep_verdicts=keep_verdicts, judge=judge, shard=shard,
                           server_errors=server_errors, agent=agent)
