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
from callgate.models.providers import Client, make_client
from callgate.models.targets import Target, api_key, target_for
from callgate.running.cache import stored_response
from callgate.running.conversation import Talk
from callgate.running.plan import Attempt, Conversation, plan, plan_conversations
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
        talks: list[Talk] = []
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
                model=self.candidate.model, model_params=self.candidate.parameters(),
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
            model=self.candidate.model,
            release=self.release,
            scores=scores,
            verdicts=in_suite_order(recorder.verdicts),
            failures=in_suite_order(recorder.failures),
            missing=[c for c in self.suite.cases
                     if c not in answered and (shard is None or shard.holds(c))],
            agent=self.candidate.name,
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
        talks: list[Talk] | None = None,
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
                response, line = stored_response(attempt, row["line"])
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
