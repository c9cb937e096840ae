"""What a live run answered: every answer, stored or called, is handed to the Recorder (checked,
stored and scored as `callgate score` does), linked to the request behind it (table
run_requests; a conversation's turns in run_turns) and counted (calls and errors)."""

from __future__ import annotations

from typing import Any

from callgate.checks.verdict import Verdict
from callgate.running.cache import AttemptOutcome, stored_response
from callgate.running.conversation import Talk
from callgate.running.counters import RunCounters
from callgate.running.plan import PlannedAttempt
from callgate.scoring.pipeline import Recorder
from callgate.store.db import Store
from callgate.store.rows import run_request_row, run_turn_row


class RunRecord:
    """The answers of one run, as they come, and its links to the requests behind them."""

    def __init__(self, recorder: Recorder, counters: RunCounters) -> None:
        self.recorder = recorder
        self.counters = counters
        self._links: list[tuple[Any, ...]] = []  # (run, case_id, repeat, key, cached)
        self._turn_links: list[tuple[Any, ...]] = []  # (run, case_id, repeat, turn, key, cached)

    def stored(self, attempt: PlannedAttempt, row: dict[str, Any]) -> None:
        """A single-turn attempt answered from the store."""
        response, line = stored_response(attempt, row["line"])
        self.recorder.add(response, line)
        self._links.append(run_request_row(run=self.recorder.run_id, case_id=attempt.case_id,
                                           repeat=attempt.repeat, cache_key=attempt.key,
                                           cached=1))
        if response.error is not None:
            self.counters.errors += 1

    def called(self, outcome: AttemptOutcome, checked: Verdict | None = None) -> None:
        """A single-turn attempt the model was called for (`checked`: its checks, if run)."""
        attempt, response = outcome.attempt, outcome.response
        self.counters.called += 1
        if response.error is not None:
            self.counters.errors += 1
        self._links.append(run_request_row(run=self.recorder.run_id, case_id=attempt.case_id,
                                           repeat=attempt.repeat, cache_key=attempt.key,
                                           cached=0))
        self.recorder.add(response, outcome.line, checked)

    def talk(self, talk: Talk, checked: Verdict | None = None) -> None:
        """A conversation, its turns from the store or called (`checked`: its checks, if
        run)."""
        conversation, response = talk.conversation, talk.response
        run_id = self.recorder.run_id
        if not all(talk.cached):
            self.counters.called += 1
        if response.error is not None:
            self.counters.errors += 1
        key, cached = talk.keys[-1], int(all(talk.cached))
        self._links.append(run_request_row(run=run_id, case_id=conversation.case_id,
                                           repeat=conversation.repeat, cache_key=key,
                                           cached=cached))
        self._turn_links.extend(
            run_turn_row(run=run_id, case_id=conversation.case_id, repeat=conversation.repeat,
                         turn=turn, cache_key=key, cached=int(cached))
            for turn, (key, cached) in enumerate(zip(talk.keys, talk.cached, strict=True))
        )
        self.recorder.add(response, talk.line, checked)

    def answered(self) -> set[str]:
        """The cases with at least one answer in this run."""
        return {link[1] for link in self._links}

    def save_links(self, store: Store) -> None:
        store.save_run_requests(self._links)
        store.save_run_turns(self._turn_links)
