"""The bundled example agent (callgate.examples.order_agent: its own loop on its own order
store, asking an OpenAI-compatible model) on a scenario case of the order_store example: the
loopback serves both the agent's model and the scripted user model, the simulated user gives
the order only when asked, the agent cancels it, the final state is the expected one; the same
run again sends no request to either."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import KEY, KEY_ENV
from loopback import Loopback, Reply, ok, tool_call
from target_runs import settings
from test_target_scenarios import to_user, user_spec

from callgate.examples import order_agent
from callgate.models.config import Candidate
from callgate.running.run import LiveRun, run_live
from callgate.store.db import Store
from callgate.suites.suite import load_suite

EXAMPLE = Path(order_agent.__file__).parent / "order_store"
ORDER = {"customer_email": "ana.silva@example.com", "placed": "2026-11-10", "total": 39.9,
         "address": {"street": "9 Vicarage Road", "city": "Oxford", "postal_code": "OX1 4RF",
                     "country": "GB"},
         "items": [{"item_id": "itm_503", "name": "Tea towels", "quantity": 1, "price": 39.9}]}
CASE = {
    "id": "cancel-asked", "tags": ["scenario"],
    "messages": [{"role": "user", "content": "Please cancel an order of mine. [ex]"}],
    "state": {"orders": {"ord_5102": {**ORDER, "status": "pending"},
                         "ord_5101": {**ORDER, "status": "shipped"}}},
    "expect": {"type": "final_state", "calls": [
        {"tool": "cancel_order", "args": {"order_id": "ord_5102", "reason": "changed_mind"}}]},
    "scenario": {"instructions": "You changed your mind about order ord_5102.",
                 "known": {"order_id": "ord_5102", "reason": "changed_mind"},
                 "done_when": "the agent says the order is cancelled"},
}
TOLD = "It is ord_5102: I changed my mind."


def both_models(request: dict[str, Any]) -> Reply:
    """The user model (asked with the simulator's prompt); anything else is the agent's."""
    messages = request.get("messages") or []
    if "SIMULATED USER" in str(messages[0].get("content")):
        last = str(messages[-1].get("content"))
        return ok(content="###STOP###" if "cancelled" in last else TOLD)
    return ok(content="I cannot help with that.")


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[Loopback]:
    with Loopback(default=both_models) as loopback:
        monkeypatch.setenv(order_agent.API_BASE_ENV, loopback.base_url)
        loopback.script_turns("[ex]", ok(content="Which order, and why?"))
        loopback.script_turns(TOLD, ok(calls=[tool_call(
            "cancel_order", {"order_id": "ord_5102", "reason": "changed_mind"}, "c1")]),
            ok(content="ord_5102 is cancelled."))
        yield loopback


def run(tmp_path: Path, loopback: Loopback) -> LiveRun:
    folder = tmp_path / "suite"
    folder.mkdir(exist_ok=True)
    for name in ("suite.json", "tools.json", "env.py"):
        shutil.copy(EXAMPLE / name, folder / name)
    (folder / "cases.jsonl").write_text(json.dumps(CASE) + "\n")
    with Store(tmp_path / "callgate.db") as store:
        return run_live(load_suite(folder), Candidate(target=order_agent.TARGET), store,
                        release="r1", settings=settings(), environ={KEY_ENV: KEY},
                        user=user_spec(tmp_path, loopback))


def test_the_example_agent_reaches_a_scenario_s_goal_and_a_rerun_asks_nothing(
    server: Loopback, tmp_path: Path
) -> None:
    live = run(tmp_path, server)
    (verdict,) = live.result.verdicts
    assert verdict.status == "scored" and verdict.right_arguments, verdict.tool_reason
    assert to_user(server) == 2  # the order when asked, then the stop
    agent_asked = [s.marker for s in server.requests if s.body.get("model") == "example-model"]
    assert agent_asked == ["Please cancel an order of mine. [ex]", TOLD, TOLD]
    server.reset()
    again = run(tmp_path, server)
    assert server.requests == [] and again.called == 0
    (replayed,) = again.result.verdicts
    assert (replayed.status, replayed.right_arguments) == ("scored", True)
