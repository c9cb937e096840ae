"""Stage 1, live: call the candidate for every (case, repeat), then check and score as recorded.

`LiveRunner` ties the stage together: it plans the attempts (`plan`), reads back what the store
already answered (`cache`), calls for the rest with bounded concurrency (`workers`), each one
request with retries (`calls`) or a conversation over turns (`conversation`), and has
everything checked, stored and scored by `pipeline.Recorder`, as `callgate score` does. A run
killed at any point resumes with only the unanswered attempts; a run stopped early is marked
interrupted, so its partial scores never serve as a baseline."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rich.console import Console

from callgate.checks.verdict import Verdict
from callgate.errors import CallgateError
from callgate.models.config import Candidate
from callgate.models.pricing import Pricing
from callgate.models.providers import make_client
from callgate.models.targets import Target, api_key, target_for
from callgate.running.calls import Caller
from callgate.running.conversation import Talk, converse
from callgate.running.counters import progress_bar
from callgate.running.plan import Attempt, Conversation, plan, plan_conversations
from callgate.running.record import RunRecord
from callgate.running.settings import RunSettings
from callgate.running.workers import WorkerPool
from callgate.scoring.pipeline import JudgeStep, Recorder, RunResult
from callgate.scoring.scores import Scores
from callgate.store.db import Store
from callgate.suites.suite import Suite
from callgate.version import __version__


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


class LiveRunner(WorkerPool):
    """One live run. Build it, then `await runner.run()` (or use `run_live`)."""

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
        stored = self.cache.usable([a.key for a in attempts])
        hits = [(a, stored[a.key]) for a in attempts if a.key in stored]
        misses = [a for a in attempts if a.key not in stored]
        # A conversation is answered from the store when every one of its turns is.
        talks: list[Talk] = []
        unfinished: list[Conversation] = []
        for conversation in plan_conversations(self.suite, settings.repeats):
            if shard is not None and not shard.holds(conversation.case_id):
                continue
            talk = await converse(conversation, self.suite, target, self.cache, None)
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
        to_call = len(misses) + len(unfinished)
        caller = self._caller(target, to_call) if to_call else None

        with self.store.atomic():
            run_id = self.store.replace_run(
                self.suite, self.candidate.name, self.release, "live", __version__,
                self.judge.judge.fingerprint if self.judge else None,
                shard=(shard.index, shard.count) if shard else None,
            )
        recorder = Recorder(self.suite, self.store, run_id, keep_verdicts=self.keep_verdicts,
                            judge=self.judge)
        record = RunRecord(recorder, self.counters)
        try:
            scores = await self._fill(hits, misses, caller, record, talks, unfinished)
        finally:
            if caller is not None and self.client is None:
                await caller.client.aclose()
        order = {case_id: i for i, case_id in enumerate(self.suite.cases)}

        def in_suite_order(verdicts: list[Verdict]) -> list[Verdict]:
            return sorted(verdicts, key=lambda v: (order[v.case_id], v.repeat))

        answered = record.answered()
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
            client=caller.client.name if caller is not None else None,
            attempts=total,
            cached=len(hits) + len(talks),
            called=self.counters.called,
            requests=self.counters.requests,
            retries=self.counters.retries,
            provider_errors=self.counters.errors,
            spend=self.counters.spend if self.counters.spend_known else None,
            cost_unknown=self.counters.cost_unknown,
            stopped=self.switch.reason,
        )

    def _caller(self, target: Target, to_call: int) -> Caller:
        """The caller for the attempts the store does not answer (`to_call` of them): the
        candidate's client (or the one injected), its pricing, the retry policy and budget."""
        key = api_key(target, self.environ)  # a missing key variable stops the run here
        client = self.client
        if client is None:
            client = make_client(target, self.candidate.client, key, self.settings.concurrency)
        pricing = Pricing(target)
        pricing.prepare()
        budget = self.settings.retry.budget
        return Caller(
            client,
            target,
            pricing,
            policy=self.settings.retry,
            timeout=self.settings.timeout,
            retry_budget=budget if budget is not None else max(20, to_call),
            cache=self.cache,
            counters=self.counters,
            stop=self.switch,
            rng=self.rng,
        )

    async def _fill(
        self,
        hits: list[tuple[Attempt, dict[str, Any]]],
        misses: list[Attempt],
        caller: Caller | None,
        record: RunRecord,
        talks: list[Talk] | None = None,
        unfinished: list[Conversation] | None = None,
    ) -> Scores:
        """Record the stored answers, call for the rest, and score: the run's rows."""
        talks, unfinished = talks or [], unfinished or []
        recorder = record.recorder
        progress = progress_bar(self.console, enabled=self.settings.progress)
        task = progress.add_task(
            self.candidate.name,
            total=len(hits) + len(misses) + len(talks) + len(unfinished),
            errors=0,
            spend=self.counters.spend_text(),
        )
        with progress:
            for attempt, row in hits:
                record.stored(attempt, row)
                progress.update(task, advance=1, errors=self.counters.errors)
            for talk in talks:
                record.talk(talk)
                progress.update(task, advance=1, errors=self.counters.errors)
            completed = False
            try:
                if misses or unfinished:
                    assert caller is not None
                    await self._call_all([*misses, *unfinished], caller, record, progress, task)
                await recorder.judge_pending()
                completed = True
            finally:
                # Save first: nothing here awaits, so a second Ctrl-C cannot cut it short.
                self.cache.commit()
                record.save_links(self.store)
                recorder.keep_unjudged()
                if self.switch.reason or not completed:
                    # Marked first: partial scores never serve as a baseline, nor replace the
                    # release's earlier finished run (the store keeps that one).
                    self.store.set_run_status(recorder.run_id, "interrupted")
                scores = recorder.finish()
        return scores


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
