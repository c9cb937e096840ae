"""A model plays the user (a case's `scenario`, `run --user`): against a scripted loopback user
model over real HTTP, a scenario reaches its goal state through the user turns the simulator
writes; a simulator that ends the conversation before any call, or says what the scenario keeps
secret, is blamed (the attempt is the user's failure, excluded and counted apart), not the
agent; a rerun replays every user turn from the store and sends no request; the simulator's
fingerprint is kept with the run and a change of it is named by the gate."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import simulated_users
from conftest import KEY, KEY_ENV
from live_runs import settings
from loopback import Loopback, Reply, default_reply, ok, tool_call
from multiturn import STATE, env_suite

from callgate.errors import CallgateError, InputError
from callgate.gating.release import record_gate
from callgate.models.config import Candidate
from callgate.models.simulated_user import SimulatedUser, load_user
from callgate.running.run import LiveRun, run_live
from callgate.store.db import Store
from callgate.suites.suite import Suite, load_suite

PROMPT = "SIMULATED USER. Play this scenario, and write {{stop}} when done.\n{{scenario}}\n"
# What the user model answers, by a marker in the agent's last message to the user.
USER_SAYS = {
    "[c-ask]": "It is order ord_1, I ordered it twice. [c-u1]",
    "[c-done]": "###STOP###",
    "[q-ask]": "###STOP###",  # gives up before the agent did anything
    "[l-ask]": "Cancel ord_2, for another reason. [l-u1]",
    "[l-done]": "Thanks. ###STOP###",
}


def cancel(order: str, reason: str, call_id: str) -> dict[str, Any]:
    return tool_call("cancel_order", {"order_id": order, "reason": reason}, call_id)


def user_model(request: dict[str, Any]) -> Reply:
    """The scripted user model: it is asked with the simulator's system prompt."""
    messages = request.get("messages") or []
    if messages and "SIMULATED USER" in str(messages[0].get("content")):
        last = str(messages[-1].get("content"))
        for marker, text in USER_SAYS.items():
            if marker in last:
                return ok(content=text)
        return ok(content="###STOP###")
    return default_reply(request)


@pytest.fixture
def server() -> Iterator[Loopback]:
    with Loopback(default=user_model) as loopback:
        # The agent: asks, then acts on what the user said.
        loopback.script_turns("[cancel]", ok(content="Which order, and why? [c-ask]"))
        loopback.script_turns("[c-u1]", ok(calls=[cancel("ord_1", "duplicate", "a")]),
                              ok(content="ord_1 is cancelled. [c-done]"))
        loopback.script_turns("[quit]", ok(content="Which order? [q-ask]"))
        loopback.script_turns("[leak]", ok(content="Which order? [l-ask]"))
        loopback.script_turns("[l-u1]", ok(calls=[cancel("ord_2", "duplicate", "b")]),
                              ok(content="Done. [l-done]"))
        yield loopback


def scenario_case(case_id: str, order: str, reason: str, **scenario: Any) -> dict[str, Any]:
    return {"id": case_id, "messages": [{"role": "user", "content": f"[{case_id}] hello"}],
            "tools": ["lookup_order", "cancel_order"], "state": STATE,
            "expect": {"type": "final_state", "calls": [
                {"tool": "cancel_order", "args": {"order_id": order, "reason": reason}}]},
            "scenario": {"instructions": f"You want order {order} cancelled ({reason}).",
                         "known": {"order_id": order, "reason": reason},
                         "done_when": "the agent says it is cancelled", **scenario}}


def suite_of(tmp_path: Path, only_the_goal: bool = False) -> Suite:
    cases = [scenario_case("cancel", "ord_1", "duplicate")]
    if not only_the_goal:
        cases += [scenario_case("quit", "ord_1", "duplicate"),
                  scenario_case("leak", "ord_2", "other", secret=["ord_2"])]
    return load_suite(env_suite(tmp_path / "shop", cases))


def user_spec(tmp_path: Path, loopback: Loopback, prompt: str = PROMPT) -> SimulatedUser:
    return simulated_users.user_spec(tmp_path / "users", loopback, prompt)


def run(tmp_path: Path, suite: Suite, loopback: Loopback, user: SimulatedUser | None,
        release: str = "r1") -> LiveRun:
    agent = Candidate(name="cand", model="openrouter/test/model", api_base=loopback.base_url,
                      api_key_env=KEY_ENV)
    with Store(tmp_path / "callgate.db") as store:
        return run_live(suite, agent, store, release=release, settings=settings(),
                        environ={KEY_ENV: KEY}, user=user)


