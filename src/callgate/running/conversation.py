"""The one conversation loop, for every source (running.source): user turn after user turn (the
case's messages, then each of its `user_turns`), the source's `Turns` answers each (a model turn
after turn with the calls' results appended, a target once per user turn) until the last, or
until one ends the conversation. Each request is cached, so a killed run resumes at the first
unanswered one; without a caller only stored answers are read. The attempt is recorded as one
`turns` line, and table run_turns links its requests."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from callgate.running.cache import AnswerCache, line_text
from callgate.running.plan import Conversation
from callgate.running.source import Asker, Source
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
    source: Source,
    suite: Suite,
    cache: AnswerCache,
    caller: Asker | None,
) -> Talk | None:
    """The conversation's user turns in order, each answered by the source's turns, until the
    last or one that ends it (a failure, a cut, max_turns). Without a caller, only stored
    turns are read: None when a turn is not stored."""
    turns = source.turns(conversation, suite)
    try:
        for user_turn in range(1 + len(conversation.user_turns)):
            later = conversation.user_turns[user_turn - 1] if user_turn else None
            going = await turns.answer(user_turn, later, cache, caller)
            if going is None:
                return None
            if not going:
                break
    finally:
        turns.close()
    line = turns.line()
    return Talk(conversation, parse_response(line), line_text(line), turns.keys,
                turns.cached)


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
