"""A model as a live run's source (running.source): the plan of its attempts (one request a
single-turn case; a conversation for the cases whose calls get results), one try of a request
through the endpoint's pacer, and the turns of a conversation, in which the calls the model
makes are answered here (scripted `tool_results`, or the suite's environment) and appended,
turn after turn, until it answers without a call, a turn fails or is cut, or max_turns is
reached. Each turn is one request through the one retry path, cached under the whole
conversation so far; the attempt is recorded as one `turns` line, and table run_turns links its
requests. An environment's calls run off the event loop, on a thread of the conversation's
own."""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from callgate.checks.parsing import ParsedCall, parse_calls
from callgate.checks.tool_answers import ToolAnswers
from callgate.models.config import Candidate
from callgate.models.pacing import CEILING, PacedClient, Pacer, Pacers
from callgate.models.pricing import Pricing
from callgate.models.providers import Client, make_client
from callgate.models.recorded_lines import failure_line, reply_line
from callgate.models.replies import FATAL, ProviderFailure, Reply
from callgate.models.routes import ModelRoute, api_key, route_for
from callgate.running.cache import AnswerCache, AttemptOutcome
from callgate.running.conversation import reply_totals
from callgate.running.counters import GatedClient, RunCounters, StopSwitch
from callgate.running.plan import (
    Conversation,
    LaterTurn,
    PlannedAttempt,
    plan,
    plan_conversations,
)
from callgate.running.source import Answer, Asker, Fault
from callgate.running.threads import DaemonThreads
from callgate.suites.environment import EnvironmentError_
from callgate.suites.responses import parse_response
from callgate.suites.suite import Case, Suite
from callgate.suites.tool_messages import tool_message_content


class ModelSource:
    """The candidate's model: its client is made (or the injected one taken) when some attempt
    must be called, with its pricing and the endpoint's pacer."""

    in_flight = CEILING  # the pacer bounds them

    def __init__(self, candidate: Candidate, route: ModelRoute, *,
                 environ: Mapping[str, str] | None = None, concurrency: int | None = None,
                 pacers: Pacers | None = None, client: Client | None = None,
                 stop: StopSwitch | None = None) -> None:
        self.candidate = candidate
        self.route = route
        self.environ = environ or {}
        self.concurrency = concurrency
        self.pacers = pacers if pacers is not None else Pacers(concurrency)
        self.injected = client
        self.stop = stop  # the run's: nothing is sent after it, even from the pacer's queue
        self.pacer: Pacer | None = None
        self.client: PacedClient | None = None
        self.pricing: Pricing | None = None

    @property
    def name(self) -> str:
        assert self.client is not None
        return self.client.name

    async def open(self, timeout: float) -> None:
        return None

    def plan(self, suite: Suite, repeats: int
             ) -> tuple[list[PlannedAttempt], list[Conversation]]:
        return plan(suite, self.route, repeats), plan_conversations(suite, repeats)

    def turns(self, conversation: Conversation, suite: Suite) -> ModelTurns:
        return ModelTurns(conversation, suite, self.route)

    def connect(self, to_call: int) -> None:
        """The candidate's client (or the one injected), its pricing and the endpoint's pacer."""
        key = api_key(self.route, self.environ)  # a missing key variable stops the run here
        client = self.injected
        if client is None:
            client = make_client(self.route, self.candidate.client, key,
                                 self.concurrency or CEILING)
        pricing = Pricing(self.route)
        pricing.prepare()
        self.pricing = pricing
        self.pacer = self.pacers.for_route(self.route)
        if self.stop is not None:  # behind the pacer: one waiting for a slot is stopped too
            client = GatedClient(client, self.stop)
        self.client = PacedClient(client, self.pacer)

    async def ask(self, attempt: PlannedAttempt, timeout: float) -> Answer | Fault:
        assert self.client is not None and self.pricing is not None
        started = time.perf_counter()
        sent = await self.client.send(attempt.body, timeout)
        if isinstance(sent, Reply):
            line = reply_line(
                attempt.case_id, attempt.repeat, sent, route=self.route, pricing=self.pricing
            )
            try:
                return Answer(parse_response(line), line)
            except (ValueError, TypeError) as exc:  # pydantic's ValidationError included
                sent = ProviderFailure(
                    "bad_response",
                    f"unusable completion: {exc}"[:500],
                    status=200,
                    latency_ms=sent.latency_ms,
                )
        return Fault(sent, sent.retryable, sent.retry_after, started)

    def gave_up(self, attempt: PlannedAttempt, fault: Fault, note: str) -> dict[str, Any]:
        return failure_line(attempt.case_id, attempt.repeat, fault.failure, note)

    def keep(self, outcome: AttemptOutcome, extra: Any, cache: AnswerCache,
             counters: RunCounters, stop: StopSwitch) -> None:
        """Keep the request and its answer for the cache; count its spend, and stop the run on
        a failure every request would repeat (FATAL: a bad key, no such model)."""
        assert self.client is not None
        request = json.dumps(
            self.route.request_record(self.client.name, outcome.attempt.body),
            ensure_ascii=False,
        )
        cache.keep(outcome, self.route.model, request)
        error = outcome.response.error
        if error is None:
            counters.count_cost(outcome.response.cost)
        elif error.kind in FATAL:
            stop.stop(f"{error.kind}: {error.message}")

    async def aclose(self) -> None:
        if self.client is not None and self.injected is None:
            await self.client.aclose()


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


