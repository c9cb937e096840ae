"""A live run's target: opened before the plan (the version it reports goes into every cache
key, so changed agent code is asked again), the plan of its attempts (every case is one attempt:
the agent runs its own loop), and one try of a request, which the one caller (running.calls)
sends through the run's retry policy, timeout and cache, as it asks a model (running.source).

A crash, a timeout or a reply that breaks the contract is recorded as an error of kind
`target_error` (excluded like a provider error, never the model's mistake) whose message names
the case; the run goes on."""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Mapping
from typing import Any

from rich.console import Console
from rich.markup import escape

from callgate.errors import CallgateError
from callgate.models.config import Candidate
from callgate.models.pacing import START, Pacer
from callgate.models.recorded_lines import failure_line
from callgate.models.replies import ProviderFailure
from callgate.models.targets import TargetSpec, parse_target
from callgate.reading import canonical_json
from callgate.redaction import clean, secrets_in
from callgate.running.cache import AnswerCache, AttemptOutcome
from callgate.running.counters import RunCounters, StopSwitch
from callgate.running.plan import Conversation, PlannedAttempt, later_turns
from callgate.running.source import Answer, Fault, Turns
from callgate.running.targets.contract import (
    MalformedReply,
    attempt_request,
    faulted_line,
    reply_transcript,
    scheduled_faults,
    transcript_line,
    user_turn_of,
)
from callgate.running.targets.inprocess import PythonTarget
from callgate.running.targets.kinds import (
    CommandTarget,
    HttpTarget,
    Target,
    TargetFailure,
    elapsed_ms,
)
from callgate.running.targets.turns import TargetTurns
from callgate.suites.responses import parse_response
from callgate.suites.suite import Suite

TARGET_ERROR = "target_error"
SHOWN_ERRORS = 5  # target errors printed as they happen; the rest are in the verdicts
def open_target(spec: TargetSpec, concurrency: int, key: str | None = None) -> Target:
    """The target a spec names; `key` is sent to an HTTP target (api_key_env's value)."""
    if spec.kind == "http":
        return HttpTarget(spec, concurrency, key)
    if spec.kind == "python":
        return PythonTarget(spec, concurrency)
    return CommandTarget(spec, concurrency)


