"""Stage 1, live: call the candidate for every (case, repeat), then check and score as recorded.

`LiveRunner` wires the stage's collaborators, each built with what it needs and passed along,
none a base class of another: it plans the attempts (`plan`), reads back what the store
already answered (`AnswerCache`), calls for the rest with bounded concurrency
(`call_concurrently`), each one request with retries (`Caller`) or a conversation over turns
(`converse`), or the agent under test once per attempt or user turn (`running.targets`),
and has every answer checked, stored and scored by `pipeline.Recorder`, as `callgate score`
does, and linked to its requests (`RunRecord`). A run killed at any point resumes with only
the unanswered attempts; a run stopped early is marked interrupted, so its partial scores never
serve as a baseline."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rich.console import Console

from callgate.checks.verdict import Verdict
from callgate.errors import CallgateError
from callgate.models.config import Candidate
from callgate.models.pacing import CEILING, START, Pacers
from callgate.models.pricing import Pricing
from callgate.models.providers import Client, make_client
from callgate.models.routes import ModelRoute, api_key, route_for
from callgate.running.budget import Budget
from callgate.running.cache import AnswerCache
from callgate.running.calls import Caller
from callgate.running.conversation import Talk, converse
from callgate.running.counters import RunCounters, StopSwitch, progress_bar
from callgate.running.plan import Conversation, PlannedAttempt, plan, plan_conversations
from callgate.running.record import RunRecord
from callgate.running.settings import RunSettings
from callgate.running.targets.session import TargetCaller, TargetSession
from callgate.running.targets.turns import converse_target
from callgate.running.workers import call_concurrently
from callgate.scoring.pipeline import Recorder, RunResult
from callgate.scoring.probing import keep_probe
from callgate.scoring.scores import Scores
from callgate.store.db import Store
from callgate.suites.responses import Response
from callgate.suites.suite import Suite
from callgate.suites.surface import surface_json
from callgate.version import __version__

if TYPE_CHECKING:  # the judge is loaded where a run uses one
    from callgate.judging.step import JudgeStep


class OfflineMiss(CallgateError):
    """--offline, and some attempt has no stored response."""


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
    pacing: dict[str, Any] | None = None  # what limited the calls (models.pacing.Pacer)
    # What limited the judge's calls: the candidate's pacer when they share an endpoint; None
    # when no judge call was sent.
    judge_pacing: dict[str, Any] | None = None
    budget: str | None = None  # --max-cost / --max-attempts ended the run before the plan did

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
            "pacing": self.pacing,
            "judge_pacing": self.judge_pacing,
            "budget_stop": self.budget,
        }


@dataclass
class _Work:
    """A run's plan read against the store: what the store answers and what must be called."""

    hits: list[tuple[PlannedAttempt, dict[str, Any]]]  # single-turn attempts and their stored rows
    talks: list[Talk]  # conversations every turn of which is stored
    to_call: list[PlannedAttempt | Conversation]  # the rest, single-turn attempts first

    @property
    def total(self) -> int:
        return len(self.hits) + len(self.talks) + len(self.to_call)


