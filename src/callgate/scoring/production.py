"""`callgate score FOLDER --traces FILE --production`: production traces scored without
expected answers (docs/traces.md, "Production samples"). Each trace is one sample, checked
for what needs no expectation: every tool call against the tools its model call was offered
(the span's own list where the instrumentation records it, else the folder's tools.json; a
call to a tool not offered is flagged), and the folder's policies. The samples are stored with
the trace id and the UTC day the trace started, for `callgate history --production`. With
a claim_support judge (production_claims.py), each answered trace's final answer is judged
against the trace's own tool results too."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from callgate.checks.parsing import parse_calls
from callgate.checks.policies import violations
from callgate.checks.schema import schema_problem
from callgate.checks.verdict import Violation
from callgate.errors import InputError
from callgate.importers.traces import Trace, read_trace_file
from callgate.importers.traces.calls import ModelCall
from callgate.importers.traces.lines import user_turns_of
from callgate.importers.traces.offered import offered_tools
from callgate.importers.traces.otlp import SpanShapeError
from callgate.scoring.production_figures import COUNTS, ProductionFigures, figures_of
from callgate.scoring.production_tools import (
    Offered,
    ProductionFolder,
    ToolBook,
    load_production_folder,
)
from callgate.store.db import Store
from callgate.suites.policies import Policies
from callgate.suites.responses import ToolCall

if TYPE_CHECKING:  # the judge's modules are loaded only when a claim judge is given
    from callgate.judging.step import JudgeStep
    from callgate.scoring.production_claims import ClaimVerdict


@dataclass(frozen=True)
class Sample:
    """One production trace, checked."""

    trace_id: str
    started_at: str  # the trace's first span's start, UTC, ISO 8601
    release: str | None  # --release, else its resource's service.version, else None
    provider_error: bool  # its last model call failed: counted apart, not in the shares
    calls: int  # tool calls over its answered model calls
    unknown_calls: int  # calls to a tool its model call was not offered
    problems: tuple[str, ...]  # why each call that is not valid is not (call N (tool): ...)
    violations: tuple[Violation, ...]
    claims: ClaimVerdict | None = None  # the claim judge's, when it was asked

    @property
    def day(self) -> str:
        return self.started_at[:10]

    @property
    def schema_valid(self) -> bool:
        return not self.provider_error and not self.problems

    @property
    def policy_clean(self) -> bool:
        return not self.provider_error and not self.violations


@dataclass(frozen=True)
class _Called:
    """The tool calls of a trace, in order, each with the tools its model call was offered
    and the user turn it was made in."""

    calls: list[ToolCall]
    offered: list[Offered]
    turns: list[int]


def _answered(trace: Trace) -> tuple[ModelCall, ...]:
    """The model calls that answered (a failed call followed by another was retried, as
    importers.traces.lines reads it); empty when the last one failed."""
    if trace.calls[-1].answer is None:
        return ()
    return tuple(c for c in trace.calls if c.answer is not None)


def _offered(path: Path, call: ModelCall, folder: ProductionFolder, book: ToolBook
             ) -> Offered | None:
    try:
        recorded = offered_tools(call.span)
        return book.offered(recorded) if recorded is not None else folder.tools
    except (SpanShapeError, ValueError) as exc:
        raise InputError(path, f"span {call.span.span_id}: {exc}", line=call.span.line) from None


def _called(path: Path, trace: Trace, answered: tuple[ModelCall, ...],
            folder: ProductionFolder, book: ToolBook) -> _Called:
    out = _Called([], [], [])
    if not answered:
        return out
    for call, turn in zip(answered, user_turns_of(answered), strict=True):
        assert call.answer is not None
        made = call.answer.get("tool_calls") or []
        offered = _offered(path, call, folder, book)
        if made and offered is None:
            raise InputError(path, f"trace {trace.trace_id}: span {call.span.span_id}: tool "
                             "calls, and neither the span records the tools it was offered "
                             "(llm.tools, gen_ai.tool.definitions) nor the folder has a "
                             "tools.json", line=call.span.line)
        for tool_call in made:
            function = tool_call["function"]
            out.calls.append(ToolCall(id=tool_call.get("id"), name=function["name"],
                                      arguments=function["arguments"]))
            assert offered is not None
            out.offered.append(offered)
            out.turns.append(turn)
    return out


def _started(path: Path, trace: Trace) -> str:
    """The UTC start of the trace's first span: the day a sample is counted in."""
    unset = next((span for span in trace.spans if span.start_ns <= 0), None)
    if unset is not None:
        raise InputError(path, f"trace {trace.trace_id}: span {unset.span_id}: no "
                         "startTimeUnixNano (a production sample is counted on the day its "
                         "trace started)", line=unset.line)
    moment = datetime.fromtimestamp(trace.start_ns / 1e9, tz=UTC)
    return moment.isoformat(timespec="microseconds")


def _release(path: Path, trace: Trace) -> str | None:
    versions = {span.service_version for span in trace.spans} - {None}
    if len(versions) > 1:
        raise InputError(path, f"trace {trace.trace_id}: its spans' resources name "
                         f"{len(versions)} service.version values "
                         f"({', '.join(sorted(str(v) for v in versions)[:3])}): give --release",
                         line=trace.calls[0].span.line)
    return versions.pop() if versions else None


