"""Builders for multi-turn suites and recorded `turns` lines, shared by the trajectory,
environment and agent-loop tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from factories import TOOLS

from callgate.checks.verdict import Verdict
from callgate.scoring.pipeline import RunResult, score_file
from callgate.store.db import Store
from callgate.suites.suite import Suite, load_suite

# A small order store. track_shipment of ord_666 fails inside the environment (a bug, not a
# domain error); with `{"broken": true}` in the state, state() itself fails.
ENV_PY = '''
from callgate.suites.environment import ToolError


class Shop:
    def __init__(self, state):
        self._state = state

    def state(self):
        if self._state.get("broken"):
            raise RuntimeError("state() is broken")
        return self._state

    def _order(self, order_id):
        order = self._state["orders"].get(order_id)
        if order is None:
            raise ToolError(f"no order {order_id}")
        return order

    def lookup_order(self, order_id, include_items=False):
        return {"order_id": order_id, **self._order(order_id)}

    def cancel_order(self, order_id, reason):
        order = self._order(order_id)
        if order["status"] != "pending":
            raise ToolError(f"{order_id} is {order['status']}")
        order["status"] = "cancelled"
        order["reason"] = reason
        return {"order_id": order_id, "status": "cancelled"}

    def track_shipment(self, order_id):
        if order_id == "ord_666":
            raise RuntimeError("the carrier database is down")
        return {"order_id": order_id, "where": "depot"}
'''

STATE = {
    "orders": {
        "ord_1": {"status": "pending"},
        "ord_2": {"status": "pending"},
        "ord_3": {"status": "shipped"},
    }
}


def env_suite(root: Path, cases: list[dict[str, Any]], env_py: str = ENV_PY,
              tools: list[dict[str, Any]] | None = None) -> Path:
    """A suite directory whose suite.json names `env:Shop`."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "env.py").write_text(env_py)
    (root / "suite.json").write_text(json.dumps({"name": root.name, "environment": "env:Shop"}))
    (root / "tools.json").write_text(json.dumps(TOOLS if tools is None else tools))
    (root / "cases.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cases))
    return root


def plain_suite(root: Path, cases: list[dict[str, Any]]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "tools.json").write_text(json.dumps(TOOLS))
    (root / "cases.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cases))
    return root


def mt_case(case_id: str, expect: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"id": case_id, "messages": [{"role": "user", "content": f"[{case_id}] help"}],
            "expect": expect, **extra}


def c(name: str, **arguments: Any) -> tuple[str, dict[str, Any]]:
    """One call made by the model: (tool, arguments)."""
    return name, arguments


def assistant(*calls: tuple[str, dict[str, Any]], content: str | None = None,
              turn: int = 0) -> dict[str, Any]:
    """A bare assistant message with these calls (none: a plain answer)."""
    out: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        out["tool_calls"] = [
            {"id": f"call_{turn}_{index}", "type": "function",
             "function": {"name": name, "arguments": json.dumps(arguments)}}
            for index, (name, arguments) in enumerate(calls)
        ]
    return out


def turns(case_id: str, *messages: list[tuple[str, dict[str, Any]]] | str,
          repeat: int = 0) -> dict[str, Any]:
    """A `turns` line: each item is a list of calls (one assistant message) or a final text."""
    out = []
    for index, item in enumerate(messages):
        if isinstance(item, str):
            out.append(assistant(content=item, turn=index))
        else:
            out.append(assistant(*item, turn=index))
    return {"case_id": case_id, "repeat": repeat, "turns": out}


def score(tmp_path: Path, suite: Suite, lines: list[dict[str, Any]],
          release: str = "r1") -> RunResult:
    path = tmp_path / f"responses-{release}.jsonl"
    path.write_text("".join(json.dumps(item) + "\n" for item in lines))
    with Store(tmp_path / "callgate.db") as store:
        return score_file(suite, path, store, model="m", release=release)


def verdicts(tmp_path: Path, root: Path, lines: list[dict[str, Any]]) -> dict[str, Verdict]:
    """Load the suite, score the lines, and return the verdicts by case id (repeat 0)."""
    result = score(tmp_path, load_suite(root), lines)
    return {v.case_id: v for v in result.verdicts if v.repeat == 0}
