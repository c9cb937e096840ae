"""The plan of a live run: every (case, repeat) of the suite, in suite order, as a `PlannedAttempt`
(one request: its body and cache key) or, for the cases whose calls get results, as a
`Conversation` (turns of requests until the model answers without a call)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from callgate.models.routes import ModelRoute
from callgate.suites.suite import Suite


@dataclass(frozen=True)
class PlannedAttempt:
    case_id: str
    repeat: int
    key: str
    body: dict[str, Any]


@dataclass(frozen=True)
class LaterTurn:
    """A later user turn as it is sent: its messages, and the tool objects it adds."""

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]


@dataclass(frozen=True)
class Conversation:
    """A (case, repeat) whose calls get results: turns of requests until the model answers,
    for the case's messages and then for each later user turn."""

    case_id: str
    repeat: int
    messages: list[dict[str, Any]]  # the case's own messages
    tools: list[dict[str, Any]]
    user_turns: tuple[LaterTurn, ...] = ()


def plan(suite: Suite, route: ModelRoute, repeats: int) -> list[PlannedAttempt]:
    """Every single-turn (case, repeat) of the suite, in suite order, with its request body and
    cache key. Cases whose calls get results are planned by `plan_conversations`."""
    attempts: list[PlannedAttempt] = []
    for case_id, case in suite.cases.items():
        if suite.loops(case):
            continue
        messages = suite.raw_cases[case_id]["messages"]
        tools = suite.offered_tools(case)
        body = route.body(messages, tools)
        for repeat in range(repeats):
            key = route.cache_key(messages, tools, repeat)
            attempts.append(PlannedAttempt(case_id, repeat, key, body))
    return attempts


def plan_conversations(suite: Suite, repeats: int) -> list[Conversation]:
    """Every (case, repeat) of the cases whose calls get results, in suite order."""
    return [
        Conversation(case_id, repeat, suite.raw_cases[case_id]["messages"],
                     suite.offered_tools(case), later_turns(suite, case_id))
        for case_id, case in suite.cases.items()
        if suite.loops(case)
        for repeat in range(repeats)
    ]


def _added(by_name: dict[str, dict[str, Any]], entry: str | dict[str, str]) -> dict[str, Any]:
    """The tool object a user turn adds: a catalogue tool, under another name if it says so."""
    if isinstance(entry, str):
        return by_name[entry]
    tool = by_name[entry["tool"]]
    return {**tool, "function": {**tool["function"], "name": entry["name"]}}


def later_turns(suite: Suite, case_id: str) -> tuple[LaterTurn, ...]:
    """A case's later user turns as written (messages) and offered (the catalogue's tool
    objects they add, in the order the turn names them)."""
    by_name = {tool["function"]["name"]: tool for tool in suite.sent_tools}  # no annotations
    return tuple(
        LaterTurn(turn["messages"], [_added(by_name, entry)
                                     for entry in turn.get("add_tools", ())])
        for turn in suite.raw_cases[case_id].get("user_turns") or ()
    )