class TargetSession:
    """The target of one run, and what its identity and version make of each attempt."""

    pacer: Pacer | None = None  # a target's own pool is fixed: nothing adapts to it
    in_flight = START  # its pool's size: more in flight would wait there, and time out

    def __init__(self, candidate: Candidate, concurrency: int,
                 environ: Mapping[str, str] | None = None,
                 console: Console | None = None) -> None:
        assert candidate.target is not None
        environ = os.environ if environ is None else environ
        self.secrets = secrets_in(environ)
        try:  # a spec holding the value of a secret-named variable is refused too
            self.spec = parse_target(candidate.target, self.secrets)
        except ValueError as exc:
            raise CallgateError(f"--target: {exc}") from None
        key = environ.get(candidate.api_key_env) if candidate.api_key_env else None
        if candidate.api_key_env and not key:
            raise CallgateError(f"--api-key-env {candidate.api_key_env}: the variable is not set")
        self.model = candidate.model
        self.given_version = candidate.target_version
        try:
            self.target: Target = open_target(self.spec, concurrency, key)
        except CallgateError as exc:  # the agent's import error may quote its key
            raise CallgateError(clean(str(exc), self.secrets)) from None
        self.version = ""
        self.console = console if console is not None else Console(stderr=True)
        self._shown = 0
        self._warned = 0

    async def open(self, timeout: float) -> None:
        """Learn the target's version (the hello), unless the candidate gives one: then nothing
        is asked before the first attempt (and nothing at all when the store answers all)."""
        if self.given_version is not None:
            self.version = self.given_version
            return
        try:
            version = await self.target.version(timeout)
        except (TargetFailure, MalformedReply) as exc:
            raise CallgateError(f"--target {self.spec.text}: the hello failed: "
                                f"{clean(str(exc), self.secrets)}") from None
        if version is None:
            raise CallgateError(
                f"--target {self.spec.text} reported no version: answer the hello with "
                '{"version": "..."} or give --target-version, so that changed agent code is '
                "asked again rather than answered from the store")
        self.version = version

    def plan(self, suite: Suite, repeats: int
             ) -> tuple[list[PlannedAttempt], list[Conversation]]:
        """Every (case, repeat) in suite order: one request and its cache key, or for a case
        with later user turns (scripted, or a scenario's simulated user's) a conversation
        (asked once per user turn, running.conversation)."""
        attempts, conversations = [], []
        for case_id, case in suite.cases.items():
            messages = suite.raw_cases[case_id]["messages"]
            tools = suite.offered_tools(case)
            for repeat in range(repeats):
                if case.user_turns is not None or case.scenario is not None:
                    conversations.append(Conversation(case_id, repeat, messages, tools,
                                                      later_turns(suite, case_id)))
                    continue
                body = attempt_request(case, repeat, messages, tools,
                                       faults=scheduled_faults(suite, case, repeat))
                attempts.append(PlannedAttempt(case_id, repeat, self.key(body), body))
        return attempts, conversations

    def key(self, body: dict[str, Any]) -> str:
        """SHA-256 of (target, version, messages, tools, metadata with the repeat index)."""
        material = {"target": self.spec.text, "version": self.version, **body}
        return hashlib.sha256(canonical_json(material).encode()).hexdigest()

    def request_record(self, body: dict[str, Any],
                       transcript: list[dict[str, Any]] | None = None) -> str:
        """The request as stored; a user turn of a conversation keeps the target's transcript
        beside it, since the next user turn's request (and key) is built from it."""
        record: dict[str, Any] = {"client": self.spec.kind, "target": self.spec.text,
                                  "version": self.version, "body": body}
        if transcript is not None:
            record["transcript"] = transcript
        return json.dumps(record, ensure_ascii=False)

    async def aclose(self) -> None:
        await self.target.aclose()

    # What the one caller (running.calls) asks of a source (running.source).

    @property
    def name(self) -> str:
        return self.target.name

    def turns(self, conversation: Conversation, suite: Suite) -> Turns:
        return TargetTurns(conversation, self.key, suite)

    def connect(self, to_call: int) -> None:
        return None

    async def ask(self, attempt: PlannedAttempt, timeout: float) -> Answer | Fault:
        sent = time.perf_counter()
        try:
            reply = await self.target.ask(attempt.body, timeout)
            transcript, extra = reply_transcript(reply, attempt.body["messages"])
            line = faulted_line(transcript_line(attempt.case_id, attempt.repeat, transcript,
                                                extra, elapsed_ms(sent)),
                                transcript, attempt.body)
            if "note" in line:  # its cost or usage was not one: the answer is kept
                self._warn(f"{_where(attempt)}: {line['note']}")
            return Answer(parse_response(line), line, transcript)
        except TargetFailure as exc:
            failure: TargetFailure = exc
        except (ValueError, TypeError) as exc:  # MalformedReply, pydantic's errors too
            failure = TargetFailure(f"malformed reply: {exc}", retryable=False)
        return Fault(failure, failure.retryable, None, sent)

    def gave_up(self, attempt: PlannedAttempt, fault: Fault, note: str) -> dict[str, Any]:
        message = clean(f"{_where(attempt)}: {fault.failure}{note}", self.secrets)
        return failure_line(attempt.case_id, attempt.repeat, ProviderFailure(
            TARGET_ERROR, message, latency_ms=elapsed_ms(fault.sent)))

    def keep(self, outcome: AttemptOutcome, extra: Any, cache: AnswerCache,
             counters: RunCounters, stop: StopSwitch) -> None:
        """Keep the request and its answer (a user turn's with the target's transcript);
        count its spend, and show the first target errors."""
        kept = extra if user_turn_of(outcome.attempt.body) is not None else None
        cache.keep(outcome, self.model, self.request_record(outcome.attempt.body, kept))
        error = outcome.response.error
        if error is None:
            counters.count_cost(outcome.response.cost)
        else:
            self._show(error.message)

    def _warn(self, message: str) -> None:
        self._warned += 1
        if self._warned <= SHOWN_ERRORS:
            self.console.print(f"[yellow]warning:[/yellow] {escape(clean(message))}",
                               highlight=False, soft_wrap=True)

    def _show(self, message: str) -> None:
        """One stderr line for each of the first target errors, naming the case."""
        self._shown += 1
        if self._shown <= SHOWN_ERRORS:
            self.console.print(f"[yellow]target error:[/yellow] {escape(message)}",
                               highlight=False, soft_wrap=True)
        elif self._shown == SHOWN_ERRORS + 1:
            self.console.print("[yellow]target error:[/yellow] more target errors: the run's "
                               "verdicts list them all (status target_error)", highlight=False)


def _where(attempt: PlannedAttempt) -> str:
    """The attempt a target error is about: its case and repeat, and the user turn (counted
    from 1) in a conversation."""
    where = f"case {attempt.case_id!r} repeat {attempt.repeat}"
    turn = user_turn_of(attempt.body)
    return where if turn is None else f"{where} user turn {turn + 1}"