class ModelTurns:
    """A model's conversation (running.source.Turns): turn after turn within a user turn,
    send, read the calls, append their results, until the model answers without a call; then
    the next user turn's messages (and tools) are appended. A turn cut or failed, or max_turns
    turns in one user turn, ends the conversation. One environment serves it all."""

    def __init__(self, conversation: Conversation, suite: Suite, route: ModelRoute) -> None:
        self.conversation = conversation
        self.case = suite.cases[conversation.case_id]
        self.answers = ToolAnswers(suite, self.case,
                                   suite.tool_results(self.case, conversation.repeat))
        self.route = route
        self.talking = _Talking(list(conversation.messages), list(conversation.tools),
                                environment=suite.environment is not None)
        self.keys = self.talking.keys
        self.cached = self.talking.cached

    def so_far(self) -> list[dict[str, Any]]:
        """The conversation so far, as the model is sent it."""
        return self.talking.messages

    async def answer(self, user_turn: int, later: LaterTurn | None, cache: AnswerCache,
                     caller: Asker | None) -> bool | None:
        talking = self.talking
        if later is not None:
            talking.messages += later.messages
            talking.tools += later.tools
        self.answers.offer_turn(user_turn)
        answered = await _answer_user_turn(talking, self.conversation, self.case,
                                           self.answers, self.route, cache, caller)
        if answered is None:
            return None
        if talking.error is None:
            talking.user_turn_ends.append(len(talking.lines))
        return answered

    def line(self) -> dict[str, Any]:
        line = _turns_line(self.conversation, self.talking)
        if self.answers.results.applied:  # what the seam replaced, so a replay can tell
            line["faults"] = [applied.as_json() for applied in self.answers.results.applied]
        return line

    def close(self) -> None:
        if self.talking.thread is not None:
            self.talking.thread.close()


async def _answer_user_turn(
    talking: _Talking,
    conversation: Conversation,
    case: Case,
    answers: ToolAnswers,
    route: ModelRoute,
    cache: AnswerCache,
    caller: Asker | None,
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
    if conversation.user_turns or len(talking.user_turn_ends) > 1:  # scripted or simulated
        line["user_turn_ends"] = talking.user_turn_ends
    replies = [parse_response(turn) for turn in lines]
    # The turn's own reading (a client may have normalised the finish reason) and its price.
    finish = ending or replies[-1].finish_reason
    if finish is not None:
        line["finish_reason"] = finish
    line.update(reply_totals(replies))
    return line


def run_route(candidate: Candidate, perturbation: str | None) -> ModelRoute:
    """The route a run asks a candidate by: a perturbed run's (`run --perturb`) salted with
    its marker, so its answers are cached apart from the clean run's. The one rule for the
    run and for `run --estimate`, which must find the same cache keys."""
    route = route_for(candidate)
    return route if perturbation is None else dataclasses.replace(route, salt=perturbation)
