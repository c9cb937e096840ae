"""Reading a response's tool calls: each call's name and its arguments as a JSON object (or
why they are not one)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from callgate import reading
from callgate.reading import MAX_ARGUMENTS_CHARS
from callgate.suites.responses import ToolCall


@dataclass(slots=True)  # built for every call of every attempt: slots, not frozen, for speed
class ParsedCall:
    index: int
    name: str
    arguments: dict[str, Any] | None  # None when the raw string is not a JSON object
    json_error: str | None


def parse_calls(
    tool_calls: Sequence[ToolCall], called_as: Mapping[str, str] | None = None
) -> list[ParsedCall]:
    """Each call read; `called_as` (a case's `Case.called_as()`) maps a name the model was sent
    to the catalogue name the call is checked as."""
    parsed = _parse(tool_calls)
    if called_as:
        for call in parsed:
            call.name = called_as.get(call.name, call.name)
    return parsed


def _parse(tool_calls: Sequence[ToolCall]) -> list[ParsedCall]:
    parsed = []
    for index, call in enumerate(tool_calls):
        text = call.arguments
        if not text or text.isspace():
            # Several servers send "" for a call without arguments.
            parsed.append(ParsedCall(index, call.name, {}, None))
            continue
        if len(text) > MAX_ARGUMENTS_CHARS:
            parsed.append(ParsedCall(index, call.name, None, (
                f"arguments are {len(text)} characters long; callgate reads at most "
                f"{MAX_ARGUMENTS_CHARS}")))
            continue
        try:
            value = reading.loads(text)
        except json.JSONDecodeError as exc:
            parsed.append(ParsedCall(index, call.name, None, f"{exc.msg} at character {exc.pos}"))
            continue
        except reading.JSONLimitError as exc:  # too deep, NaN: refused, never a crash
            where = f" at character {exc.pos}" if exc.pos is not None else ""
            field = f" ({exc.field})" if exc.field else ""
            parsed.append(ParsedCall(index, call.name, None, f"{exc.message}{field}{where}"))
            continue
        if isinstance(value, dict):
            parsed.append(ParsedCall(index, call.name, value, None))
        else:
            parsed.append(
                ParsedCall(
                    index, call.name, None, f"arguments are {type(value).__name__}, not an object"
                )
            )
    return parsed