@dataclass
class LiveRunner:
    """One live run. Build it, then `await runner.run()` (or use `run_live`).

    It holds the run's inputs, its counters and its stop switch (both are read or used from
    outside while it runs), and wires for each run the collaborators that do the work: the
    answer cache, the caller, the conversations, the concurrent loop and the run's record."""

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
    counters: RunCounters = field(default_factory=RunCounters, init=False)
    switch: StopSwitch = field(default_factory=StopSwitch, init=False)
    pacers: Pacers = field(init=False)

    def __post_init__(self) -> None:
        # One pacer per endpoint, shared by the candidate's calls and the judge's.
        self.pacers = Pacers(self.settings.concurrency)
        model = self.judge.model if self.judge is not None else None
        if model is not None:
            model.pacers = self.pacers

    def stop(self, reason: str = "interrupted") -> None:
        """Stop cleanly: no new requests, in-flight ones abandoned, answers kept."""
        self.switch.stop(reason)

    async def run(self) -> LiveRun:
        settings = self.settings
        if settings.offline and not settings.cache:
            raise CallgateError("--offline reads stored answers only; it cannot go with --no-cache")
        target = None
        if self.candidate.target is not None:
            # The pacer adapts to a model endpoint's limits; a target's own pool is fixed.
            target = TargetSession(self.candidate, settings.concurrency or START, self.environ)
        try:
            return await self._run(target)
        finally:
            if target is not None:
                await target.aclose()

    async def _run(self, target: TargetSession | None) -> LiveRun:
        settings, shard = self.settings, self.settings.shard
        route = route_for(self.candidate)
        if settings.perturbation is not None:
            route = dataclasses.replace(route, salt=settings.perturbation)
        most = max([settings.repeats, *settings.case_repeats.values()])
        if target is None:
            attempts = plan(self.suite, route, most)
            conversations = plan_conversations(self.suite, most)
        else:
            await target.open(settings.timeout)
            attempts, conversations = target.plan(self.suite, most)
        if most > settings.repeats:  # some cases asked more often (run --until-decided)
            wanted = settings.case_repeats

            def asked(item: PlannedAttempt | Conversation) -> bool:
                return item.repeat < wanted.get(item.case_id, settings.repeats)

            attempts = [a for a in attempts if asked(a)]
            conversations = [c for c in conversations if asked(c)]
        if shard is not None:
            attempts = [a for a in attempts if shard.holds(a.case_id)]
            conversations = [c for c in conversations if shard.holds(c.case_id)]
        self.store.save_suite(self.suite)
        keep_probe(self.store, self.suite)
        cache = AnswerCache(
            self.store,
            read=settings.cache or settings.offline,
            offline=settings.offline,
            commit_every=settings.commit_every,
        )
        work = await self._look_up(attempts, conversations, route, cache, target)
        if settings.offline and work.to_call:
            first = work.to_call[0]
            raise OfflineMiss(
                f"--offline: {len(work.to_call)} of {work.total} attempts have no stored "
                f"response (first: case {first.case_id!r} repeat {first.repeat}); "
                "run without --offline to call the model for them"
            )
        caller: Caller | TargetCaller | None = None
        if work.to_call:
            caller = (self._caller(route, cache, len(work.to_call)) if target is None
                      else self._target_caller(target, cache, len(work.to_call)))

        try:  # the caller's client is open from here: closed however the run ends
            with self.store.atomic():
                run_id = self.store.replace_run(
                    self.suite, self.candidate.name, self.release, "live", __version__,
                    self.judge.judge.fingerprint if self.judge else None,
                    shard=(shard.index, shard.count) if shard else None,
                    model=self.candidate.model, model_params=self.candidate.parameters(),
                    tool_surface=surface_json(self.suite),
                    perturbation=settings.perturbation,
                )
            recorder = Recorder(self.suite, self.store, run_id,
                                keep_verdicts=self.keep_verdicts, judge=self.judge,
                                server_errors=settings.server_errors,
                                max_excluded=settings.max_excluded, decided_by="run")
            record = RunRecord(recorder, self.counters)
            budget = Budget(settings.max_cost, settings.max_attempts, self.counters)
            scores = await self._fill(work, caller, cache, record, budget)
        finally:
            if isinstance(caller, Caller) and self.client is None:
                await caller.client.aclose()
        order = {case_id: i for i, case_id in enumerate(self.suite.cases)}

        def in_suite_order(verdicts: list[Verdict]) -> list[Verdict]:
            return sorted(verdicts, key=lambda v: (order[v.case_id], v.repeat))

        answered = record.answered()
        result = RunResult(
            run_id=run_id,
            suite=self.suite,
            model=self.candidate.model,
            release=self.release,
            scores=scores,
            verdicts=in_suite_order(recorder.verdicts),
            failures=in_suite_order(recorder.failures),
            missing=[c for c in self.suite.cases
                     if c not in answered and (shard is None or shard.holds(c))],
            agent=self.candidate.name,
            not_a_result=recorder.not_a_result,
        )
        counters = self.counters
        return LiveRun(
            result=result,
            candidate=self.candidate,
            client=caller.client.name if caller is not None else None,
            attempts=work.total,
            cached=len(work.hits) + len(work.talks),
            called=counters.called,
            requests=counters.requests,
            retries=counters.retries,
            provider_errors=counters.errors,
            spend=counters.spend if counters.spend_known else None,
            cost_unknown=counters.cost_unknown,
            stopped=self.switch.reason,
            pacing=caller.pacer.figures() if isinstance(caller, Caller) else None,
            judge_pacing=self.judge.model.pacing() if self.judge and self.judge.model else None,
            budget=_budget_stop(budget, len(work.to_call)),
        )

    async def _look_up(
        self,
        attempts: list[PlannedAttempt],
        conversations: list[Conversation],
        route: ModelRoute,
        cache: AnswerCache,
        target: TargetSession | None,
    ) -> _Work:
        stored = cache.usable([a.key for a in attempts])
        hits = [(a, stored[a.key]) for a in attempts if a.key in stored]
        misses: list[PlannedAttempt | Conversation] = [a for a in attempts if a.key not in stored]
        # A conversation is answered from the store when every one of its turns is.
        talks: list[Talk] = []
        unfinished: list[Conversation] = []
        for conversation in conversations:
            talk = (await converse(conversation, self.suite, route, cache, None)
                    if target is None
                    else await converse_target(conversation, target, self.suite, cache, None))
            if talk is None:
                unfinished.append(conversation)
            else:
                talks.append(talk)
        return _Work(hits, talks, [*misses, *unfinished])

    def _caller(self, route: ModelRoute, cache: AnswerCache, to_call: int) -> Caller:
        """The caller for the attempts the store does not answer (`to_call` of them): the
        candidate's client (or the one injected), its pricing, the retry policy and budget."""
        key = api_key(route, self.environ)  # a missing key variable stops the run here
        client = self.client
        if client is None:
            client = make_client(route, self.candidate.client, key,
                                 self.settings.concurrency or CEILING)
        pricing = Pricing(route)
        pricing.prepare()
        budget = self.settings.retry.budget
        return Caller(
            client,
            route,
            pricing,
            policy=self.settings.retry,
            timeout=self.settings.timeout,
            retry_budget=budget if budget is not None else max(20, to_call),
            cache=cache,
            counters=self.counters,
            stop=self.switch,
            rng=self.rng,
            pacer=self.pacers.for_route(route),
        )

    def _target_caller(self, target: TargetSession, cache: AnswerCache,
                       to_call: int) -> TargetCaller:
        budget = self.settings.retry.budget
        return TargetCaller(
            target, policy=self.settings.retry, timeout=self.settings.timeout,
            retry_budget=budget if budget is not None else max(20, to_call), cache=cache,
            counters=self.counters, rng=self.rng, console=self.console)

    def _in_flight(self, caller: Caller | TargetCaller | None) -> int:
        """Attempts in flight: --concurrency, else as many as the model's pacer may let through
        (it bounds them), or a target's own pool (which nothing else bounds: more in flight
        would wait there, and time out waiting)."""
        if self.settings.concurrency:
            return self.settings.concurrency
        return CEILING if isinstance(caller, Caller) else START

    async def _fill(
        self, work: _Work, caller: Caller | TargetCaller | None, cache: AnswerCache,
        record: RunRecord, budget: Budget
    ) -> Scores:
        """Record the stored answers, call for the rest, and score: the run's rows."""
        recorder, counters = record.recorder, self.counters
        progress = progress_bar(self.console, enabled=self.settings.progress,
                                pacer=caller.pacer if isinstance(caller, Caller) else None)
        task = progress.add_task(
            self.candidate.name, total=work.total, errors=0, spend=counters.spend_text()
        )

        async def checked(response: Response) -> Verdict | None:
            """The checks of an answer, off the event loop where they run the suite's
            environment again (a slow tool or server would stall every attempt in flight)."""
            if self.suite.environment is None:
                return None
            return await asyncio.to_thread(recorder.check, response)

        async def answer(item: PlannedAttempt | Conversation) -> None:
            assert caller is not None
            if isinstance(item, Conversation):
                talk = (await converse(item, self.suite, caller.route, cache, caller)
                        if isinstance(caller, Caller)
                        else await converse_target(item, caller.session, self.suite, cache,
                                                   caller))
                assert talk is not None  # with a caller, every turn gets an answer
                record.talk(talk, await checked(talk.response))
            else:
                outcome = await caller.call(item)
                record.called(outcome, await checked(outcome.response))
            progress.update(task, advance=1, errors=counters.errors, spend=counters.spend_text())

        async def budgeted(item: PlannedAttempt | Conversation) -> None:
            try:
                await answer(item)
            finally:
                await budget.finish()

        with progress:
            for attempt, row in work.hits:
                record.stored(attempt, row)
                progress.update(task, advance=1, errors=counters.errors)
            for talk in work.talks:
                record.talk(talk)
                progress.update(task, advance=1, errors=counters.errors)
            completed = False
            try:
                if work.to_call:
                    await call_concurrently(
                        work.to_call,
                        budgeted if budget.active else answer,
                        concurrency=self._in_flight(caller),
                        stop=self.switch,
                        commit_loop=cache.commit_loop,
                        admit=budget.admit if budget.active else None,
                    )
                await recorder.judge_pending()
                completed = True
            finally:
                # Save first: nothing here awaits, so a second Ctrl-C cannot cut it short.
                cache.commit()
                record.save_links(self.store)
                if isinstance(caller, Caller):
                    self.store.set_run_pacing(recorder.run_id, caller.pacer.figures())
                recorder.keep_unjudged()
                if self.switch.reason or not completed:
                    # Marked first: partial scores never serve as a baseline, nor replace the
                    # release's earlier finished run (the store keeps that one).
                    self.store.set_run_status(recorder.run_id, "interrupted")
                scores = recorder.finish(stopped=_budget_stop(budget, len(work.to_call)))
        return scores


def _budget_stop(budget: Budget, to_call: int) -> str | None:
    """Why the budget ended the run, when it did before every attempt was called."""
    if budget.reason is None or budget.started >= to_call:
        return None
    return f"{budget.reason}; {budget.started} of {to_call} attempts called"


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