def check_trace(path: Path, trace: Trace, folder: ProductionFolder, book: ToolBook,
                policies: Policies, release: str | None = None) -> Sample:
    """One trace as a sample; `release` given, the trace's service.version is not read."""
    answered = _answered(trace)
    called = _called(path, trace, answered, folder, book)
    parsed = parse_calls(called.calls)
    problems: list[str] = []
    unknown = 0
    for call, offered in zip(parsed, called.offered, strict=True):
        where = f"call {call.index + 1} ({call.name})"
        if call.name not in offered.names:
            unknown += 1
            problems.append(f"{where}: a tool its model call was not offered")
            continue
        problem = schema_problem(call, offered.schemas, offered.validators, values=False)
        if problem is not None:
            problems.append(f"{where}: {problem}")
    return Sample(trace_id=trace.trace_id, started_at=_started(path, trace),
                  release=release if release is not None else _release(path, trace),
                  provider_error=not answered, calls=len(parsed), unknown_calls=unknown,
                  problems=tuple(problems),
                  violations=violations(policies, parsed, called.turns))


def counts_of(samples: Sequence[Sample]) -> dict[str, int]:
    """The summed counts (production_figures.COUNTS) of samples."""
    scored = [s for s in samples if not s.provider_error]
    counts = {"traces": len(samples), "provider_errors": len(samples) - len(scored),
              "schema_valid": sum(s.schema_valid for s in scored),
              "policy_clean": sum(s.policy_clean for s in scored),
              "calls": sum(s.calls for s in scored),
              "unknown_calls": sum(s.unknown_calls for s in scored)}
    assert set(counts) == set(COUNTS)
    return counts


def figures_of_samples(samples: Sequence[Sample]) -> ProductionFigures:
    policies = Counter(v.policy for s in samples if not s.provider_error for v in s.violations)
    return figures_of(counts_of(samples), policies)


def check_traces(folder: ProductionFolder, path: Path | str, release: str | None = None,
                 ) -> tuple[list[Sample], Policies]:
    """Every trace of the export checked, before anything is stored: an InputError names the
    file, the line, the span or trace and what."""
    _, samples, policies = _checked(folder, path, release)
    return samples, policies


def _checked(folder: ProductionFolder, path: Path | str, release: str | None
             ) -> tuple[list[Trace], list[Sample], Policies]:
    source = Path(path)
    traces = read_trace_file(source)
    book = ToolBook()
    for trace in traces:  # the tools offered first: the policies may name any of them
        _called(source, trace, _answered(trace), folder, book)
    offered = {name for tools in book.compiled.values() for name in tools.names}
    policies = folder.policies(offered)
    samples = [check_trace(source, trace, folder, book, policies, release)
               for trace in traces]
    return traces, samples, policies


@dataclass(frozen=True)
class ProductionResult:
    batch_id: int
    agent: str
    release: str | None
    samples: list[Sample]  # every trace of the file
    stored: int  # the samples stored; the others were stored before (same agent, trace id)
    figures: ProductionFigures  # over the samples of the file
    claims: dict[str, int] | None = None  # production_claims.claim_counts, with a claim judge


def sample_row(sample: Sample) -> dict[str, Any]:
    """A sample as the store keeps it (store/production_rows.py)."""
    return {
        "trace_id": sample.trace_id, "started_at": sample.started_at, "day": sample.day,
        "release": sample.release,
        "provider_error": int(sample.provider_error), "calls": sample.calls,
        "unknown_calls": sample.unknown_calls, "schema_valid": int(sample.schema_valid),
        "policy_clean": int(sample.policy_clean),
        "problems": json.dumps(list(sample.problems), ensure_ascii=False)
        if sample.problems else None,
        "violations": json.dumps([v.model_dump() for v in sample.violations],
                                 ensure_ascii=False) if sample.violations else None,
        "claims": sample.claims.status if sample.claims else None,
        "claims_judge": sample.claims.judge if sample.claims else None,
    }


def score_production(folder_path: Path | str, path: Path | str, store: Store, *, agent: str,
                     release: str | None = None, model: str | None = None,
                     claims: JudgeStep | None = None) -> ProductionResult:
    """Check every trace of an export against a production folder and store the samples
    (one transaction: all of them or none). Each sample's release is `release`, else the
    service.version of its trace's resource (OpenTelemetry's SDK Resource), else none. A
    trace already stored for the agent is kept as it was and not counted twice (only the
    claim verdict it lacked, if `claims` is given, is added to it).

    `claims`: the claim_support judge (already refused without a certificate unless scoring
    knowingly uncalibrated), asked after every trace was read and checked; its verdicts are
    cached in the store as it gives them, the samples stored once all are in."""
    folder = load_production_folder(folder_path)
    traces, samples, policies = _checked(folder, path, release)
    verdicts = None
    if claims is not None:
        from callgate.scoring.production_claims import claim_counts, judge_claims

        verdicts = judge_claims(claims, store, [(t, _answered(t)) for t in traces],
                                folder.raw_tools)
        samples = [replace(s, claims=v) for s, v in zip(samples, verdicts, strict=True)]
    batch = {"agent": agent, "release": release, "model": model, "folder": folder.name,
             "source": str(path), "checked_against": folder.fingerprint(policies),
             "traces": len(samples), "claims_judge": claims.fingerprint if claims else None}
    batch_id, stored = store.save_production_samples(batch, [sample_row(s) for s in samples])
    return ProductionResult(batch_id, agent, release, samples, stored,
                            figures_of_samples(samples),
                            None if verdicts is None else claim_counts(verdicts))
