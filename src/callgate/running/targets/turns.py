"""A case with later user turns, asked of a target (docs/targets.md, "Cases with later user
turns"): once per user turn, with the conversation so far (the case's messages, the target's
own earlier transcripts, the new user messages) and the tools offered at that turn. Each user
turn's request is cached on its own body, the target's transcript kept beside it to build the
next request from, so a killed run resumes mid-conversation. The replies are joined into one
`turns` line with `user_turn_ends`, as a model's conversation is recorded. `TargetTurns` is
what the one conversation loop (running.conversation) drives."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from callgate.running.cache import AnswerCache
from callgate.running.conversation import reply_totals
from callgate.running.plan import Conversation, LaterTurn, PlannedAttempt
from callgate.running.source import Asker
from callgate.running.targets.contract import attempt_request, scheduled_faults
from callgate.suites.responses import parse_response, read_turns
from callgate.suites.suite import Suite


@dataclass
class _Answers:
    """What the user turns of one conversation have answered so far."""

    lines: list[dict[str, Any]] = field(default_factory=list)  # a reply line per user turn
    keys: list[str] = field(default_factory=list)
    cached: list[bool] = field(default_factory=list)
    error: dict[str, Any] | None = None
    ending: str | None = None  # turn_limit: a user turn still calling tools at max_turns


class TargetTurns:
    """A target's conversation (running.source.Turns): each user turn asked in order, until
    the last, a failure (the attempt's target_error) or a user turn that reaches max_turns
    still calling tools."""

    def __init__(self, conversation: Conversation, key: Callable[[dict[str, Any]], str],
                 suite: Suite) -> None:
        self.conversation = conversation
        self.key = key  # the session's cache key of a request
        self.case = suite.cases[conversation.case_id]
        self.messages, self.tools = list(conversation.messages), list(conversation.tools)
        self.answers = _Answers()
        self.transcript: list[dict[str, Any]] = []
        self.keys = self.answers.keys
        self.cached = self.answers.cached
        self.schedule = scheduled_faults(suite, self.case, conversation.repeat)
        self.made: Counter[str] = Counter()  # the target's calls per tool in the user turns so far

    async def answer(self, user_turn: int, later: LaterTurn | None, cache: AnswerCache,
                     caller: Asker | None) -> bool | None:
        conversation, answers, case = self.conversation, self.answers, self.case
        if later is not None:
            self.messages = [*self.messages, *self.transcript, *later.messages]
            self.tools = [*self.tools, *later.tools]
        body = attempt_request(case, conversation.repeat, self.messages, self.tools, user_turn,
                               faults=shifted(self.schedule, self.made, -1))
        attempt = PlannedAttempt(conversation.case_id, conversation.repeat,
                                 self.key(body), body)
        answered = await _answer(attempt, cache, caller)
        if answered is None:
            return None
        line, self.transcript, cached = answered
        answers.keys.append(attempt.key)
        answers.cached.append(cached)
        if line.get("error"):
            answers.error = line["error"]
            return False
        answers.lines.append({**line, "faults": shifted(line["faults"], self.made, 1)}
                             if line.get("faults") else line)
        self.made.update(call_names(self.transcript))
        if read_turns(case, parse_response(joined_line(conversation, answers))).hit_limit:
            answers.ending = "turn_limit"
            return False
        return True

    def so_far(self) -> list[dict[str, Any]]:
        return [*self.messages, *self.transcript]

    def line(self) -> dict[str, Any]:
        return joined_line(self.conversation, self.answers)

    def close(self) -> None:
        return None


def shifted(entries: list[dict[str, Any]], made: Counter[str], sign: int
            ) -> list[dict[str, Any]]:
    """Faults counted over the whole conversation as one user turn's request counts them
    (`sign` -1: from the calls it has not made yet, counted from 0), or back (`sign` 1)."""
    out = []
    for entry in entries:
        call = entry["call"] + sign * made[entry["tool"]]
        if call >= 0:
            out.append({**entry, "call": call})
    return out


def call_names(transcript: list[dict[str, Any]]) -> list[str]:
    """The names of a transcript's calls, in order."""
    return [name for message in transcript if isinstance(message, dict)
            for call in message.get("tool_calls") or () if isinstance(call, dict)
            if isinstance(name := (call.get("function") or {}).get("name"), str)]


async def _answer(
    attempt: PlannedAttempt, cache: AnswerCache, caller: Asker | None
) -> tuple[dict[str, Any], list[dict[str, Any]], bool] | None:
    """One user turn's reply line and the target's transcript, from the store when it holds
    both, else asked (None: not stored, and no caller). The flag says it was stored."""
    row = cache.stored_turn(attempt.key)
    if row is not None:
        line = json.loads(row["line"])
        if line.get("error"):  # offline, a stored failure is reproduced
            return line, [], True
        request = cache.store.live_request(attempt.key)
        transcript = json.loads(request).get("transcript") if request else None
        if isinstance(transcript, list):
            return line, transcript, True
    if caller is None:
        return None
    outcome, transcript = await caller.ask(attempt)
    return json.loads(outcome.line), transcript or [], False


def joined_line(conversation: Conversation, answers: _Answers) -> dict[str, Any]:
    """One recorded `turns` line (docs/formats.md) for the user turns answered so far: every
    assistant message in order, where each user turn's end, the summed usage, cost and
    latency; a failure's error after the turns before it."""
    line: dict[str, Any] = {"case_id": conversation.case_id, "repeat": conversation.repeat}
    turns: list[dict[str, Any]] = []
    ends = []
    faults: list[dict[str, Any]] = []
    for reply in answers.lines:
        turns += [reply["response"]] if "response" in reply else reply["turns"]
        ends.append(len(turns))
        faults += reply.get("faults") or []
    if turns:
        line["turns"] = turns
    if faults:
        line["faults"] = faults
    if answers.error is not None:
        line["error"] = answers.error
        return line
    line["user_turn_ends"] = ends
    if answers.ending is not None:
        line["finish_reason"] = answers.ending
    replies = [parse_response(reply) for reply in answers.lines]
    usages = [reply.usage for reply in replies if reply.usage is not None]
    if usages:
        line["usage"] = {
            name: sum(getattr(usage, name) or 0 for usage in usages)
            for name in ("prompt_tokens", "completion_tokens")
            if any(getattr(usage, name) is not None for usage in usages)
        }
    line.update(reply_totals(replies))
    return line
