"""What running a Python environment on a thread of its own costs (suites/environment_guard):
N environments made, 3 tool calls and a state() each, guarded (as `fresh` makes them) beside
the same calls on an environment made directly (no thread), in the same run. Prints wall ms per
environment, best of three."""

from __future__ import annotations

import copy
import time
from typing import Any

from callgate.suites.environment import call_tool, fresh, snapshot

N = 2000


class Orders:
    def __init__(self, state: dict[str, Any]) -> None:
        self._orders = dict(state.get("orders", {}))

    def state(self) -> dict[str, Any]:
        return {"orders": self._orders}

    def lookup(self, order_id: str) -> dict[str, Any]:
        return {"order_id": order_id, **self._orders.get(order_id, {})}


def guarded() -> None:
    for _ in range(N):
        env = fresh(Orders, {"orders": {"o1": {"status": "pending"}}})
        for _ in range(3):
            call_tool(env, "lookup", {"order_id": "o1"})
        snapshot(env)


def direct() -> None:
    """The same calls through call_tool and snapshot on the environment made directly, as
    fresh made it before the guard."""
    for _ in range(N):
        env = Orders(copy.deepcopy({"orders": {"o1": {"status": "pending"}}}))
        for _ in range(3):
            call_tool(env, "lookup", {"order_id": "o1"})
        snapshot(env)


def best(run: Any) -> float:
    times = []
    for _ in range(3):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return min(times) * 1000 / N


if __name__ == "__main__":
    print(f"direct (reference): {best(direct):.3f} ms per environment")
    print(f"guarded (fresh, call_tool, snapshot): {best(guarded):.3f} ms per environment")
