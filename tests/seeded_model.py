"""A loopback model whose answers are right with a per-case probability, seeded: the n-th
request for a case is right when the n-th draw of that case's own generator falls below its
probability, so a run gives the same answers whatever order its requests arrive in."""

from __future__ import annotations

import random
import re
import threading
from collections.abc import Mapping
from typing import Any

from loopback import Reply, last_user_text, ok, tool_call

MARKER = re.compile(r"\[([^\]]+)\]")


class SeededModel:
    """`Loopback(default=SeededModel(...))`: a case's right answer calls lookup_order with
    its expected order (ord_1), a wrong one asks for ord_9. `p`: case id -> probability."""

    def __init__(self, p: Mapping[str, float], seed: int = 0) -> None:
        self.p = dict(p)
        self.seed = seed
        self._draws: dict[str, random.Random] = {}
        self._lock = threading.Lock()
        self.asked: dict[str, int] = {}

    def right(self, case_id: str) -> bool:
        with self._lock:
            draws = self._draws.setdefault(case_id, random.Random(f"{self.seed}:{case_id}"))
            self.asked[case_id] = self.asked.get(case_id, 0) + 1
            return draws.random() < self.p.get(case_id, 1.0)

    def __call__(self, request: dict[str, Any]) -> Reply:
        text = last_user_text(request)
        found = MARKER.search(text)
        case_id = found.group(1) if found else ""
        order = "ord_1" if self.right(case_id) else "ord_9"
        return ok(calls=[tool_call("lookup_order", {"order_id": order})])
