"""Traces as attempts: every trace holding model calls is one attempt, its model calls in the
order they started are its turns, and the case it answers is named by a span attribute (any
span of the trace; default `callgate.case_id`) or else found by its first user message.

Each attempt becomes a recorded-response line (docs/formats.md) with the trace id kept under
`trace_id`, so `callgate score` reads it exactly as it reads a recorded conversation."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from callgate.errors import InputError
from callgate.importers.traces.calls import ModelCall
from callgate.importers.traces.genai import is_genai, read_genai
from callgate.importers.traces.openinference import is_openinference, read_openinference
from callgate.importers.traces.otlp import Span, SpanShapeError, read_spans
from callgate.suites.cases import Case

CASE_ATTRIBUTE = "callgate.case_id"


@dataclass(frozen=True)
class Trace:
    trace_id: str
    spans: tuple[Span, ...]
    calls: tuple[ModelCall, ...]  # the model calls, in the order they started

    @property
    def start_ns(self) -> int:
        return min(span.start_ns for span in self.spans)


def _model_call(path: Path, span: Span) -> ModelCall | None:
    try:
        if is_openinference(span):
            return read_openinference(span)
        if is_genai(span):
            return read_genai(span)
    except SpanShapeError as exc:
        raise InputError(path, f"span {span.span_id}: {exc}", line=span.line) from None
    return None


def read_trace_file(path: Path | str) -> list[Trace]:
    """The traces of an OTLP JSON export that hold model calls, in the order they started."""
    source = Path(path)
    spans: dict[str, list[Span]] = {}
    calls: dict[str, list[ModelCall]] = {}
    for span in read_spans(source):
        spans.setdefault(span.trace_id, []).append(span)
        call = _model_call(source, span)
        if call is not None:
            calls.setdefault(span.trace_id, []).append(call)
    traces = []
    for trace_id, found in calls.items():
        kinds = {is_openinference(call.span) for call in found}
        if len(kinds) > 1:
            raise InputError(source, f"trace {trace_id} holds model calls of both GenAI and "
                             "OpenInference spans (two instrumentations of one client?): keep "
                             "one", line=found[0].span.line)
        ordered = tuple(sorted(found, key=lambda c: (c.span.start_ns, c.span.end_ns)))
        traces.append(Trace(trace_id, tuple(spans[trace_id]), ordered))
    if not traces:
        names = sorted({span.name for group in spans.values() for span in group})[:3]
        raise InputError(source, "no model call in any span (neither a GenAI chat span nor an "
                         f"OpenInference LLM span; spans found: {', '.join(names)})")
    return sorted(traces, key=lambda t: t.start_ns)


def _text(content: Any) -> str | None:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [part.get("text") for part in content if isinstance(part, dict)]
        return "".join(t for t in texts if isinstance(t, str))
    return None


def first_user_text(messages: Any) -> str | None:
    for message in messages:
        role = message.get("role") if isinstance(message, dict) else message.role
        if role == "user":
            content = message.get("content") if isinstance(message, dict) else getattr(
                message, "content", None)
            text = _text(content)
            return text.strip() if text is not None else None
    return None


@dataclass(frozen=True)
class CaseFinder:
    """Which case a trace answers: its attribute, else its first user message."""

    path: Path
    cases: Mapping[str, Case] | None
    attribute: str = CASE_ATTRIBUTE

    def by_text(self) -> dict[str, list[str]]:
        found: dict[str, list[str]] = {}
        for case in (self.cases or {}).values():
            text = first_user_text(case.messages)
            if text is not None:
                found.setdefault(text, []).append(case.id)
        return found

    def case_of(self, trace: Trace, by_text: Mapping[str, list[str]]) -> str:
        values = {str(span.attributes[self.attribute]) for span in trace.spans
                  if self.attribute in span.attributes}
        line = trace.calls[0].span.line
        if len(values) > 1:
            raise InputError(self.path, f"trace {trace.trace_id}: {self.attribute} names "
                             f"{len(values)} cases ({', '.join(sorted(values)[:3])})", line=line)
        if values:
            (case_id,) = values
            if self.cases is not None and case_id not in self.cases:
                raise InputError(self.path, f"trace {trace.trace_id}: {self.attribute} "
                                 f"{case_id[:80]!r}: no such case in the suite", line=line)
            return case_id
        if self.cases is None:
            raise InputError(self.path, f"trace {trace.trace_id}: no span has the attribute "
                             f"{self.attribute}; give the suite, to find its case by the first "
                             "user message", line=line)
        text = first_user_text(trace.calls[0].sent)
        matches = by_text.get(text, []) if text is not None else []
        if len(matches) != 1:
            what = (f"{len(matches)} cases ({', '.join(matches[:3])})" if matches
                    else "no case")
            raise InputError(self.path, f"trace {trace.trace_id}: no span has the attribute "
                             f"{self.attribute}, and its first user message matches {what}",
                             line=line)
        return matches[0]
