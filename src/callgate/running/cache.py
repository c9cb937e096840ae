"""The cache of model calls, which is also what lets a killed run resume: every request and its
answer is kept in table live_responses under a SHA-256 key (model, api base, parameters,
messages, tools, repeat index), committed in small batches as answers arrive, and read back
instead of calling again. Saving a request also counts its spend, and stops the run on a
failure every request would repeat (FATAL: a bad key, no such model)."""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from typing import Any

from callgate.models.providers import Client
from callgate.models.replies import FATAL
from callgate.models.targets import Target
from callgate.running.plan import Attempt
from callgate.running.state import RunnerState
from callgate.store.db import now
from callgate.suites.responses import Response, parse_response


@dataclass
class AttemptOutcome:
    """One attempt's answer: the response, the line stored for it, and the tries it took."""

    attempt: Attempt
    response: Response
    line: str
    tries: int


def line_text(line: dict[str, Any]) -> str:
    """A recorded line as it is stored: compact JSON, non-ASCII kept."""
    return json.dumps(line, ensure_ascii=False, separators=(",", ":"))


def stored_response(attempt: Attempt, text: str) -> tuple[Response, str]:
    """A stored line as this attempt's response (identical requests share a cache key)."""
    line = json.loads(text)
    if line.get("case_id") != attempt.case_id or line.get("repeat") != attempt.repeat:
        line["case_id"], line["repeat"] = attempt.case_id, attempt.repeat
        text = line_text(line)
    return parse_response(line), text


class ResponseCache(RunnerState):
    """Reading stored answers back and keeping new ones: the run's cache and resume."""

    def _stored_turn(self, key: str) -> dict[str, Any] | None:
        settings = self.settings
        if not (settings.cache or settings.offline):
            return None
        row = self.store.live_responses([key]).get(key)
        if row is None or (row["error_kind"] is not None and not settings.offline):
            return None  # online, a stored failure is called again
        return row

    def _save_request(self, outcome: AttemptOutcome, client: Client, target: Target) -> None:
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
        else:
            self.counters.count_cost(response.cost)
        if len(self._pending) >= 64:
            self._commit()

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
