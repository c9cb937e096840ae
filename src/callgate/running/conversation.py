"""The one conversation loop, for every source (running.source): user turn after user turn (the
case's messages, then each of its `user_turns`), the source's `Turns` answers each (a model turn
after turn with the calls' results appended, a target once per user turn) until the last, or
until one ends the conversation. Each request is cached, so a killed run resumes at the first
unanswered one; without a caller only stored answers are read. The attempt is recorded as one
`turns` line, and table run_turns links its requests."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from callgate.checks.simulator_blame import Played, simulator_faults
from callgate.running.cache import AnswerCache, line_text
from callgate.running.plan import Conversation, LaterTurn
from callgate.running.simulated_user import NOT_STORED, UserPlayer, blamed_line
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
    # A scenario's simulated user (running.simulated_user): what it wrote, and why it, not the
    # agent, would be to blame for a failure (empty: it played its part)
    played: Any = None
    user_faults: list[str] = field(default_factory=list)


async def converse(
    conversation: Conversation,
    source: Source,
    suite: Suite,
    cache: AnswerCache,
    caller: Asker | None,
    user: UserPlayer | None = None,
) -> Talk | None:
    """The conversation's user turns in order, each answered by the source's turns, until the
    last or one that ends it (a failure, a cut, max_turns). The later user turns are the
    case's scripted ones, or for a case with a scenario (and a `user`) those its simulated
    user writes, until it is done. Without a caller, only stored turns are read: None when a
    turn is not stored."""
    turns = source.turns(conversation, suite)
    case = suite.cases[conversation.case_id]
    scenario = case.scenario if user is not None else None
    played = Played() if scenario is not None else None
    try:
        user_turn, later = 0, None
        while True:
            going = await turns.answer(user_turn, later, cache, caller)
            if going is None:
                return None
            user_turn += 1
            if not going:
                break
            if scenario is None or user is None or played is None:
                if user_turn > len(conversation.user_turns):
                    break
                later = conversation.user_turns[user_turn - 1]
                continue
            written = await user.next_turn(conversation, scenario, turns.so_far(), played,
                                           cache)
            if written is NOT_STORED:
                return None
            if not isinstance(written, LaterTurn):
                break
            later = written
    finally:
        turns.close()
    line = turns.line()
    response = parse_response(line)
    found: list[str] = []
    if scenario is not None and played is not None:
        found = simulator_faults(case, scenario, played, response)
        if played.error is not None:  # no conversation to score: the user's model failed
            line = blamed_line(line, found)
            response = parse_response(line)
    return Talk(conversation, response, line_text(line), turns.keys, turns.cached,
                played, found)


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