def to_user(loopback: Loopback) -> list[Any]:
    return [s for s in loopback.requests
            if "SIMULATED USER" in str(s.body["messages"][0].get("content"))]


def test_the_simulated_user_plays_each_scenario_and_is_blamed_for_its_own_failures(
    server: Loopback, tmp_path: Path
) -> None:
    suite, user = suite_of(tmp_path), user_spec(tmp_path, server)
    live = run(tmp_path, suite, server, user)
    verdicts = {v.case_id: v for v in live.result.verdicts}
    # The scenario reached its goal state through the user turn the simulator wrote.
    assert verdicts["cancel"].status == "scored" and verdicts["cancel"].right_arguments
    sent_to_agent = [s for s in server.requests if s not in to_user(server)]
    assert any("[c-u1]" in s.marker for s in sent_to_agent)
    # A user that stopped before any call, and one that said the secret, are blamed.
    assert verdicts["quit"].status == "user_error"
    assert "before the agent made any call" in verdicts["quit"].tool_reason
    assert verdicts["leak"].status == "user_error"
    assert "'ord_2', which the scenario keeps secret" in verdicts["leak"].tool_reason
    scores = live.result.scores
    assert scores.excluded["user_error"] == 2 and scores.figures.scored == 1
    right = scores.figures.right_arguments  # the agent's share: its own attempt only
    assert (right.successes, right.n) == (1, 1)
    user_requests = len(to_user(server))
    assert user_requests == 5  # cancel: 2 (the order, then the stop), quit: 1, leak: 2
    assert live.summary()["user_simulator"]["requests"] == user_requests
    assert live.summary()["user_simulator"]["fingerprint"] == user.fingerprint

    # A rerun replays every turn, the user's included, from the store: no request at all.
    server.reset()
    again = run(tmp_path, suite, server, user)
    assert server.requests == [] and again.called == 0
    assert ([(v.case_id, v.status, v.right_arguments) for v in again.result.verdicts]
            == [(v.case_id, v.status, v.right_arguments) for v in live.result.verdicts])


def test_a_changed_simulator_is_asked_again_and_named_by_the_gate(
    server: Loopback, tmp_path: Path
) -> None:
    suite = suite_of(tmp_path, only_the_goal=True)
    first = user_spec(tmp_path, server)
    run(tmp_path, suite, server, first, release="r1")
    with Store(tmp_path / "callgate.db") as store:
        stored = store.db.execute("SELECT user_simulator FROM runs").fetchone()[0]
    assert json.loads(stored)["fingerprint"] == first.fingerprint
    with Store(tmp_path / "callgate.db") as store:  # r1 released: the baseline
        record_gate(store, _run_of(store, "r1"), baseline="auto", max_drop=2.0)
    server.reset()
    changed = user_spec(tmp_path, server, PROMPT + "Be brief.\n")
    assert changed.fingerprint != first.fingerprint
    # Not the same user: its turns are asked again, not read from the store.
    server.script_turns("[cancel]", ok(content="Which order, and why? [c-ask]"))
    server.script_turns("[c-u1]", ok(calls=[cancel("ord_1", "duplicate", "a")]),
                        ok(content="ord_1 is cancelled. [c-done]"))
    run(tmp_path, suite, server, changed, release="r2")
    assert len(to_user(server)) == 2
    with Store(tmp_path / "callgate.db") as store:
        decision, _ = record_gate(store, _run_of(store, "r2"), baseline="auto", max_drop=2.0)
    changes = [w for w in decision.warnings if w.startswith("simulated user changed")]
    assert decision.baseline_release == "r1" and decision.outcome == "pass"
    assert changes == [f"simulated user changed since r1: sim (openrouter/test/user-2025-04-14, "
                       f"fingerprint {first.fingerprint[:12]}) → sim (openrouter/test/"
                       f"user-2025-04-14, fingerprint {changed.fingerprint[:12]})"]


def _run_of(store: Store, release: str) -> Any:
    from callgate.gating.finding import find_current

    return find_current(store, "cand", release, None)


def test_scenario_cases_need_a_user_and_a_spec_is_checked(server: Loopback,
                                                          tmp_path: Path) -> None:
    suite = suite_of(tmp_path)
    with pytest.raises(CallgateError, match="case 'cancel' has a scenario: give --user"):
        run(tmp_path, suite, server, None)
    assert server.requests == []
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "x"\nmodel = "openai/gpt-4.1"\nprompt = "p.md"\n')
    with pytest.raises(InputError, match="floating alias") as raised:
        load_user(bad)
    assert raised.value.field == "model"
    with pytest.raises(InputError, match="missing placeholder"):
        user_spec(tmp_path, server, prompt="SIMULATED USER {{scenario}}")
