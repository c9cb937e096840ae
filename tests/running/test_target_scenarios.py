"""Scenario cases against an agent target (`run --target ... --user SPEC`, docs/simulated-user.md):
the simulated user (a scripted loopback user model, over real HTTP) writes each later user turn,
the target (tests/scenario_agents.py, its own loop and tools) answers each through the same
conversation loop as a case with scripted user turns; a scenario reaches its goal state; a user
that stops early, leaks a secret or contradicts a fact is blamed, not the agent (the agent's
shares are those of the run without those cases, the blamed ones counted apart); a rerun asks
neither the user model nor the target; a changed simulator is named by the gate."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import scenario_agents
import simulated_users
from conftest import KEY, KEY_ENV
from loopback import Loopback, Reply, default_reply, ok
from multiturn import STATE, env_suite
from target_runs import settings

from callgate.gating.finding import find_current
from callgate.gating.release import record_gate
from callgate.models.config import Candidate
from callgate.models.simulated_user import SimulatedUser
from callgate.running.run import LiveRun, run_live
from callgate.store.db import Store
from callgate.suites.suite import Suite, load_suite

TARGET = "python:scenario_agents:answer"
USER = "simulated user: "  # how a blamed verdict's reason starts
PROMPT = "SIMULATED USER. Play this scenario; write {{stop}} when done.\n{{scenario}}\n"
# What the scripted user model says while the order is not cancelled, by the scenario's tag.
SAYS = {
    "[goal]": "It is ord_1, I ordered it twice: duplicate.",
    "[quit]": "###STOP###",  # gives up before the agent did anything
    "[leak]": "It is ord_1, for some other reason.",  # ord_1 is the scenario's secret
    "[lie]": "It is ord_2, I ordered it twice: duplicate.",  # the scenario says ord_1
}


def user_model(request: dict[str, Any]) -> Reply:
    messages = request.get("messages") or []
    system = str(messages[0].get("content")) if messages else ""
    if "SIMULATED USER" not in system:
        return default_reply(request)
    if "cancelled" in str(messages[-1].get("content")):
        return ok(content="Thanks! ###STOP###")
    return ok(content=next(text for tag, text in SAYS.items() if tag in system))


@pytest.fixture
def server() -> Iterator[Loopback]:
    scenario_agents.ASKED.clear()
    with Loopback(default=user_model) as loopback:
        yield loopback


def case(case_id: str, tag: str, **scenario: Any) -> dict[str, Any]:
    scenario.setdefault("known", {"order_id": "ord_1", "reason": "duplicate"})
    return {"id": case_id, "messages": [{"role": "user", "content": f"[{case_id}] hello"}],
            "tools": ["lookup_order", "cancel_order"], "state": STATE,
            "expect": {"type": "final_state", "calls": [
                {"tool": "cancel_order", "args": {"order_id": "ord_1", "reason": "duplicate"}}]},
            "scenario": {"instructions": f"{tag} You ordered twice; cancel the duplicate.",
                         "done_when": "the agent says it is cancelled", **scenario}}


AGENTS_OWN = [case("goal", "[goal]"), case("sloppy", "[goal]")]  # the agent's own attempts
BLAMED = [case("quit", "[quit]"),
          case("leak", "[leak]", known={"reason": "duplicate"}, secret=["ord_1"]),
          case("lie", "[lie]")]


def suite_of(folder: Path, cases: list[dict[str, Any]]) -> Suite:
    return load_suite(env_suite(folder, cases))


def user_spec(tmp_path: Path, loopback: Loopback, prompt: str = PROMPT) -> SimulatedUser:
    return simulated_users.user_spec(tmp_path / "users", loopback, prompt)


def run(db: Path, suite: Suite, user: SimulatedUser, release: str = "r1") -> LiveRun:
    with Store(db) as store:
        return run_live(suite, Candidate(name="agent", target=TARGET), store, release=release,
                        settings=settings(), environ={KEY_ENV: KEY}, user=user)


def to_user(loopback: Loopback) -> int:
    return sum("SIMULATED USER" in str(s.body["messages"][0].get("content"))
               for s in loopback.requests)


def test_scenarios_against_a_target_reach_their_goal_and_blame_the_user_for_its_failures(
    server: Loopback, tmp_path: Path
) -> None:
    user = user_spec(tmp_path, server)
    live = run(tmp_path / "callgate.db", suite_of(tmp_path / "shop", AGENTS_OWN + BLAMED), user)
    verdicts = {v.case_id: v for v in live.result.verdicts}
    # The goal state, reached through the user turn the simulator wrote to the target.
    assert verdicts["goal"].status == "scored" and verdicts["goal"].right_arguments
    goal = [a for a in scenario_agents.ASKED if a["metadata"]["case_id"] == "goal"]
    assert [a["metadata"]["user_turn"] for a in goal] == [0, 1]
    assert goal[1]["messages"][-1] == {"role": "user", "content": SAYS["[goal]"]}
    assert goal[1]["metadata"]["conversation_id"] == "goal#0"
    assert goal[1]["metadata"]["max_user_turns"] == 6  # the case's message, then 5 at most
    # The agent's own mistake stays the agent's.
    assert verdicts["sloppy"].status == "scored" and not verdicts["sloppy"].right_arguments
    # The user's failures are the user's.
    blamed = {c: (verdicts[c].status, verdicts[c].tool_reason) for c in ("quit", "leak", "lie")}
    assert blamed == {
        "quit": ("user_error", f"{USER}it ended the conversation before the agent made any call"),
        "leak": ("user_error", f"{USER}it said 'ord_1', which the scenario keeps secret"),
        "lie": ("user_error", f"{USER}it said 'ord_2' where the scenario's order_id is 'ord_1'"),
    }
    scores = live.result.scores
    assert scores.excluded["user_error"] == 3 and scores.figures.scored == 2
    # The agent's shares are those of a run of its own attempts alone.
    alone = run(tmp_path / "alone.db", suite_of(tmp_path / "alone", AGENTS_OWN),
                user_spec(tmp_path, server))
    assert alone.result.scores.excluded.get("user_error", 0) == 0
    for share in ("right_tool", "right_arguments"):
        theirs, ours = (getattr(s.figures, share) for s in (alone.result.scores, scores))
        assert (ours.successes, ours.n) == (theirs.successes, theirs.n), share
    assert scores.figures.calls_per_task == alone.result.scores.figures.calls_per_task
    assert (scores.figures.right_arguments.successes, scores.figures.right_arguments.n) == (1, 2)


def test_a_rerun_of_scenarios_against_a_target_asks_neither_the_user_nor_the_target(
    server: Loopback, tmp_path: Path
) -> None:
    suite, user = suite_of(tmp_path / "shop", AGENTS_OWN + BLAMED), user_spec(tmp_path, server)
    first = run(tmp_path / "callgate.db", suite, user)
    # goal and sloppy: 2 user turns each (the order, then the stop); quit 1; leak and lie 2.
    assert to_user(server) == 9 == first.summary()["user_simulator"]["requests"]
    assert len(scenario_agents.ASKED) == 9 and first.called == 5  # 2 user turns each, quit 1

    server.reset()
    scenario_agents.ASKED.clear()
    again = run(tmp_path / "callgate.db", suite, user)
    assert server.requests == [] and scenario_agents.ASKED == []
    assert again.called == 0 and again.cached == 5
    assert again.summary()["user_simulator"]["requests"] == 0
    assert ([(v.case_id, v.status, v.right_arguments, v.tool_reason)
             for v in again.result.verdicts]
            == [(v.case_id, v.status, v.right_arguments, v.tool_reason)
                for v in first.result.verdicts])


def test_a_changed_simulator_against_a_target_is_asked_again_and_named_by_the_gate(
    server: Loopback, tmp_path: Path
) -> None:
    db, suite = tmp_path / "callgate.db", suite_of(tmp_path / "shop", AGENTS_OWN[:1])
    first = user_spec(tmp_path, server)
    run(db, suite, first, release="r1")
    with Store(db) as store:
        record_gate(store, find_current(store, "agent", "r1", None), baseline="auto",
                    max_drop=2.0)
    server.reset()
    scenario_agents.ASKED.clear()
    changed = user_spec(tmp_path, server, PROMPT + "Be brief.\n")
    run(db, suite, changed, release="r2")
    # Another user: its turns are asked again. It wrote the same words, so the target's turns
    # are the same requests as before (a request holds the user's turns), read from the store.
    assert to_user(server) == 2 and scenario_agents.ASKED == []
    with Store(db) as store:
        decision, _ = record_gate(store, find_current(store, "agent", "r2", None),
                                  baseline="auto", max_drop=2.0)
    assert decision.baseline_release == "r1" and decision.outcome == "pass"
    assert [w for w in decision.warnings if w.startswith("simulated user changed")] == [
        f"simulated user changed since r1: sim (openrouter/test/user-2025-04-14, fingerprint "
        f"{first.fingerprint[:12]}) → sim (openrouter/test/user-2025-04-14, fingerprint "
        f"{changed.fingerprint[:12]})"]


def test_a_lost_turn_is_asked_again_alone_the_rest_read_from_the_store(
    server: Loopback, tmp_path: Path
) -> None:
    db, suite = tmp_path / "callgate.db", suite_of(tmp_path / "shop", AGENTS_OWN[:1])
    user = user_spec(tmp_path, server)
    first = run(db, suite, user)
    with sqlite3.connect(db) as conn:  # the target's answer to the user's turn is lost
        lost = conn.execute(
            "DELETE FROM live_responses WHERE case_id = 'goal' AND json_extract(request, "
            "'$.target') IS NOT NULL AND json_extract(request, '$.body.metadata.user_turn') = 1"
        ).rowcount
    assert lost == 1
    server.reset()
    scenario_agents.ASKED.clear()
    again = run(db, suite, user)
    # Only that turn is asked; the user's turns before and after it come from the store (the
    # target answered as before, so the user's last request is the one stored).
    assert [a["metadata"]["user_turn"] for a in scenario_agents.ASKED] == [1]
    assert to_user(server) == 0
    assert ([(v.status, v.right_arguments) for v in again.result.verdicts]
            == [(v.status, v.right_arguments) for v in first.result.verdicts]
            == [("scored", True)])


def test_a_run_with_no_scenario_case_keeps_no_simulator_and_the_gate_names_no_change(
    server: Loopback, tmp_path: Path
) -> None:
    """--user on a suite with no scenario: nothing was simulated, so no simulator is kept and
    another --user next release is no "simulated user changed" warning."""
    scripted = {key: value for key, value in case("plain", "[goal]").items() if key != "scenario"}
    db, suite = tmp_path / "callgate.db", suite_of(tmp_path / "shop", [scripted])
    run(db, suite, user_spec(tmp_path, server), release="r1")
    with Store(db) as store:
        record_gate(store, find_current(store, "agent", "r1", None), baseline="auto",
                    max_drop=2.0)
    live = run(db, suite, user_spec(tmp_path, server, PROMPT + "Be brief.\n"), release="r2")
    assert to_user(server) == 0 and "user_simulator" not in live.summary()
    with Store(db) as store:
        kept = [row["user_simulator"] for row in store.db.query(
            "SELECT user_simulator FROM runs ORDER BY id")]
        decision, _ = record_gate(store, find_current(store, "agent", "r2", None),
                                  baseline="auto", max_drop=2.0)
    assert kept == [None, None]
    assert not [w for w in decision.warnings if w.startswith("simulated user changed")]
