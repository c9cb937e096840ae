"""The conversation loop: for cases whose calls get results (scripted `tool_results`, or the
suite's environment), turn after turn the model is asked, its calls are answered and appended,
until it answers without a call, a turn fails or is cut, or max_turns is reached. Each turn is
one request through the same retry path, cached under the whole conversation so far; the
attempt is recorded as one `turns` line, and table run_turns links its requests. An
environment's calls run off the event loop, on a thread of the conversation's own."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from callgate.checks.parsing import ParsedCall, parse_calls
from callgate.checks.tool_answers import ToolAnswers
from callgate.models.routes import ModelRoute
from callgate.running.cache import AnswerCache, line_text
from callgate.running.calls import Caller
from callgate.running.plan import Conversation, PlannedAttempt
from callgate.running.threads import DaemonThreads
from callgate.suites.environment import EnvironmentError_
from callgate.suites.responses import Response, parse_response
from callgate.suites.suite import Case, Suite
from callgate.suites.tool_messages import tool_message_content


@dataclass
class Talk:
    """A finished conversation: its `turns` line and the request behind every turn."""

    conversation: Conversation
    response: Response
    line: str
    keys: list[str]
    cached: list[bool]


@dataclass
class _Talking:
    """A conversation under way: what is sent next, and what has come back so far."""

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    lines: list[dict[str, Any]] = field(default_factory=list)  # as reply_line made them
    keys: list[str] = field(default_factory=list)
    cached: list[bool] = field(default_factory=list)
    user_turn_ends: list[int] = field(default_factory=list)
    ending: str | None = None  # a finish_reason the loop sets: turn_limit, environment_error
    error: dict[str, Any] | None = None
    environment: bool = False  # the calls go to the suite's environment (else: scripted)
    # Where the environment's calls run: off the loop (a slow tool or MCP server would stall
    # every conversation in flight), all on one thread, in order (the environment is made on
    # it at the first call, and may hold objects bound to it, as sqlite3's are).
    thread: DaemonThreads | None = None


async def converse(
    conversation: Conversation,
    suite: Suite,
    route: ModelRoute,
    cache: AnswerCache,
    caller: Caller | None,
) -> Talk | None:
    """User turn after user turn (the case's messages, then each of its `user_turns`), turn
    after turn: send, read the calls, append their results, until the model answers without a
    call; then the next user turn's messages (and tools) are appended. A turn cut or failed,
    or max_turns turns in one user turn, ends the conversation. One environment serves it all.

    Each turn is one request through the retry path, cached under the whole conversation so
    far, so a killed run resumes at the first unanswered turn. Without a caller, only stored
    turns are read: None when a turn is not stored."""
    case = suite.cases[conversation.case_id]
    answers = ToolAnswers(suite, case, suite.tool_results(case, conversation.repeat))
    talking = _Talking(list(conversation.messages), list(conversation.tools),
                       environment=suite.environment is not None)
    try:
        for user_turn in range(1 + len(conversation.user_turns)):
            if user_turn:
                later = conversation.user_turns[user_turn - 1]
                talking.messages += later.messages
                talking.tools += later.tools
            answers.offer_turn(user_turn)
            answered = await _answer_user_turn(talking, conversation, case, answers, route,
                                               cache, caller)
            if answered is None:
                return None
            if talking.error is None:
                talking.user_turn_ends.append(len(talking.lines))
            if not answered:
                break
    finally:
        if talking.thread is not None:
            talking.thread.close()
    line = _turns_line(conversation, talking)
    if answers.results.applied:  # what the seam replaced, so a replay can tell (suites.faults)
        line["faults"] = [applied.as_json() for applied in answers.results.applied]
    return Talk(conversation, parse_response(line), line_text(line), talking.keys,
                talking.cached)


async def _answer_user_turn(
    talking: _Talking,
    conversation: Conversation,
    case: Case,
    answers: ToolAnswers,
    route: ModelRoute,
    cache: AnswerCache,
    caller: Caller | None,
) -> bool | None:
    """The turns of one user turn: True when the model answered it without a call (the
    conversation goes on), False when the conversation ends here, None when a turn is not
    stored and there is no caller."""
    max_turns = case.max_turns
    for turn in range(max_turns):
        key = route.cache_key(talking.messages, talking.tools, conversation.repeat)
        row = cache.stored_turn(key)
        if row is not None:
            line = json.loads(row["line"])
        elif caller is None:
            return None
        else:
            attempt = PlannedAttempt(conversation.case_id, conversation.repeat, key,
                                     route.body(talking.messages, talking.tools))
            line = json.loads((await caller.call(attempt)).line)
        talking.keys.append(key)
        talking.cached.append(row is not None)
        if line.get("error"):
            talking.error = line["error"]
            return False
        talking.lines.append(line)
        reply = parse_response(line)
        message = reply.message
        if reply.finish_reason == "length" or message is None:
            return False
        if not message.tool_calls:
            talking.messages.append({"role": "assistant", "content": message.content or ""})
            return True
        if turn == max_turns - 1:
            talking.ending = "turn_limit"
            return False
        number = len(talking.lines) - 1
        tool_calls = [
            {
                "id": call.id or f"call_{number}_{index}",
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments},
            }
            for index, call in enumerate(message.tool_calls)
        ]
        calls = parse_calls(message.tool_calls, case.called_as())
        try:
            results = await _results(talking, answers, calls)
        except EnvironmentError_:
            talking.ending = "environment_error"  # the checks run the calls again and say why
            return False
        talking.messages += [
            {"role": "assistant", "content": message.content, "tool_calls": tool_calls},
            *(
                {
                    "role": "tool",
                    "tool_call_id": tool_call["id"],
                    "content": tool_message_content(result),
                }
                for tool_call, result in zip(tool_calls, results, strict=True)
            ),
        ]
    return False  # not reached: the last turn either answers or hits the limit


async def _results(talking: _Talking, answers: ToolAnswers, calls: list[ParsedCall]
                   ) -> list[Any]:
    """What the calls of one turn get back, in order; raises EnvironmentError_."""
    if not talking.environment:  # scripted results: nothing to wait for
        return [answers(call) for call in calls]
    if talking.thread is None:
        talking.thread = DaemonThreads(1, "callgate-environment")
    return await talking.thread.run(lambda: [answers(call) for call in calls])


def _turns_line(conversation: Conversation, talking: _Talking) -> dict[str, Any]:
    """One recorded-response line (docs/formats.md, `turns`) for a whole conversation."""
    lines, ending, error = talking.lines, talking.ending, talking.error
    line: dict[str, Any] = {"case_id": conversation.case_id, "repeat": conversation.repeat}
    if lines:
        line["turns"] = [turn["response"] for turn in lines]
    if error is not None:
        line["error"] = error
        return line
    if conversation.user_turns:
        line["user_turn_ends"] = talking.user_turn_ends
    replies = [parse_response(turn) for turn in lines]
    # The turn's own reading (a client may have normalised the finish reason) and its price.
    finish = ending or replies[-1].finish_reason
    if finish is not None:
        line["finish_reason"] = finish
    line.update(reply_totals(replies))
    return line


def reply_totals(replies: list[Response]) -> dict[str, Any]:
    """What a conversation's line sums over the replies of its turns: the cost (only when every
    reply was priced: unknown is not 0), the latency, and who served them."""
    totals: dict[str, Any] = {}
    costs = [reply.cost for reply in replies]
    if all(cost is not None for cost in costs):
        totals["cost"] = sum(cost for cost in costs if cost is not None)
    totals["latency_ms"] = round(sum(reply.latency_ms or 0.0 for reply in replies), 3)
    providers = list(dict.fromkeys(r.provider for r in replies if r.provider))
    if providers:
        totals["provider"] = "+".join(providers)
    return totals
