"""Stage 1, live: call the candidate for every (case, repeat), then check and score as recorded.

`LiveRunner` wires the stage's collaborators, each built with what it needs and passed along,
none a base class of another: it plans the attempts (`plan`), reads back what the store already
answered (`AnswerCache`), calls for the rest with bounded concurrency (`call_concurrently`),
each one request with retries (`Caller`) or a conversation over turns (`converse`), to one
source (running.source): the candidate's model (`ModelSource`) or the agent under test
(`running.targets`), and has every answer checked, stored and scored by `pipeline.Recorder`, as
`callgate score` does, and linked to its requests (`RunRecord`). A run killed at any point
resumes with only the unanswered attempts; a run stopped early is marked interrupted, so its
partial scores never serve as a baseline."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

from rich.console import Console

from callgate.checks.verdict import Verdict
from callgate.errors import CallgateError
from callgate.models.config import Candidate
from callgate.models.pacing import START, Pacers, PacingFigures
from callgate.models.providers import Client
from callgate.models.simulated_user import SimulatedUser
from callgate.running.budget import Budget
from callgate.running.cache import AnswerCache
from callgate.running.calls import Caller
from callgate.running.conversation import Talk, converse
from callgate.running.counters import RunCounters, StopSwitch, progress_bar
from callgate.running.model_source import ModelSource, run_route
from callgate.running.plan import Conversation, PlannedAttempt
from callgate.running.record import RunRecord
from callgate.running.settings import RunSettings
from callgate.running.simulated_user import UserPlayer
from callgate.running.source import Source
from callgate.running.targets.session import TargetSession
from callgate.running.users import UserJudge, blamed, has_scenarios, player_of, refuse_unplayed
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
    from callgate.scoring.behaviour import BehaviourJudges


class OfflineMiss(CallgateError):
    """--offline, and some attempt has no stored response."""


class LiveSummary(TypedDict):
    """`LiveRun.summary`: what a live run took to get its scores."""

    candidate: str
    model_id: str
    client: str | None
    attempts: int
    cached: int
    called: int
    requests: int
    retries: int
    provider_errors: int
    spend_usd: float | None
    cost_unknown: int
    stopped: str | None
    pacing: PacingFigures | None
    judge_pacing: PacingFigures | None
    budget_stop: str | None
    user_simulator: NotRequired[dict[str, Any]]  # run --user: the simulated user's requests


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
    pacing: PacingFigures | None = None  # what limited the calls (models.pacing.Pacer)
    # What limited the judge's calls: the candidate's pacer when they share an endpoint; None
    # when no judge call was sent.
    judge_pacing: PacingFigures | None = None
    budget: str | None = None  # --max-cost / --max-attempts ended the run before the plan did
    user: dict[str, Any] | None = None  # the simulated user's requests (run --user)

    def summary(self) -> LiveSummary:
        """The run's own figures (`run --json`'s `live`)."""
        summary: LiveSummary = {
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
        if self.user is not None:
            summary["user_simulator"] = self.user
        return summary


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
    # The judges beyond the call (scoring.behaviour: run --answer-kind-judge, --claims-judge)
    behaviour: BehaviourJudges | None = None
    client: Client | None = None  # injected by tests; built from the candidate otherwise
    # What answers the run (running.source): the candidate's target or model unless given
    source: Source | None = None
    user: SimulatedUser | None = None  # writes the user turns of scenario cases (run --user)
    # Reads the failed scenario conversations no check blamed (run --user-judge)
    user_judge: JudgeStep | None = None
    rng: random.Random = field(default_factory=random.Random)
    counters: RunCounters = field(default_factory=RunCounters, init=False)
    switch: StopSwitch = field(default_factory=StopSwitch, init=False)
    pacers: Pacers = field(init=False)

    def __post_init__(self) -> None:
        # One pacer per endpoint, shared by the candidate's calls and the judges'.
        self.pacers = Pacers(self.settings.concurrency)
        for step in self._judges():
            if step.model is not None:
                step.model.pacers = self.pacers
        if self.behaviour is not None:  # this run's own waiting list (one per run)
            self.behaviour = dataclasses.replace(self.behaviour, waiting=[])
        if self.user_judge is not None:  # asked once per conversation: closed after the run
            from callgate.judging.user_fidelity import refuse_other

            refuse_other(self.user_judge)
            self.user_judge.aclose = None  # its counters stay the caller's step's

    def _judges(self) -> list[JudgeStep]:
        """The run's judge steps: --judge's, then the judges beyond the call."""
        more = self.behaviour
        steps = [self.judge, *((more.answer_kind, more.claim_support) if more else ()),
                 self.user_judge]
        return [step for step in steps if step is not None]

    def stop(self, reason: str = "interrupted") -> None:
        """Stop cleanly: no new request starts; the answers of those in flight are kept when
        they come within the switch's grace (`StopSwitch`)."""
        self.switch.stop(reason)

    async def run(self) -> LiveRun:
        settings = self.settings
        if settings.offline and not settings.cache:
            raise CallgateError("--offline reads stored answers only; it cannot go with --no-cache")
        source = self._source()
        player = None if self.user is None else player_of(
            self.user, self.environ, self.settings.concurrency, self.pacers, self.switch)
        try:  # the source's client is open from here: closed however the run ends
            return await self._run(source, player)
        finally:
            await source.aclose()
            if player is not None:
                await player.source.aclose()
            if self.user_judge is not None and self.user_judge.model is not None:
                await self.user_judge.model.aclose()

    def _source(self) -> Source:
        """What answers the run: the agent under test when the candidate names a target, else
        its model (unless the runner was given a source)."""
        if self.source is not None:
            return self.source
        if self.candidate.target is not None:
            # The pacer adapts to a model endpoint's limits; a target's own pool is fixed.
            return TargetSession(self.candidate, self.settings.concurrency or START,
                                 self.environ, console=self.console)
        route = run_route(self.candidate, self.settings.perturbation)
        return ModelSource(self.candidate, route, environ=self.environ,
                           concurrency=self.settings.concurrency, pacers=self.pacers,
                           client=self.client, stop=self.switch)

    async def _run(self, source: Source, player: UserPlayer | None) -> LiveRun:
        settings, shard = self.settings, self.settings.shard
        refuse_unplayed(self.suite, player)
        most = max([settings.repeats, *settings.case_repeats.values()])
        await source.open(settings.timeout)
        attempts, conversations = source.plan(self.suite, most)
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
        work = await self._look_up(attempts, conversations, source, cache, player)
        if settings.offline and work.to_call:
            first = work.to_call[0]
            raise OfflineMiss(
                f"--offline: {len(work.to_call)} of {work.total} attempts have no stored "
                f"response (first: case {first.case_id!r} repeat {first.repeat}); "
                "run without --offline to call the model for them"
            )
        caller = self._caller(source, cache, len(work.to_call)) if work.to_call else None
        if player is not None and work.to_call:
            player.caller = self._caller(player.source, cache, len(work.to_call),
                                         player.counters)
        with self.store.atomic():
            run_id = self.store.replace_run(
                self.suite, self.candidate.name, self.release, "live", __version__,
                self.judge.judge.fingerprint if self.judge else None,
                shard=(shard.index, shard.count) if shard else None,
                model=self.candidate.model, model_params=self.candidate.parameters(),
                tool_surface=surface_json(self.suite),
                perturbation=settings.perturbation,
            )
            if self.user is not None:
                self.store.set_run_user_simulator(run_id, json.dumps(self.user.record()))
            if self.suite.faults.plan is not None:  # merge reads its after_fault again
                self.store.set_run_fault_plan(run_id,
                                              self.suite.faults.plan.model_dump(mode="json"))
        recorder = Recorder(self.suite, self.store, run_id,
                            keep_verdicts=self.keep_verdicts, judge=self.judge,
                            server_errors=settings.server_errors,
                            max_excluded=settings.max_excluded, decided_by="run",
                            behaviour=self.behaviour)
        record = RunRecord(recorder, self.counters)
        budget = Budget(settings.max_cost, settings.max_attempts, self.counters)
        scores = await self._fill(work, source, caller, cache, record, budget, player)
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
            client=source.name if caller is not None else None,
            attempts=work.total,
            cached=len(work.hits) + len(work.talks),
            called=counters.called,
            requests=counters.requests,
            retries=counters.retries,
            provider_errors=counters.errors,
            spend=counters.spend if counters.spend_known else None,
            cost_unknown=counters.cost_unknown,
            stopped=self.switch.reason,
            pacing=source.pacer.figures() if source.pacer is not None else None,
            judge_pacing=self._judge_pacing(),
            budget=_budget_stop(budget, len(work.to_call)),
            user=player.figures() if player is not None else None,
        )

    def _judge_pacing(self) -> PacingFigures | None:
        """What limited the judges' calls: the first judge that sent any (one endpoint's
        pacer when they share it); None when every verdict was cached."""
        for step in self._judges():
            pacing = step.model.pacing() if step.model is not None else None
            if pacing is not None:
                return pacing
        return None

    async def _look_up(
        self,
        attempts: list[PlannedAttempt],
        conversations: list[Conversation],
        source: Source,
        cache: AnswerCache,
        player: UserPlayer | None,
    ) -> _Work:
        stored = cache.usable([a.key for a in attempts])
        hits = [(a, stored[a.key]) for a in attempts if a.key in stored]
        misses: list[PlannedAttempt | Conversation] = [a for a in attempts if a.key not in stored]
        # A conversation is answered from the store when every one of its turns is.
        talks: list[Talk] = []
        unfinished: list[Conversation] = []
        for conversation in conversations:
            talk = await converse(conversation, source, self.suite, cache, None, player)
            if talk is None:
                unfinished.append(conversation)
            else:
                talks.append(talk)
        return _Work(hits, talks, [*misses, *unfinished])

    def _caller(self, source: Source, cache: AnswerCache, to_call: int,
                counters: RunCounters | None = None) -> Caller:
        """The caller for the attempts the store does not answer (`to_call` of them): the
        source made ready to be asked, the retry policy and budget."""
        source.connect(to_call)
        budget = self.settings.retry.budget
        return Caller(
            source,
            policy=self.settings.retry,
            timeout=self.settings.timeout,
            retry_budget=budget if budget is not None else max(20, to_call),
            cache=cache,
            counters=counters or self.counters,
            stop=self.switch,
            rng=self.rng,
        )

    def _in_flight(self, source: Source) -> int:
        """Attempts in flight: --concurrency, else the source's own bound (as many as a model's
        pacer may let through; a target's own pool, which nothing else bounds: more in flight
        would wait there, and time out waiting)."""
        return self.settings.concurrency or source.in_flight

    async def _fill(
        self, work: _Work, source: Source, caller: Caller | None, cache: AnswerCache,
        record: RunRecord, budget: Budget, player: UserPlayer | None = None
    ) -> Scores:
        """Record the stored answers, call for the rest, and score: the run's rows."""
        recorder, counters = record.recorder, self.counters
        judge = (None if self.user_judge is None or player is None
                 else UserJudge(self.user_judge, self.store, self.suite))
        progress = progress_bar(self.console, enabled=self.settings.progress,
                                pacer=source.pacer)
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
                talk = await converse(item, source, self.suite, cache, caller, player)
                assert talk is not None  # with a caller, every turn gets an answer
                record.talk(*await blamed(talk, await checked(talk.response), recorder.check,
                                          judge))
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
                record.talk(*await blamed(talk, None, recorder.check, judge))
                progress.update(task, advance=1, errors=counters.errors)
            completed = False
            try:
                if work.to_call:
                    await call_concurrently(
                        work.to_call,
                        budgeted if budget.active else answer,
                        concurrency=self._in_flight(source),
                        stop=self.switch,
                        commit_loop=cache.commit_loop,
                        admit=budget.admit if budget.active else None,
                    )
                await recorder.judge_pending()
                await recorder.judge_behaviour()  # its verdicts cached as they arrive
                completed = True
            finally:
                # Save first: nothing here awaits, so a second Ctrl-C cannot cut it short.
                cache.commit()
                record.save_links(self.store)
                if source.pacer is not None:
                    self.store.set_run_pacing(recorder.run_id, source.pacer.figures())
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
    user: SimulatedUser | None = None,
    behaviour: BehaviourJudges | None = None,
    user_judge: JudgeStep | None = None,
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
        behaviour=behaviour,
        user=user if user is not None and has_scenarios(suite) else None,
        user_judge=user_judge,
    )
    return asyncio.run(runner.run())
