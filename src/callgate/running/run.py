"""Stage 1, live: call the candidate for every (case, repeat), then check and score as recorded.

Attempts the store already answered (table live_responses, keyed by SHA-256 of model, api base,
parameters, messages, tools and repeat index) are read back, not called. The others are called
with bounded concurrency, a per-request timeout, and retries with exponential backoff and
jitter on rate limits, 5xx, timeouts, connection faults and broken bodies, honouring
Retry-After, within a retry budget for the whole run. Answers are committed in small batches
as they arrive, so a run killed at any point resumes with only the unanswered attempts.
Everything is checked, stored and scored by `pipeline.Recorder`, as `callgate score` does.

Cases whose calls get results (scripted `tool_results`, or the suite's environment) are
conversations: turn after turn, each turn one request through the same retry path and cached
under the whole conversation so far, until the model answers without a call or max_turns is
reached. The attempt is recorded as one `turns` line; table run_turns links its requests.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from callgate.checks.parsing import parse_calls
from callgate.checks.tool_answers import ToolAnswers
from callgate.checks.verdict import Verdict
from callgate.errors import CallgateError
from callgate.models.config import Candidate
from callgate.models.providers import (
    FATAL,
    Client,
    Pricing,
    ProviderFailure,
    Reply,
    Target,
    api_key,
    failure_line,
    make_client,
    reply_line,
    target_for,
)
from callgate.models.retry import RetryPolicy
from callgate.running.limits import MAX_CONCURRENCY, MAX_REPEATS
from callgate.scoring.pipeline import JudgeStep, Recorder, RunResult
from callgate.scoring.scores import Scores
from callgate.store.db import Store, now
from callgate.suites.environment import EnvironmentError_
from callgate.suites.responses import Response, parse_response
from callgate.suites.shard import Shard
from callgate.suites.suite import Suite
from callgate.version import __version__


class OfflineMiss(CallgateError):
    """--offline, and some attempt has no stored response."""


class RunSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    repeats: int = Field(3, ge=1, le=MAX_REPEATS)
    concurrency: int = Field(8, ge=1, le=MAX_CONCURRENCY)
    timeout: float = Field(120.0, gt=0, description="seconds per request")
    cache: bool = Field(True, description="reuse stored answers; False calls every attempt")
    offline: bool = Field(False, description="never call: a missing answer is an error")
    retry: RetryPolicy = RetryPolicy()
    commit_every: float = Field(0.25, gt=0, description="seconds between commits of answers")
    progress: bool = True
    shard: Shard | None = Field(None, description="run only the cases of this shard")


@dataclass(frozen=True)
class Attempt:
    case_id: str
    repeat: int
    key: str
    body: dict[str, Any]


@dataclass
class LiveRun:
    """A live run's scores plus what it took to get them."""

    result: RunResult
    candidate: Candidate
    client: str | None  # None when every attempt came from the store
    attempts: int
    cached: int
    called: int  # attempts sent to the provider by this run
    requests: int  # HTTP requests, retries included
    retries: int
    provider_errors: int
    spend: float | None  # USD of this run's calls; None when none was known
    cost_unknown: int
    stopped: str | None = None  # why the run stopped early, if it did

    def summary(self) -> dict[str, Any]:
        return {
            "candidate": self.candidate.name,
            "model_id": self.candidate.model,
            "client": self.client,
            "attempts": self.attempts,
            "cached": self.cached,
            "called": self.called,
            "requests": self.requests,
            "retries": self.retries,
            "provider_errors": self.provider_errors,
            "spend_usd": self.spend,
            "cost_unknown": self.cost_unknown,
            "stopped": self.stopped,
        }


@dataclass(frozen=True)
class Conversation:
    """A (case, repeat) whose calls get results: turns of requests until the model answers."""

    case_id: str
    repeat: int
    messages: list[dict[str, Any]]  # the case's own messages
    tools: list[dict[str, Any]]


def plan(suite: Suite, target: Target, repeats: int) -> list[Attempt]:
    """Every single-turn (case, repeat) of the suite, in suite order, with its request body and
    cache key. Cases whose calls get results are planned by `plan_conversations`."""
    attempts: list[Attempt] = []
    for case_id, case in suite.cases.items():
        if suite.loops(case):
            continue
        messages = suite.raw_cases[case_id]["messages"]
        tools = suite.offered_tools(case)
        body = target.body(messages, tools)
        for repeat in range(repeats):
            key = target.cache_key(messages, tools, repeat)
            attempts.append(Attempt(case_id, repeat, key, body))
    return attempts


