"""The conversation loop: for cases whose calls get results (scripted `tool_results`, or the
suite's environment), turn after turn the model is asked, its calls are answered and appended,
until it answers without a call, a turn fails or is cut, or max_turns is reached. Each turn is
one request through the same retry path, cached under the whole conversation so far; the
attempt is recorded as one `turns` line, and table run_turns links its requests."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from callgate.checks.parsing import parse_calls
from callgate.checks.tool_answers import ToolAnswers
from callgate.models.routes import ModelRoute
from callgate.running.cache import AnswerCache, line_text
from callgate.running.calls import Caller
from callgate.running.plan import Conversation, PlannedAttempt
from callgate.suites.environment import EnvironmentError_
from callgate.suites.responses import Response, parse_response
from callgate.suites.suite import Suite


@dataclass
class Talk:
    """A finished conversation: its `turns` line and the request behind every turn."""

    conversation: Conversation
    response: Response
    line: str
    keys: list[str]
    cached: list[bool]


async def converse(
    conversation: Conversation,
    suite: Suite,
    route: ModelRoute,
    cache: AnswerCache,
    caller: Caller | None,
) -> Talk | None:
    """Turn after turn: send, read the calls, append their results, until the model answers
    without a call, a turn is cut or fails, or max_turns is reached.

    Each turn is one request through the retry path, cached under the whole conversation so
    far, so a killed run resumes at the first unanswered turn. Without a caller, only stored
    turns are read: None when a turn is not stored."""
    case = suite.cases[conversation.case_id]
    answers = ToolAnswers(suite, case)
    messages = list(conversation.messages)
    lines: list[dict[str, Any]] = []  # the turn lines, as reply_line made them
    keys: list[str] = []
    cached: list[bool] = []
    ending: str | None = None  # a finish_reason the loop sets: turn_limit, environment_error
    error: dict[str, Any] | None = None
    for turn in range(case.max_turns):
        key = route.cache_key(messages, conversation.tools, conversation.repeat)
        row = cache.stored_turn(key)
        if row is not None:
            line = json.loads(row["line"])
        elif caller is None:
            return None
        else:
            attempt = PlannedAttempt(
                conversation.case_id,
                conversation.repeat,
                key,
                route.body(messages, conversation.tools),
            )
            outcome = await caller.call(attempt)
            line = json.loads(outcome.line)
        keys.append(key)
        cached.append(row is not None)
        if line.get("error"):
            error = line["error"]
            break
        lines.append(line)
        reply = parse_response(line)
        message = reply.message
        if reply.finish_reason == "length" or message is None or not message.tool_calls:
            break
        if turn == case.max_turns - 1:
            ending = "turn_limit"
            break
        tool_calls = [
            {
                "id": call.id or f"call_{turn}_{index}",
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments},
            }
            for index, call in enumerate(message.tool_calls)
        ]
        try:
            results = [answers(call) for call in parse_calls(message.tool_calls, case.called_as())]
        except EnvironmentError_:
            ending = "environment_error"  # the checks run the calls again and say why
            break
        messages = [
            *messages,
            {"role": "assistant", "content": message.content, "tool_calls": tool_calls},
            *(
                {
                    "role": "tool",
                    "tool_call_id": tool_call["id"],
                    "content": json.dumps(result, ensure_ascii=False),
                }
                for tool_call, result in zip(tool_calls, results, strict=True)
            ),
        ]
    line = _turns_line(conversation, lines, ending, error)
    return Talk(conversation, parse_response(line), line_text(line), keys, cached)


def _turns_line(
    conversation: Conversation,
    lines: list[dict[str, Any]],
    ending: str | None,
    error: dict[str, Any] | None,
) -> dict[str, Any]:
    """One recorded-response line (docs/formats.md, `turns`) for a whole conversation."""
    line: dict[str, Any] = {"case_id": conversation.case_id, "repeat": conversation.repeat}
    if lines:
        line["turns"] = [turn["response"] for turn in lines]
    if error is not None:
        line["error"] = error
        return line
    replies = [parse_response(turn) for turn in lines]
    # The turn's own reading (a client may have normalised the finish reason) and its price.
    finish = ending or replies[-1].finish_reason
    if finish is not None:
        line["finish_reason"] = finish
    costs = [reply.cost for reply in replies]
    if all(cost is not None for cost in costs):
        line["cost"] = sum(cost for cost in costs if cost is not None)
    line["latency_ms"] = round(sum(reply.latency_ms or 0.0 for reply in replies), 3)
    providers = list(dict.fromkeys(r.provider for r in replies if r.provider))
    if providers:
        line["provider"] = "+".join(providers)
    return line
