"""Wiring of the stages: responses → checks → scores → store, for recorded or live runs.

`Recorder` is the one place that turns a response into stored rows and a verdict, so that
`callgate score` (recorded responses) and `callgate run` (live calls) score identically.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from callgate import __version__
from callgate.calibration import Certificate, dimension_rates, require_certificate
from callgate.checks import Verdict, check_response
from callgate.errors import CallgateError
from callgate.judge import (
    Complete,
    Judge,
    JudgeCallError,
    JudgeModel,
    JudgeOutput,
    JudgeOutputError,
    apply_judgement,
    cache_key,
    corrected_share,
    judge_once,
    load_judge,
)
from callgate.responses import Response, read_response_lines
from callgate.scores import ScoreBuilder, Scores
from callgate.store import Store
from callgate.suite import Case, Suite
from callgate.suite import Judge as JudgeExpectation

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
    calls: int = 0
    cache_hits: int = 0


def judge_step(spec_path: Path | str, store: Store, *, uncalibrated: bool,
               environ: Mapping[str, str], concurrency: int = 8) -> JudgeStep:
    """Load a judge for a run: refuse it without a certificate for its exact fingerprint,
    unless the user knowingly scores uncalibrated."""
    judge = load_judge(spec_path)
    stored = store.certificate(judge.fingerprint)
    try:
        certificate = require_certificate(
            judge, Certificate.model_validate_json(stored) if stored else None)
    except CallgateError:
        if not uncalibrated:
            raise
        certificate = None
    model = JudgeModel(judge, environ, concurrency=concurrency)
    return JudgeStep(judge, model.complete, certificate, concurrency, model.aclose)


def judge_payloads(suite: Suite, case: Case, response: Response
                   ) -> tuple[dict[str, Any], dict[str, Any]]:
    """What the judge sees of a case and a response (and what its verdict is cached under)."""
    rubric = case.expect.rubric if isinstance(case.expect, JudgeExpectation) else ""
    case_doc = {"messages": suite.raw_cases[case.id]["messages"],
                "tools": suite.offered_tools(case), "rubric": rubric}
    message = response.message
    response_doc = {
        "content": message.content if message else None,
        "tool_calls": [{"name": c.name, "arguments": c.arguments}
                       for c in (message.tool_calls if message else ())],
    }
    return case_doc, response_doc


def judged_shares(tally: Any, step: JudgeStep) -> dict[str, Any]:
    """Raw and Rogan–Gladen corrected shares of the judged attempts."""
    out: dict[str, Any] = {"n": tally.scored, "fingerprint": step.judge.fingerprint,
                           "certified": step.certificate is not None}
    for dim, successes in (("tool_choice", tally.right_tool),
                           ("arguments", tally.right_arguments)):
        rates = dimension_rates(step.certificate, dim) if step.certificate else None
        raw = 100 * successes / tally.scored if tally.scored else None
        out[dim] = (corrected_share(successes, tally.scored, *rates) if rates and tally.scored
                    else {"raw": raw, "corrected": None, "low": None, "high": None,
                          "n": tally.scored})
    return out


@dataclass
class Recorder:
    """Checks responses for one run, buffers their rows and scores them as they stream."""

    suite: Suite
    store: Store
    run_id: int
    keep_verdicts: bool = False
    judge: JudgeStep | None = None
    builder: ScoreBuilder = field(init=False)
    _awaiting_judge: list[tuple[Case, Response, str | None, Verdict]] = field(
        default_factory=list)
    verdicts: list[Verdict] = field(default_factory=list)
    failures: list[Verdict] = field(default_factory=list)
    _responses: list[tuple] = field(default_factory=list)
    _verdicts: list[tuple] = field(default_factory=list)
    _schemas: dict[str, Any] = field(init=False)

    def __post_init__(self) -> None:
        self.builder = ScoreBuilder(tags_of={cid: c.tags for cid, c in self.suite.cases.items()})
        self._schemas = {name: t.function.parameters for name, t in self.suite.tools.items()}

    def add(self, response: Response, body: str | None = None) -> Verdict:
        case = self.suite.cases[response.case_id]
        verdict = check_response(
            case, response, self._schemas, self.suite.validators, rules=self.suite.match,
            environment=self.suite.environment,
        )
        if verdict.status == "pending_judge" and self.judge is not None:
            # Judged in one concurrent batch at the end (judge_pending); the rows wait too.
            self._awaiting_judge.append((case, response, body, verdict))
            return verdict
        return self._record(response, body, verdict)

    def _record(self, response: Response, body: str | None, verdict: Verdict,
                judged: bool = False) -> Verdict:
        usage = response.usage
        prompt_tokens = usage.prompt_tokens if usage else None
        completion_tokens = usage.completion_tokens if usage else None
        self.builder.add(
            verdict,
            judged=judged,
            cost=response.cost,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            latency_ms=response.latency_ms,
            provider=response.provider,
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
        self._verdicts.append(
            (
                self.run_id,
                verdict.case_id,
                verdict.repeat,
                verdict.status,
                verdict.tool,
                verdict.tool_reason,
                verdict.arguments,
                verdict.schema_kind,
                verdict.arguments_reason,
                verdict.calls,
                int(verdict.right_tool),
                int(verdict.right_arguments),
            )
        )
        if self.keep_verdicts:
            self.verdicts.append(verdict)
        if not (verdict.status == "scored" and verdict.right_arguments) and (
            len(self.failures) < FAILURES_KEPT
        ):
            self.failures.append(verdict)
        if len(self._verdicts) >= BATCH:
            self.flush()
        return verdict

    def flush(self) -> None:
        if self._verdicts:
            self.store.add_attempts(self._responses, self._verdicts)
            self._responses.clear()
            self._verdicts.clear()

    async def judge_pending(self) -> None:
        """Send the attempts waiting for the judge to it, at most `concurrency` at a time.

        Verdicts are cached by judge fingerprint + case + response, and stored with the
        fingerprint and reason. A judge that cannot answer leaves the attempt pending."""
        step, waiting = self.judge, self._awaiting_judge
        if step is None or not waiting:
            return
        self._awaiting_judge = []
        gate = asyncio.Semaphore(step.concurrency)
        fingerprint = step.judge.fingerprint

        async def one(case: Case, response: Response) -> JudgeOutput | str:
            case_doc, response_doc = judge_payloads(self.suite, case, response)
            key = cache_key(fingerprint, case_doc, response_doc)
            cached = self.store.judge_outputs([key])
            if key in cached:
                step.cache_hits += 1
                return JudgeOutput.model_validate_json(cached[key])
            async with gate:
                try:
                    output = await judge_once(
                        step.judge, step.complete, tools=case_doc["tools"],
                        conversation=case_doc["messages"], rubric=case_doc["rubric"],
                        response=response_doc)
                except (JudgeOutputError, JudgeCallError) as exc:
                    return str(exc)
            self.store.save_judge_outputs([(key, fingerprint, output.model_dump_json())])
            step.calls += 1
            return output

        try:
            outputs = await asyncio.gather(*(one(case, response)
                                             for case, response, _, _ in waiting))
        finally:
            if step.aclose is not None:
                await step.aclose()
        judgements = []
        for (_, response, body, verdict), output in zip(waiting, outputs, strict=True):
            if isinstance(output, str):
                pending = verdict.model_copy(update={"tool_reason": f"judge failed: {output}"})
                self._record(response, body, pending)
                continue
            self._record(response, body, apply_judgement(verdict, output), judged=True)
            judgements.append((self.run_id, verdict.case_id, verdict.repeat, fingerprint,
                               output.tool_choice, output.arguments, output.reason))
        self.store.save_judgements(judgements)

    def keep_unjudged(self) -> None:
        """Record the attempts the judge did not get to (a run stopped early) as pending."""
        waiting, self._awaiting_judge = self._awaiting_judge, []
        for _, response, body, verdict in waiting:
            self._record(response, body, verdict)

    def finish(self) -> Scores:
        if self._awaiting_judge:
            raise RuntimeError("judge_pending() or keep_unjudged() must run before finish()")
        self.flush()
        scores = self.builder.build()
        if self.judge is not None:
            scores = scores.model_copy(update={
                "judged": judged_shares(self.builder.judged, self.judge),
                "uncalibrated": self.judge.certificate is None,
            })
        self.store.finish_run(self.run_id, scores.model_dump(mode="json"))
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
) -> RunResult:
    """Check, score and store responses as one transaction: all of it lands, or none.

    With a judge, attempts whose case expects one are judged after the deterministic checks
    (the judge's own verdicts are cached and kept even if the rest is rolled back)."""
    store.save_suite(suite)
    fingerprint = judge.judge.fingerprint if judge else None
    with store.atomic():
        run_id = store.replace_run(suite, model, release, source, __version__, fingerprint)
        recorder = Recorder(suite, store, run_id, keep_verdicts=keep_verdicts, judge=judge)
        seen: set[str] = set()
        for response, body in responses:
            recorder.add(response, body)
            seen.add(response.case_id)
        if judge is not None:
            asyncio.run(recorder.judge_pending())
        scores = recorder.finish()
    missing = [case_id for case_id in suite.cases if case_id not in seen]
    return RunResult(run_id, suite, model, release, scores, recorder.verdicts,
                     recorder.failures, missing)


def score_file(
    suite: Suite,
    responses_path: Path | str,
    store: Store,
    *,
    model: str,
    release: str,
    keep_verdicts: bool = True,
    judge: JudgeStep | None = None,
) -> RunResult:
    """Score a recorded-responses file (JSON Lines) against a suite and store everything."""
    stream = read_response_lines(responses_path, set(suite.cases))
    return score_responses(suite, stream, store, model=model, release=release,
                           keep_verdicts=keep_verdicts, judge=judge)
