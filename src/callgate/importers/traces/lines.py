"""A trace's model calls as one recorded-response line (docs/formats.md)."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from callgate.importers.traces.attempts import CASE_ATTRIBUTE, CaseFinder, Trace, read_trace_file
from callgate.importers.traces.calls import ModelCall
from callgate.suites.cases import Case


def user_turns_of(calls: tuple[ModelCall, ...]) -> list[int]:
    """The user turn of each call: the user messages it was sent beyond the first call's."""
    def users(call: ModelCall) -> int:
        return sum(1 for message in call.sent if message.get("role") == "user")

    first = users(calls[0])
    return [max(0, users(call) - first) for call in calls]


def _ends(turns: list[int]) -> list[int]:
    """Where each user turn's answers end, as `user_turn_ends` counts them."""
    return [sum(1 for t in turns if t <= user) for user in range(max(turns) + 1)
            if any(t == user for t in turns)]


def _sum(values: list[Any]) -> Any:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def trace_line(trace: Trace, case_id: str, repeat: int, *, loops: bool = False,
               user_turns: bool = False) -> dict[str, Any]:
    """The recorded line of one trace. `loops`: the case's calls get results, so its answers
    are `turns` however many there are; `user_turns`: the case has later user turns."""
    # A failed call followed by another was retried: the answer is the later call's.
    calls = tuple(c for i, c in enumerate(trace.calls)
                  if c.answer is not None or i == len(trace.calls) - 1)
    line: dict[str, Any] = {"case_id": case_id, "repeat": repeat, "trace_id": trace.trace_id}
    last = calls[-1]
    latency = round(sum(call.latency_ms for call in calls), 3)
    if last.answer is None:
        line["error"] = {"kind": "error", "message": f"the traced model call failed (span "
                         f"{last.span.span_id} has status ERROR)"}
        line["latency_ms"] = latency
        return line
    answered = [c for c in calls if c.answer is not None]
    turns = user_turns_of(tuple(answered))
    if loops or user_turns or len(answered) > 1:
        line["turns"] = [call.answer for call in answered]
        if user_turns or max(turns) > 0:
            line["user_turn_ends"] = _ends(turns)
    else:
        line["response"] = last.answer
    if last.finish_reason is not None:
        line["finish_reason"] = last.finish_reason
    prompt = _sum([c.prompt_tokens for c in answered])
    completion = _sum([c.completion_tokens for c in answered])
    if prompt is not None or completion is not None:
        line["usage"] = {"prompt_tokens": prompt, "completion_tokens": completion,
                         "total_tokens": prompt + completion
                         if prompt is not None and completion is not None else None}
    costs = [c.cost for c in answered]
    if all(cost is not None for cost in costs):  # unknown is unknown, not 0
        line["cost"] = sum(c for c in costs if c is not None)
    line["latency_ms"] = latency
    provider = next((c.provider for c in answered if c.provider), None)
    if provider is not None:
        line["provider"] = provider
    return line


def trace_lines(path: Path | str, cases: Mapping[str, Case] | None = None, *,
                attribute: str = CASE_ATTRIBUTE, loops: frozenset[str] = frozenset(),
                ) -> list[dict[str, Any]]:
    """Every trace of an OTLP JSON export as a recorded-response line, in the order the traces
    started; the repeats of a case numbered in that order. `cases`: the suite's cases by id
    (needed to find a case by its first user message, and checked against the attribute);
    `loops`: the ids of the cases whose calls get results. Raises InputError on a span,
    a trace or a case it cannot read, before any line is returned."""
    source = Path(path)
    finder = CaseFinder(source, cases, attribute)
    by_text = finder.by_text()
    repeats: dict[str, int] = {}
    lines = []
    for trace in read_trace_file(source):
        case_id = finder.case_of(trace, by_text)
        repeat = repeats.get(case_id, 0)
        repeats[case_id] = repeat + 1
        case = (cases or {}).get(case_id)
        lines.append(trace_line(trace, case_id, repeat, loops=case_id in loops,
                                user_turns=bool(case is not None and case.user_turns)))
    return lines


def write_lines(lines: list[dict[str, Any]], out: Path | str) -> Path:
    """Write recorded lines as JSON Lines: the whole file, or nothing (a temporary file in
    the same folder, moved over `out` once complete)."""
    target = Path(out)
    fd, staged = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            for line in lines:
                handle.write(json.dumps(line, ensure_ascii=False) + "\n")
        os.replace(staged, target)
    except BaseException:
        Path(staged).unlink(missing_ok=True)
        raise
    return target
