"""A target on a case with later user turns (docs/targets.md, "Cases with later user turns"):
asked once per user turn with the conversation so far, the turn's tools and the conversation's
id and turn; the replies joined into one `turns` line with `user_turn_ends` that scores as its
recorded form; a failure in a later user turn is the attempt's target_error naming the turn; a
killed or failed run resumes mid-conversation asking only what is missing. In process for a
Python target; through the CLI for each kind."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
import target_agents
from conftest import lookup_case
from loopback import Loopback, ok, tool_call
from multiturn import STATE, env_suite, score
from paths import TESTS
from target_runs import callgate, run, settings, target_of

from callgate.models.config import Candidate
from callgate.running.run import LiveRunner
from callgate.store.db import Store
from callgate.suites.suite import load_suite

CANCEL_1 = {"type": "final_state", "calls": [
    {"tool": "cancel_order", "args": {"order_id": "ord_1", "reason": "duplicate"}}]}
LOOKUP = tool_call("lookup_order", {"order_id": "ord_1"}, "a")
CANCEL = tool_call("cancel_order", {"order_id": "ord_1", "reason": "duplicate"}, "b")


def user(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


def conversation_case(case_id: str = "conv") -> dict[str, Any]:
    """User turn 1 looks ord_1 up (lookup_order alone offered); user turn 2 (`[ID-2]`) adds
    cancel_order and asks to cancel it. The agent runs its own tool loop in both ([loop])."""
    return {"id": case_id, "messages": user(f"[{case_id}] [loop] look up ord_1"),
            "tools": ["lookup_order"], "state": STATE, "expect": CANCEL_1,
            "user_turns": [{"messages": user(f"[{case_id}-2] [loop] cancel it"),
                            "add_tools": ["cancel_order"]}]}


def script(loopback: Loopback, case_id: str = "conv") -> None:
    loopback.script_turns(f"[{case_id}]", ok(calls=[LOOKUP]), ok(content="ord_1 is pending."))
    loopback.script_turns(f"[{case_id}-2]", ok(calls=[CANCEL]), ok(content="Cancelled."))


def asked(log: Path, case_id: str = "conv") -> list[dict[str, Any]]:
    """The requests the agent was asked for this case, in order."""
    if not log.exists():
        return []
    requests = [json.loads(line) for line in log.read_text().splitlines()]
    return [r for r in requests if r["metadata"]["case_id"] == case_id]


def stored_line(db: Path, case_id: str = "conv") -> dict[str, Any]:
    with sqlite3.connect(db) as conn:
        (body,) = conn.execute("SELECT body FROM responses WHERE case_id = ? ORDER BY rowid DESC",
                               [case_id]).fetchone()
    return json.loads(body)


def assert_second_turn(request: dict[str, Any], case_id: str = "conv") -> None:
    """User turn 2's request: the case's message, the agent's own transcript of user turn 1
    (its call, its tool's result, its answer), the new user message; both tools; the ids."""
    messages = request["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant", "user"]
    assert messages[1]["tool_calls"] == [LOOKUP]
    assert json.loads(messages[2]["content"]) == {"order_id": "ord_1", "status": "pending"}
    assert messages[3] == {"role": "assistant", "content": "ord_1 is pending."}
    assert messages[4] == user(f"[{case_id}-2] [loop] cancel it")[0]
    assert [t["function"]["name"] for t in request["tools"]] == ["lookup_order", "cancel_order"]
    metadata = request["metadata"]
    assert (metadata["conversation_id"], metadata["user_turn"], metadata["user_turns"]) == (
        f"{case_id}#0", 1, 2)
    assert metadata["state"] == STATE


def assert_joined(line: dict[str, Any]) -> None:
    """One `turns` line for both user turns, recorded as a model's conversation is."""
    assert [turn.get("content") for turn in line["turns"]] == [
        None, "ord_1 is pending.", None, "Cancelled."]
    assert line["turns"][2]["tool_calls"] == [CANCEL]
    assert line["user_turn_ends"] == [2, 4]
    assert line["usage"] == {"prompt_tokens": 6, "completion_tokens": 4}  # summed


@pytest.fixture
def agent_log(loopback: Loopback, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("LOOPBACK_URL", loopback.base_url)
    log = tmp_path / "asked.jsonl"
    monkeypatch.setenv("AGENT_LOG", str(log))
    loopback.script("[", ok(calls=[tool_call("lookup_order", {"order_id": "ord_1"})]))
    script(loopback)
    return log


def test_a_python_target_is_asked_each_user_turn_with_the_conversation_so_far(
    agent_log: Path, tmp_path: Path
) -> None:
    suite = load_suite(env_suite(tmp_path / "shop", [conversation_case(), lookup_case("one")]))
    live = run(tmp_path, suite, "python:target_agents:answer")
    first, second = asked(agent_log)
    assert first["messages"] == conversation_case()["messages"]
    assert [t["function"]["name"] for t in first["tools"]] == ["lookup_order"]
    assert (first["metadata"]["user_turn"], first["metadata"]["conversation_id"]) == (0, "conv#0")
    assert_second_turn(second)
    # A case without user turns is asked as before: no conversation fields.
    (one,) = asked(agent_log, "one")
    assert set(one["metadata"]) == {"case_id", "repeat", "tags", "max_turns"}
    verdicts = {v.case_id: v for v in live.result.verdicts}
    assert verdicts["conv"].status == "scored" and verdicts["conv"].right_arguments
    assert verdicts["conv"].calls == 2 and live.called == 2
    line = stored_line(tmp_path / "callgate.db")
    assert_joined(line)
    with Store(tmp_path / "callgate.db") as store:
        turns = list(store.db.query("SELECT turn FROM run_turns WHERE case_id = 'conv'"))
    assert [row["turn"] for row in turns] == [0, 1]  # one request per user turn
    # The recorded form of the same conversation scores the same.
    recorded = score(tmp_path, suite, [line], release="r2")
    assert recorded.verdicts[0] == verdicts["conv"]


def test_a_failure_in_a_later_user_turn_is_the_attempts_target_error_and_only_it_is_asked_again(
    agent_log: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    behave = target_agents.behave

    def fails_in_turn_two(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        if "[conv-2]" in target_agents.last_user(messages):
            raise RuntimeError("turn two fell over")
        return behave(messages, tools)

    monkeypatch.setattr(target_agents, "behave", fails_in_turn_two)
    suite = load_suite(env_suite(tmp_path / "shop", [conversation_case()]))
    failed = run(tmp_path, suite, "python:target_agents:answer")
    (verdict,) = failed.result.verdicts
    assert verdict.status == "target_error"
    assert verdict.tool_reason.startswith(
        "target error: case 'conv' repeat 0 user turn 2: raised RuntimeError: turn two fell over")
    assert failed.result.scores.excluded["target_error"] == 1
    assert len(asked(agent_log)) == 3  # user turn 1, then user turn 2 and its one retry

    monkeypatch.setattr(target_agents, "behave", behave)
    agent_log.unlink()
    again = run(tmp_path, suite, "python:target_agents:answer")
    (only,) = asked(agent_log)  # user turn 1 came from the store, its transcript with it
    assert_second_turn(only)
    (verdict,) = again.result.verdicts
    assert verdict.status == "scored" and verdict.right_arguments
    assert_joined(stored_line(tmp_path / "callgate.db"))


def test_a_run_killed_mid_conversation_resumes_at_the_next_user_turn(
    agent_log: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    suite = load_suite(env_suite(tmp_path / "shop", [conversation_case()]))
    candidate = Candidate(target="python:target_agents:answer_then_hook")
    answered: list[int] = []

    def stop_after_the_first_user_turn(metadata: dict[str, Any]) -> None:
        answered.append(metadata["user_turn"])
        runner.stop()

    monkeypatch.setattr(target_agents, "HOOK", [stop_after_the_first_user_turn])
    with Store(tmp_path / "callgate.db") as store:
        runner = LiveRunner(suite, candidate, store, "r1", settings=settings())
        stopped = asyncio.run(runner.run())
    assert stopped.stopped == "interrupted" and answered == [0]
    answered.clear()
    resumed = run(tmp_path, suite, candidate.target or "")
    assert answered == [1] and (resumed.called, resumed.cached) == (1, 0)
    assert_second_turn(asked(agent_log)[-1])
    assert resumed.result.verdicts[0].right_arguments
    again = run(tmp_path, suite, candidate.target or "")
    assert (again.called, again.cached) == (0, 1) and answered == [1]  # all from the store


def test_a_user_turn_that_reaches_max_turns_still_calling_ends_the_conversation(
    agent_log: Path, loopback: Loopback, tmp_path: Path
) -> None:
    loopback.script_turns("[conv]", ok(calls=[LOOKUP]))  # the agent's loop never ends
    case = {**conversation_case(), "max_turns": 2}
    suite = load_suite(env_suite(tmp_path / "shop", [case]))
    live = run(tmp_path, suite, "python:target_agents:answer")
    assert len(asked(agent_log)) == 1  # user turn 2 is never asked
    (verdict,) = live.result.verdicts
    assert verdict.tool == "turn_limit"
    line = stored_line(tmp_path / "callgate.db")
    assert line["finish_reason"] == "turn_limit" and line["user_turn_ends"] == [5]
    assert score(tmp_path, suite, [line], release="r2").verdicts == live.result.verdicts


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["python", "http", "cmd"])
def test_each_kind_of_target_plays_every_user_turn_through_the_cli(
    kind: str, loopback: Loopback, tmp_path: Path, callgate_exe: str, cli_env: dict[str, str]
) -> None:
    script(loopback)
    log = tmp_path / "asked.jsonl"
    env = {**cli_env, "LOOPBACK_URL": loopback.base_url, "AGENT_LOG": str(log),
           "PYTHONPATH": str(TESTS)}
    suite = env_suite(tmp_path / "shop", [conversation_case()])
    with target_of(kind, env) as target:
        args = ["run", str(suite), "--target", target, "-k", "1", "--db", "t.db", "--json"]
        done = callgate(callgate_exe, env, tmp_path, *args)
        assert done.returncode == 0, done.stderr
        (attempt,) = json.loads(done.stdout)["attempts"]
        assert (attempt["status"], attempt["right_arguments"], attempt["calls"]) == (
            "scored", True, 2)
        first, second = asked(log)
        assert first["metadata"]["user_turn"] == 0
        assert_second_turn(second)
        assert_joined(stored_line(tmp_path / "t.db"))
        again = json.loads(callgate(callgate_exe, env, tmp_path, *args).stdout)
        assert (again["live"]["called"], again["live"]["cached"]) == (0, 1)
        assert len(asked(log)) == 2
