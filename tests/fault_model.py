"""A loopback model that meets tool faults (docs/faults.md): it looks an order up; when the
tool's answer is a fault (an error, empty or cut text), it retries with a set probability,
seeded per case (the n-th fault a case meets is retried when the n-th draw of that case's own
generator falls below `p`, so a run gives the same answers whatever order its requests come
in), and otherwise gives up claiming success. After a clean answer it says what it found.

`Loopback(default=RetryingModel(p))`; a case's marker `[id]` in its user message."""

from __future__ import annotations

import json
import random
import re
import threading
from typing import Any

from loopback import Reply, ok, tool_call

MARKER = re.compile(r"\[([^\]]+)\]")
GIVE_UP = "Done: your order ord_1 is all set."
FOUND = "Your order ord_1 is pending."


def is_fault(content: Any) -> bool:
    if not isinstance(content, str) or not content:
        return True
    try:
        value = json.loads(content)
    except ValueError:
        return True  # cut text
    return isinstance(value, dict) and "error" in value


class RetryingModel:
    def __init__(self, p: float, seed: int = 0) -> None:
        self.p = p
        self.seed = seed
        self._draws: dict[str, random.Random] = {}
        self._lock = threading.Lock()
        self.retried = 0
        self.gave_up = 0

    def retries(self, case_id: str) -> bool:
        with self._lock:
            draws = self._draws.setdefault(case_id, random.Random(f"{self.seed}:{case_id}"))
            retry = draws.random() < self.p
            self.retried += retry
            self.gave_up += not retry
            return retry

    def __call__(self, request: dict[str, Any]) -> Reply:
        messages = [m for m in request.get("messages") or [] if isinstance(m, dict)]
        user = max(i for i, m in enumerate(messages) if m.get("role") == "user")
        found = MARKER.search(str(messages[user].get("content") or ""))
        case_id = found.group(1) if found else ""
        answers = [m for m in messages[user + 1:] if m.get("role") == "tool"]
        lookup = ok(calls=[tool_call("lookup_order", {"order_id": "ord_1"},
                                     f"call_{len(answers)}")])
        if not answers:
            return lookup
        if not is_fault(answers[-1].get("content")):
            return ok(content=FOUND)
        return lookup if self.retries(case_id) else ok(content=GIVE_UP)