def plan_conversations(suite: Suite, repeats: int) -> list[Conversation]:
    """Every (case, repeat) of the cases whose calls get results, in suite order."""
    return [
        Conversation(case_id, repeat, suite.raw_cases[case_id]["messages"],
                     suite.offered_tools(case))
        for case_id, case in suite.cases.items()
        if suite.loops(case)
        for repeat in range(repeats)
    ]


@dataclass
class _Outcome:
    attempt: Attempt
    response: Response
    line: str
    tries: int


@dataclass
class _Talk:
    """A finished conversation: its `turns` line and the request behind every turn."""

    conversation: Conversation
    response: Response
    line: str
    keys: list[str]
    cached: list[bool]


@dataclass
class LiveRunner:
    """One live run. Build it, then `await runner.run()` (or use `run_live`)."""

    suite: Suite
    candidate: Candidate
    store: Store
    release: str
    settings: RunSettings = field(default_factory=RunSettings)
    environ: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    console: Console = field(default_factory=lambda: Console(stderr=True))
    keep_verdicts: bool = True  # every verdict in the result, not only the first failures
    judge: JudgeStep | None = None  # decides the cases whose expectation is judge
    client: Client | None = None  # injected by tests; built from the candidate otherwise
    rng: random.Random = field(default_factory=random.Random)

    def __post_init__(self) -> None:
        self._stop = asyncio.Event()
        self._stopped: str | None = None
        self._pause_until = 0.0
        self._retries_left = 0
        self._pending: list[tuple] = []
        self._links: list[tuple] = []
        self._turn_links: list[tuple] = []
        self._last_commit = time.monotonic()
        self.requests = 0
        self.retries = 0
        self.errors = 0
        self.called = 0
        self.spend = 0.0
        self.spend_known = 0
        self.cost_unknown = 0

    # ------------------------------------------------------------------ the run

    async def run(self) -> LiveRun:
        settings = self.settings
        if settings.offline and not settings.cache:
            raise CallgateError("--offline reads stored answers only; it cannot go with --no-cache")
        target = target_for(self.candidate)
        attempts = plan(self.suite, target, settings.repeats)
        shard = settings.shard
        if shard is not None:
            attempts = [a for a in attempts if shard.holds(a.case_id)]
        self.store.save_suite(self.suite)
        stored = (
            self.store.live_responses([a.key for a in attempts])
            if settings.cache or settings.offline
            else {}
        )

        def usable(row: dict[str, Any] | None) -> bool:
            # Online, a stored failure is called again; offline it is reproduced as it was.
            return row is not None and (settings.offline or row["error_kind"] is None)

        hits = [(a, stored[a.key]) for a in attempts if usable(stored.get(a.key))]
        misses = [a for a in attempts if not usable(stored.get(a.key))]
        # A conversation is answered from the store when every one of its turns is.
        talks: list[_Talk] = []
        unfinished: list[Conversation] = []
        for conversation in plan_conversations(self.suite, settings.repeats):
            if shard is not None and not shard.holds(conversation.case_id):
                continue
            talk = await self._converse(conversation, None, target, None)
            if talk is None:
                unfinished.append(conversation)
            else:
                talks.append(talk)
        total = len(attempts) + len(talks) + len(unfinished)
        if settings.offline and (misses or unfinished):
            first_id, first_repeat = (
                (misses[0].case_id, misses[0].repeat)
                if misses
                else (unfinished[0].case_id, unfinished[0].repeat)
            )
            raise OfflineMiss(
                f"--offline: {len(misses) + len(unfinished)} of {total} attempts have no stored "
                f"response (first: case {first_id!r} repeat {first_repeat}); "
                "run without --offline to call the model for them"
            )
        client = self.client
        pricing = Pricing(target)
        if misses or unfinished:
            key = api_key(target, self.environ)
            if client is None:
                client = make_client(target, self.candidate.client, key, settings.concurrency)
            pricing.prepare()
        budget = settings.retry.budget
        self._retries_left = (
            budget if budget is not None else max(20, len(misses) + len(unfinished))
        )

        with self.store.atomic():
            run_id = self.store.replace_run(
                self.suite, self.candidate.name, self.release, "live", __version__,
                self.judge.judge.fingerprint if self.judge else None,
                shard=(shard.index, shard.count) if shard else None,
            )
        recorder = Recorder(self.suite, self.store, run_id, keep_verdicts=self.keep_verdicts,
                            judge=self.judge)
        try:
            scores = await self._fill(
                hits, misses, client, target, pricing, recorder, talks, unfinished
            )
        finally:
            if client is not None and self.client is None:
                await client.aclose()
        order = {case_id: i for i, case_id in enumerate(self.suite.cases)}

        def in_suite_order(verdicts: list[Verdict]) -> list[Verdict]:
            return sorted(verdicts, key=lambda v: (order[v.case_id], v.repeat))

        answered = {link[1] for link in self._links}  # (run, case_id, repeat, key, cached)
        result = RunResult(
            run_id=run_id,
            suite=self.suite,
            model=self.candidate.name,
            release=self.release,
            scores=scores,
            verdicts=in_suite_order(recorder.verdicts),
            failures=in_suite_order(recorder.failures),
            missing=[c for c in self.suite.cases
                     if c not in answered and (shard is None or shard.holds(c))],
        )
        return LiveRun(
            result=result,
            candidate=self.candidate,
            client=client.name if (misses or unfinished) and client is not None else None,
            attempts=total,
            cached=len(hits) + len(talks),
            called=self.called,
            requests=self.requests,
            retries=self.retries,
            provider_errors=self.errors,
            spend=self.spend if self.spend_known else None,
            cost_unknown=self.cost_unknown,
            stopped=self._stopped,
        )

    async def _fill(
        self,
        hits: list[tuple[Attempt, dict[str, Any]]],
        misses: list[Attempt],
        client: Client | None,
        target: Target,
        pricing: Pricing,
        recorder: Recorder,
        talks: list[_Talk] | None = None,
        unfinished: list[Conversation] | None = None,
    ) -> Scores:
        """Record the stored answers, call for the rest, and score: the run's rows."""
        talks, unfinished = talks or [], unfinished or []
        run_id = recorder.run_id
        progress = self._progress()
        task = progress.add_task(
            self.candidate.name,
            total=len(hits) + len(misses) + len(talks) + len(unfinished),
            errors=0,
            spend=self._spend_text(),
        )
        with progress:
            for attempt, row in hits:
                response, line = _stored(attempt, row["line"])
                recorder.add(response, line)
                self._links.append((run_id, attempt.case_id, attempt.repeat, attempt.key, 1))
                if response.error is not None:
                    self.errors += 1
                progress.update(task, advance=1, errors=self.errors)
            for talk in talks:
                self._record_talk(talk, recorder)
                progress.update(task, advance=1, errors=self.errors)
            completed = False
            try:
                if misses or unfinished:
                    assert client is not None
                    await self._call_all(
                        [*misses, *unfinished], client, target, pricing, recorder, progress, task
                    )
                await recorder.judge_pending()
                completed = True
            finally:
                # Save first: nothing here awaits, so a second Ctrl-C cannot cut it short.
                self._commit()
                self.store.save_run_requests(self._links)
                self.store.save_run_turns(self._turn_links)
                recorder.keep_unjudged()
                if self._stopped or not completed:
                    # Marked first: partial scores never serve as a baseline, nor replace the
                    # release's earlier finished run (the store keeps that one).
                    self.store.set_run_status(run_id, "interrupted")
                scores = recorder.finish()
        return scores

    def stop(self, reason: str = "interrupted") -> None:
        """Stop cleanly: no new requests, in-flight ones abandoned, answers kept."""
        if self._stopped is None:
            self._stopped = reason
        self._stop.set()

    async def _call_all(
        self,
        misses: list[Attempt | Conversation],
        client: Client,
        target: Target,
        pricing: Pricing,
        recorder: Recorder,
        progress: Progress,
        task: Any,
    ) -> None:
        queue = iter(misses)

        async def worker() -> None:
            for attempt in queue:  # one shared iterator: each worker takes the next attempt
                if self._stop.is_set():
                    return
                if isinstance(attempt, Conversation):
                    talk = await self._converse(attempt, client, target, pricing)
                    assert talk is not None  # with a client, every turn gets an answer
                    self._record_talk(talk, recorder)
                else:
                    outcome = await self._attempt(attempt, client, target, pricing)
                    self._record(outcome, client, target, recorder)
                progress.update(task, advance=1, errors=self.errors, spend=self._spend_text())

        loop = asyncio.get_running_loop()
        handled = []
        for sig in (signal.SIGINT, signal.SIGTERM):
            previous = signal.getsignal(sig)
            try:
                loop.add_signal_handler(sig, self.stop)
                handled.append((sig, previous))
            except (NotImplementedError, RuntimeError, ValueError):  # not the main thread
                pass
        workers = [
            asyncio.create_task(worker())
            for _ in range(min(self.settings.concurrency, len(misses)))
        ]
        committer = asyncio.create_task(self._commit_loop())
        stopper = asyncio.create_task(self._stop.wait())
        everything = asyncio.gather(*workers)
        try:
            waiting: list[asyncio.Future[Any]] = [everything, stopper]
            await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
            if everything.done():
                everything.result()  # a bug in a worker surfaces here
        finally:
            for sig, previous in handled:
                loop.remove_signal_handler(sig)
                if previous is not None:
                    signal.signal(sig, previous)
            for pending in (*workers, committer, stopper):
                pending.cancel()
            await asyncio.gather(*workers, committer, stopper, return_exceptions=True)
            if everything.done() and not everything.cancelled():
                everything.exception()  # retrieved: the cancellations were ours

    # ------------------------------------------------------------------ one attempt

    async def _attempt(
        self, attempt: Attempt, client: Client, target: Target, pricing: Pricing
    ) -> _Outcome:
        policy = self.settings.retry
        started = time.monotonic()
        tries = 0
        while True:
            wait = self._pause_until - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            tries += 1
            self.requests += 1
            sent = await client.send(attempt.body, self.settings.timeout)
            if isinstance(sent, Reply):
                line = reply_line(
                    attempt.case_id, attempt.repeat, sent, target=target, pricing=pricing
                )
                try:
                    response = parse_response(line)
                except (ValueError, TypeError) as exc:  # pydantic's ValidationError included
                    failure = ProviderFailure(
                        "bad_response",
                        f"unusable completion: {exc}"[:500],
                        status=200,
                        latency_ms=sent.latency_ms,
                    )
                else:
                    return _Outcome(attempt, response, _dumps(line), tries)
            else:
                failure = sent
            note = self._give_up(failure, tries, started)
            if note is not None:
                line = failure_line(attempt.case_id, attempt.repeat, failure, note)
                return _Outcome(attempt, parse_response(line), _dumps(line), tries)
            delay = policy.delay(tries, failure.retry_after, self.rng)
            if failure.kind == "rate_limit" and failure.retry_after:
                # Everyone holds off: the limit is the account's, not this request's.
                self._pause_until = max(self._pause_until, time.monotonic() + failure.retry_after)
            self._retries_left -= 1
            self.retries += 1
            await asyncio.sleep(delay)

    def _give_up(self, failure: ProviderFailure, tries: int, started: float) -> str | None:
        """None to retry; else a note on why not (empty when the fault is not retryable)."""
        policy = self.settings.retry
        if not failure.retryable:
            return ""
        if tries > policy.max_retries:
            return f" (gave up after {tries} tries)"
        if self._retries_left <= 0:
            return " (the run's retry budget is spent)"
        soonest = max(failure.retry_after or 0.0, policy.base_delay / 2)
        if time.monotonic() - started + soonest > policy.max_wait:
            return f" (a retry would pass the {policy.max_wait:g} s wait limit)"
        return None

    def _record(
        self, outcome: _Outcome, client: Client, target: Target, recorder: Recorder
    ) -> None:
        """Keep a single-turn attempt's request and answer, then check and score it."""
        attempt, response = outcome.attempt, outcome.response
        self._save_request(outcome, client, target)
        self.called += 1
        if response.error is not None:
            self.errors += 1
        self._links.append((recorder.run_id, attempt.case_id, attempt.repeat, attempt.key, 0))
        recorder.add(response, outcome.line)

    # ------------------------------------------------------------------ one conversation

    async def _converse(
        self,
        conversation: Conversation,
        client: Client | None,
        target: Target,
        pricing: Pricing | None,
    ) -> _Talk | None:
        """Turn after turn: send, read the calls, append their results, until the model answers
        without a call, a turn is cut or fails, or max_turns is reached.

        Each turn is one request through the retry path, cached under the whole conversation so
        far, so a killed run resumes at the first unanswered turn. Without a client, only stored
        turns are read: None when a turn is not stored."""
        case = self.suite.cases[conversation.case_id]
        answers = ToolAnswers(self.suite, case)
        messages = list(conversation.messages)
        lines: list[dict[str, Any]] = []  # the turn lines, as reply_line made them
        keys: list[str] = []
        cached: list[bool] = []
        ending: str | None = None  # a finish_reason the loop sets: turn_limit, environment_error
        error: dict[str, Any] | None = None
        for turn in range(case.max_turns):
            key = target.cache_key(messages, conversation.tools, conversation.repeat)
            row = self._stored_turn(key)
            if row is not None:
                line = json.loads(row["line"])
            elif client is None:
                return None
            else:
                attempt = Attempt(
                    conversation.case_id,
                    conversation.repeat,
                    key,
                    target.body(messages, conversation.tools),
                )
                assert pricing is not None
                outcome = await self._attempt(attempt, client, target, pricing)
                self._save_request(outcome, client, target)
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
                results = [answers(call) for call in parse_calls(message.tool_calls)]
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
        return _Talk(conversation, parse_response(line), _dumps(line), keys, cached)

    def _stored_turn(self, key: str) -> dict[str, Any] | None:
        settings = self.settings
        if not (settings.cache or settings.offline):
            return None
        row = self.store.live_responses([key]).get(key)
        if row is None or (row["error_kind"] is not None and not settings.offline):
            return None  # online, a stored failure is called again
        return row

    def _save_request(self, outcome: _Outcome, client: Client, target: Target) -> None:
        """Keep one request and its answer (an attempt, or a turn of a conversation) for the
        cache; count its spend, and stop the run on a failure every request would repeat."""
        attempt, response = outcome.attempt, outcome.response
        request = json.dumps(target.request_record(client.name, attempt.body), ensure_ascii=False)
        error_kind = response.error.kind if response.error else None
        self._pending.append(
            (
                attempt.key,
                target.model,
                attempt.case_id,
                attempt.repeat,
                request,
                outcome.line,
                error_kind,
                outcome.tries,
                now(),
            )
        )
        if error_kind is not None:
            if error_kind in FATAL:
                self.stop(f"{error_kind}: {response.error.message}")  # type: ignore[union-attr]
        elif response.cost is None:
            self.cost_unknown += 1
        else:
            self.spend += response.cost
            self.spend_known += 1
        if len(self._pending) >= 64:
            self._commit()

    def _record_talk(self, talk: _Talk, recorder: Recorder) -> None:
        conversation, response = talk.conversation, talk.response
        run_id = recorder.run_id
        if not all(talk.cached):
            self.called += 1
        if response.error is not None:
            self.errors += 1
        key, cached = talk.keys[-1], int(all(talk.cached))
        self._links.append((run_id, conversation.case_id, conversation.repeat, key, cached))
        self._turn_links.extend(
            (run_id, conversation.case_id, conversation.repeat, turn, key, int(cached))
            for turn, (key, cached) in enumerate(zip(talk.keys, talk.cached, strict=True))
        )
        recorder.add(response, talk.line)

    # ------------------------------------------------------------------ store and display

    def _commit(self) -> None:
        if self._pending:
            self.store.save_live_responses(self._pending)
            self._pending = []
        self._last_commit = time.monotonic()

    async def _commit_loop(self) -> None:
        while True:
            await asyncio.sleep(self.settings.commit_every)
            if time.monotonic() - self._last_commit >= self.settings.commit_every:
                self._commit()

    def _spend_text(self) -> str:
        text = f"${self.spend:.4f}" if self.spend_known else "$–"
        return text + (f" (+{self.cost_unknown} unknown)" if self.cost_unknown else "")

    def _progress(self) -> Progress:
        return Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("errors {task.fields[errors]}"),
            TextColumn("{task.fields[spend]}"),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=self.console,
            disable=not self.settings.progress,
        )


def _dumps(line: dict[str, Any]) -> str:
    return json.dumps(line, ensure_ascii=False, separators=(",", ":"))


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


def _stored(attempt: Attempt, text: str) -> tuple[Response, str]:
    """A stored line as this attempt's response (identical requests share a cache key)."""
    line = json.loads(text)
    if line.get("case_id") != attempt.case_id or line.get("repeat") != attempt.repeat:
        line["case_id"], line["repeat"] = attempt.case_id, attempt.repeat
        text = _dumps(line)
    return parse_response(line), text


def run_live(
    suite: Suite,
    candidate: Candidate,
    store: Store,
    *,
    release: str,
    settings: RunSettings | None = None,
    environ: Mapping[str, str] | None = None,
    console: Console | None = None,
    keep_verdicts: bool = True,
    judge: JudgeStep | None = None,
) -> LiveRun:
    """Run a suite live against one candidate and store everything (blocking)."""
    runner = LiveRunner(
        suite,
        candidate,
        store,
        release,
        settings=settings or RunSettings(),
        environ=dict(os.environ) if environ is None else environ,
        console=console or Console(stderr=True),
        keep_verdicts=keep_verdicts,
        judge=judge,
    )
    return asyncio.run(runner.run())
