"""Wiring of the stages: responses → checks → scores → store, for recorded or live runs.

`Recorder` is the one place that turns a response into stored rows and a verdict, so that
`callgate score` (recorded responses) and `callgate run` (live calls) score identically.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from callgate import __version__
from callgate.checks import Verdict, check_response
from callgate.responses import Response, read_response_lines
from callgate.scores import ScoreBuilder, Scores
from callgate.store import Store
from callgate.suite import Suite

BATCH = 2000
FAILURES_KEPT = 50  # failed attempts kept in memory for the printed report


@dataclass
class Recorder:
    """Checks responses for one run, buffers their rows and scores them as they stream."""

    suite: Suite
    store: Store
    run_id: int
    keep_verdicts: bool = False
    builder: ScoreBuilder = field(init=False)
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
            case, response, self._schemas, self.suite.validators, rules=self.suite.match
        )
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

    def finish(self) -> Scores:
        self.flush()
        scores = self.builder.build()
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
) -> RunResult:
    """Check, score and store responses as one transaction: all of it lands, or none."""
    store.save_suite(suite)
    with store.atomic():
        run_id = store.replace_run(suite, model, release, source, __version__)
        recorder = Recorder(suite, store, run_id, keep_verdicts=keep_verdicts)
        seen: set[str] = set()
        for response, body in responses:
            recorder.add(response, body)
            seen.add(response.case_id)
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
) -> RunResult:
    """Score a recorded-responses file (JSON Lines) against a suite and store everything."""
    stream = read_response_lines(responses_path, set(suite.cases))
    return score_responses(
        suite, stream, store, model=model, release=release, keep_verdicts=keep_verdicts
    )
