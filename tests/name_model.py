"""A loopback model that finds the right tool by its name: the user message names the tool it
wants (`[case] lookup_order ord_1`); when a tool of that name is offered the model calls it, and
when none is (the names masked or renamed) it finds the tool by its description with
probability `p`, else calls another offered tool. So a clean run is all right, a run with the
names masked is right on the tool with probability p, and a run with the tools or parameters
reordered is right as the clean one. Seeded per case, as SeededModel: the n-th request for a
case that needs a draw gets the n-th draw of that case's own generator, whatever the order."""

from __future__ import annotations

import random
import re
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from loopback import Reply, last_user_text, ok, tool_call

ASKED = re.compile(r"\[([^\]]+)\]\s+(\S+)\s+(\S+)")


class NameModel:
    """`Loopback(default=NameModel(TOOLS, p=0.5))`; `distracted`: the probability of calling a
    look-alike (a tool whose description starts with the wanted one's) when one is offered."""

    def __init__(self, tools: Sequence[Mapping[str, Any]], p: float, seed: int = 0,
                 distracted: float = 0.0) -> None:
        self.descriptions = {t["function"]["name"]: t["function"]["description"] for t in tools}
        self.p = p
        self.distracted = distracted
        self.seed = seed
        self._draws: dict[str, random.Random] = {}
        self._lock = threading.Lock()

    def _draw(self, case_id: str) -> float:
        with self._lock:
            draws = self._draws.setdefault(case_id, random.Random(f"{self.seed}:{case_id}"))
            return draws.random()

    def __call__(self, request: dict[str, Any]) -> Reply:
        text = last_user_text(request)
        found = ASKED.search(text)
        if found is None:
            return ok(content="What do you need?")
        case_id, wanted, order = found.groups()
        offered = {t["function"]["name"]: t["function"].get("description", "")
                   for t in request.get("tools") or []}
        described = self.descriptions[wanted]
        look_alike = [n for n, d in offered.items() if d != described and d.startswith(described)]
        if look_alike and self.distracted and self._draw(case_id) < self.distracted:
            name = look_alike[0]
        elif wanted in offered:
            name = wanted
        elif self._draw(case_id) < self.p:
            name = next(n for n, d in offered.items() if d == described)
        else:
            name = next(n for n, d in offered.items() if d != described)
        return ok(calls=[tool_call(name, {"order_id": order})])
