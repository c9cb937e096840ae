"""`score FOLDER --traces FILE --production --claims-judge JUDGE`: the claim_support judge on
production traces (docs/traces.md, "Claims the tool results do not back"). Each answered
trace's final answer is judged against the trace's own tool results, with the payload a
multi-turn suite case gets (judging/trace_payloads.py), through the same JudgeStep: the judge
refused without a certificate unless --uncalibrated, its calls paced and retried, its verdicts
cached without the judge's reason (a rerun asks nothing; docs/traces.md, "What the store keeps
of a production trace"). A judge fault (no verdict after the retries, or a reply that is
no verdict) is the judge's: `judge_error`, counted apart, never the agent's failure."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from callgate.errors import CallgateError
from callgate.importers.traces import Trace
from callgate.importers.traces.offered import offered_tools
from callgate.importers.traces.otlp import SpanShapeError
from callgate.judging.judge import JudgeOutput
from callgate.judging.step import JudgeStep, Outcome, Payloads
from callgate.judging.trace_payloads import trace_claim_payloads
from callgate.store.db import Store

ClaimStatus = Literal["supported", "unsupported", "no_text_answer", "no_tool_result",
                      "judge_error"]
# Counted apart from the share: not judged (nothing to judge), or no verdict came.
NOT_JUDGED = ("no_text_answer", "no_tool_result")


@dataclass(frozen=True)
class ClaimVerdict:
    """What the claim judge decided of one trace (None for a trace the model did not
    answer: it is a provider error, and judged for nothing)."""

    status: ClaimStatus
    # The judge's reason (None from the store's cache: production verdicts are cached
    # without it), or what kept a verdict from coming.
    reason: str | None
    judge: str  # the judge's fingerprint


def claims_step(step: JudgeStep) -> JudgeStep:
    """The step, refused unless it decides claim_support (as suite mode's BehaviourJudges)."""
    if step.judge.spec.dimensions != ("claim_support",):
        raise CallgateError(f"judge {step.judge.spec.name} decides "
                            f"{', '.join(step.judge.spec.dimensions)}, not claim_support")
    return step


def _tools(trace: Trace, answered: Sequence[Any], raw: list[dict[str, Any]] | None
           ) -> list[dict[str, Any]]:
    """The tools the first answered model call was offered, as its span records them (read
    and checked already by the production checks), else the folder's tools.json."""
    for call in answered:
        try:
            recorded = offered_tools(call.span)
        except SpanShapeError:  # pragma: no cover - the checks refused the trace already
            recorded = None
        if recorded is not None:
            return list(recorded)
    return list(raw or [])


def trace_payloads(traces: Sequence[tuple[Trace, Sequence[Any]]],
                   raw_tools: list[dict[str, Any]] | None) -> dict[int, Payloads | str]:
    """Each answered trace's payloads, or why it is not judged, by its index."""
    out: dict[int, Payloads | str] = {}
    for index, (trace, answered) in enumerate(traces):
        if answered:
            out[index] = trace_claim_payloads(answered, _tools(trace, answered, raw_tools))
    return out


def _verdict(outcome: Outcome, fingerprint: str) -> ClaimVerdict:
    if isinstance(outcome, JudgeOutput):
        unsupported = outcome.claim_support == "fail"
        return ClaimVerdict("unsupported" if unsupported else "supported",
                            outcome.reason or None, fingerprint)
    if isinstance(outcome, str) and outcome in NOT_JUDGED:
        return ClaimVerdict(outcome, None, fingerprint)  # type: ignore[arg-type]
    return ClaimVerdict("judge_error", str(outcome), fingerprint)


def judge_claims(step: JudgeStep, store: Store,
                 traces: Sequence[tuple[Trace, Sequence[Any]]],
                 raw_tools: list[dict[str, Any]] | None) -> list[ClaimVerdict | None]:
    """The claim verdict of each trace (given with its answered model calls), in order."""
    claims_step(step)
    payloads = trace_payloads(traces, raw_tools)
    done: dict[int, Outcome] = {}
    # Production traces are real users' data: the store keeps each verdict's label, never
    # the judge's reason, which can quote the trace (a rerun still asks nothing).
    asyncio.run(step.judge_all(store, payloads, done, cache_reasons=False))
    return [_verdict(done.get(index, "not judged"), step.fingerprint) if index in payloads
            else None for index in range(len(traces))]


def claim_counts(verdicts: Sequence[ClaimVerdict | None]) -> dict[str, int]:
    """The counts the store sums per group (store/production_rows.py): claims_asked (answered
    traces), _judged (a verdict came), _unsupported, _not_judged (no text answer or no tool
    result), _judge_errors."""
    statuses = [v.status for v in verdicts if v is not None]
    return {"claims_asked": len(statuses),
            "claims_judged": sum(s in ("supported", "unsupported") for s in statuses),
            "claims_unsupported": statuses.count("unsupported"),
            "claims_not_judged": sum(s in NOT_JUDGED for s in statuses),
            "claims_judge_errors": statuses.count("judge_error")}
