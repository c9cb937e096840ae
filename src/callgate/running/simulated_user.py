"""The simulated user of a run (`run --user`, docs/simulated-user.md): for a case with a
`scenario`, each later user turn is written by a user model, asked through the one caller
(running.calls) as a model source like any other, cached under its own request (the scenario's
prompt and the conversation so far, seen from the user's side), so a rerun replays the same
user turns from the store and asks nothing. The conversation ends when the user writes the stop
token, or at the scenario's turn cap.

Blame: a conversation that failed because of the user is the simulator's failure, not the
agent's (checks.simulator_blame, checked without a model: it ended the conversation before the
agent made any call the case expects, said a value the scenario keeps secret or contradicted a
fact it gives; its model failing is one too). Such an attempt is recorded as a `user_error`,
excluded from the shares and counted apart."""

from __future__ import annotations

import json
from typing import Any

from callgate.checks.simulator_blame import Played
from callgate.models.routes import ModelRoute
from callgate.models.simulated_user import SimulatedUser
from callgate.running.cache import AnswerCache
from callgate.running.counters import RunCounters
from callgate.running.plan import Conversation, LaterTurn, PlannedAttempt
from callgate.running.source import Asker, Source
from callgate.suites.cases import Scenario
from callgate.suites.responses import parse_response

NOT_STORED = object()  # a user turn the store does not hold, and no caller to ask


class UserPlayer:
    """Writes the user turns of scenario cases: the user model as a source, its caller set
    once some turn must be asked (None: only stored turns are read)."""

    def __init__(self, user: SimulatedUser, source: Source, route: ModelRoute) -> None:
        self.user = user
        self.source = source  # the user model (running.model_source.ModelSource)
        self.route = route
        self.caller: Asker | None = None
        self.counters = RunCounters()  # its requests, apart from the candidate's

    def figures(self) -> dict[str, Any]:
        """What the simulated user cost the run, for its summary."""
        counters = self.counters
        return {**self.user.record(), "requests": counters.requests,
                "retries": counters.retries,
                "spend_usd": counters.spend if counters.spend_known else None}

    async def next_turn(self, conversation: Conversation, scenario: Scenario,
                        so_far: list[dict[str, Any]], played: Played, cache: AnswerCache
                        ) -> LaterTurn | object | None:
        """The next user turn, None when the user is done (the stop token, the turn cap or a
        failure: `played` says which), or NOT_STORED."""
        messages = self.user.messages(scenario, so_far)
        played.transcript = [{"role": "user" if m["role"] == "assistant" else "agent",
                              "content": str(m["content"])} for m in messages[1:]]
        if len(played.texts) >= scenario.max_user_turns:
            return None
        route = self.route
        key = route.cache_key(messages, [], conversation.repeat)
        row = cache.stored_turn(key)
        if row is not None:
            line = json.loads(row["line"])
        elif self.caller is None:
            return NOT_STORED
        else:
            attempt = PlannedAttempt(conversation.case_id, conversation.repeat, key,
                                     route.body(messages, []))
            line = json.loads((await self.caller.call(attempt)).line)
        played.keys.append(key)
        heard = "\n".join(str(m["content"]) for m in messages)
        reply = parse_response(line)
        if reply.error is not None:
            played.error = f"its model failed ({reply.error.kind}): {reply.error.message}"
            return None
        text = (reply.message.content if reply.message is not None else None) or ""
        stop = self.user.spec.stop
        if stop in text:
            played.stopped = True
            said = text.split(stop, 1)[0].strip()
            if said:
                played.texts.append(said)
                played.heard.append(heard)
                played.transcript.append({"role": "user", "content": said})
            return None
        played.texts.append(text)
        played.heard.append(heard)
        played.transcript.append({"role": "user", "content": text})
        return LaterTurn([{"role": "user", "content": text}], [])


def blamed_line(line: dict[str, Any], reasons: list[str]) -> dict[str, Any]:
    """A conversation's line recorded as the simulated user's failure, its turns kept."""
    kept: dict[str, Any] = {key: line[key] for key in ("case_id", "repeat", "turns")
                            if key in line}
    return {**kept, "error": {"kind": "user_error", "message": "; ".join(reasons)}}

