"""The cache of model calls, which is also what lets a killed run resume: every request and its
answer is kept in table live_responses under a SHA-256 key (model, api base, parameters,
messages, tools, repeat index), committed in small batches as answers arrive, and read back
instead of calling again."""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from typing import Any

from callgate.running.plan import PlannedAttempt
from callgate.store.db import Store
from callgate.store.rows import live_response_row
from callgate.store.schema import now
from callgate.suites.responses import Response, parse_response


@dataclass
class AttemptOutcome:
    """One attempt's answer: the response, the line stored for it, and the tries it took."""

    attempt: PlannedAttempt
    response: Response
    line: str
    tries: int


def line_text(line: dict[str, Any]) -> str:
    """A recorded line as it is stored: compact JSON, non-ASCII kept."""
    return json.dumps(line, ensure_ascii=False, separators=(",", ":"))


def stored_response(attempt: PlannedAttempt, text: str) -> tuple[Response, str]:
    """A stored line as this attempt's response (identical requests share a cache key)."""
    line = json.loads(text)
    if line.get("case_id") != attempt.case_id or line.get("repeat") != attempt.repeat:
        line["case_id"], line["repeat"] = attempt.case_id, attempt.repeat
        text = line_text(line)
    return parse_response(line), text


class AnswerCache:
    """The answers of table live_responses: read back (when the run reads the cache), and new
    ones kept and committed in batches, at least every `commit_every` seconds."""

    def __init__(self, store: Store, *, read: bool, offline: bool, commit_every: float) -> None:
        self.store = store
        self.read = read  # False: every attempt is called again (--no-cache)
        self.offline = offline  # a stored failure is reproduced, not called again
        self.commit_every = commit_every
        self._pending: list[tuple[Any, ...]] = []
        self._last_commit = time.monotonic()

    def usable(self, keys: list[str]) -> dict[str, dict[str, Any]]:
        """The stored rows of these keys the run may answer from."""
        if not self.read:
            return {}
        rows = self.store.live_responses(keys)
        # Online, a stored failure is called again; offline it is reproduced as it was.
        return {key: row for key, row in rows.items()
                if self.offline or row["error_kind"] is None}

    def stored_turn(self, key: str) -> dict[str, Any] | None:
        return self.usable([key]).get(key)

    def keep(self, outcome: AttemptOutcome, model: str, request: str) -> None:
        """Keep one request (an attempt, or a turn of a conversation) and its answer."""
        attempt, response = outcome.attempt, outcome.response
        self._pending.append(live_response_row(
            key=attempt.key, model=model, case_id=attempt.case_id, repeat=attempt.repeat,
            request=request, line=outcome.line,
            error_kind=response.error.kind if response.error else None, tries=outcome.tries,
            created_at=now()))
        if len(self._pending) >= 64:
            self.commit()

    def commit(self) -> None:
        if self._pending:
            self.store.save_live_responses(self._pending)
            self._pending = []
        self._last_commit = time.monotonic()

    async def commit_loop(self) -> None:
        while True:
            await asyncio.sleep(self.commit_every)
            if time.monotonic() - self._last_commit >= self.commit_every:
                self.commit()
