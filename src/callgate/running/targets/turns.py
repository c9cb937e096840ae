"""A case with later user turns, asked of a target (docs/targets.md, "Cases with later user
turns"): once per user turn, with the conversation so far (the case's messages, the target's
own earlier transcripts, the new user messages) and the tools offered at that turn. Each user
turn's request is cached on its own body, the target's transcript kept beside it to build the
next request from, so a killed run resumes mid-conversation. The replies are joined into one
`turns` line with `user_turn_ends`, as a model's conversation is recorded."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from callgate.running.cache import AnswerCache, line_text
from callgate.running.conversation import Talk, reply_totals
from callgate.running.plan import Conversation, PlannedAttempt
from callgate.running.targets.contract import attempt_request, scheduled_faults
from callgate.running.targets.session import TargetCaller, TargetSession
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


async def converse_target(
    conversation: Conversation,
    session: TargetSession,
    suite: Suite,
    cache: AnswerCache,
    caller: TargetCaller | None,
) -> Talk | None:
    """Ask the target each user turn in order, until the last, a failure (the attempt's
    target_error) or a user turn that reaches max_turns still calling tools. Without a caller,
    only stored user turns are read: None when one is not stored."""
    case = suite.cases[conversation.case_id]
    messages, tools = list(conversation.messages), list(conversation.tools)
    answers = _Answers()
    transcript: list[dict[str, Any]] = []
    schedule = scheduled_faults(suite, case, conversation.repeat)
    made: Counter[str] = Counter()  # the target's calls per tool in the user turns so far
    for user_turn in range(1 + len(conversation.user_turns)):
        if user_turn:
            later = conversation.user_turns[user_turn - 1]
            messages = [*messages, *transcript, *later.messages]
            tools = [*tools, *later.tools]
        body = attempt_request(case, conversation.repeat, messages, tools, user_turn,
                               faults=shifted(schedule, made, -1))
        attempt = PlannedAttempt(conversation.case_id, conversation.repeat, session.key(body),
                                 body)
        answered = await _answer(attempt, cache, caller)
        if answered is None:
            return None
        line, transcript, cached = answered
        answers.keys.append(attempt.key)
        answers.cached.append(cached)
        if line.get("error"):
            answers.error = line["error"]
            break
        answers.lines.append({**line, "faults": shifted(line["faults"], made, 1)}
                             if line.get("faults") else line)
        made.update(call_names(transcript))
        if read_turns(case, parse_response(joined_line(conversation, answers))).hit_limit:
            answers.ending = "turn_limit"
            break
    line = joined_line(conversation, answers)
    return Talk(conversation, parse_response(line), line_text(line), answers.keys,
                answers.cached)


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
    attempt: PlannedAttempt, cache: AnswerCache, caller: TargetCaller | None
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
    outcome, transcript = await caller.call_turn(attempt)
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
