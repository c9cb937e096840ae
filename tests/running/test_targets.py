"""Targets, in process: the contract's reading of replies, target specs and candidates, the
target_error verdict, and live runs of Python targets (sync and async) against the loopback
model: classified failures, the cache keyed by the target's version, and an agent whose own
loop runs the tools. The CLI end to end, for every kind, is tests/running/test_targets_cli.py."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
import target_agents
from conftest import lookup_case, marker, write_suite
from loopback import Loopback, ok, tool_call
from target_runs import run, settings

from callgate.checks.check import check_response
from callgate.errors import CallgateError, InputError
from callgate.models.config import Candidate, resolve_candidate
from callgate.models.retry import RetryPolicy
from callgate.models.targets import parse_target
from callgate.redaction import MIN_CUT
from callgate.running.run import LiveRun, LiveRunner, run_live
from callgate.running.targets.contract import MalformedReply, reply_line
from callgate.scoring.exclusion import excluded_share
from callgate.store.db import Store
from callgate.suites.responses import Response, parse_response
from callgate.suites.suite import load_suite

CALL = tool_call("lookup_order", {"order_id": "ord_1"})
SENT = [{"role": "user", "content": "[a] where is ord_1?"}]
ASSISTANT = {"role": "assistant", "content": None, "tool_calls": [CALL]}


def line_of(reply: Any) -> dict[str, Any]:
    return reply_line("a", 0, reply, SENT, 12.5)


def test_a_reply_is_one_message_or_the_transcript_the_agent_produced() -> None:
    one = line_of({"message": {"content": None, "tool_calls": [CALL]}, "cost": 0.01})
    assert one["response"]["tool_calls"] == [CALL] and one["cost"] == 0.01
    assert line_of(ASSISTANT)["response"] == {"content": None, "tool_calls": [CALL]}
    result = {"role": "tool", "tool_call_id": "call_1", "content": '{"status": "shipped"}'}
    final = {"role": "assistant", "content": "It has shipped."}
    # A framework's whole history starts with the messages it was given: they are not its turns.
    for transcript in ([ASSISTANT, result, final], [*SENT, ASSISTANT, result, final]):
        line = line_of({"messages": transcript, "usage": {"prompt_tokens": 5}})
        response = parse_response(line)
        assert [len(turn.tool_calls) for turn in response.assistant_turns] == [1, 0]
        assert response.message is not None and response.message.content == "It has shipped."
        assert response.usage is not None and response.usage.prompt_tokens == 5
    assert parse_response(line_of([ASSISTANT, result, final])).turns is not None


@pytest.mark.parametrize(("reply", "reason"), [
    ({"answer": 42}, "an object with the keys answer"),
    (42, "a JSON int"),
    (None, "not null"),
    ({"messages": [], "cost": 1}, "no assistant message"),
    ({"messages": [{"role": "user", "content": "hi"}]}, "not user"),
    ({"message": "hi"}, "message: must be an object"),
    ({"message": {}, "messages": []}, "either message or messages"),
    ({"message": {}, "extra": 1}, "extra: unknown field"),
])
def test_a_reply_outside_the_contract_says_why(reply: Any, reason: str) -> None:
    with pytest.raises(MalformedReply, match=reason):
        line_of(reply)


def test_target_specs_and_candidates_naming_them() -> None:
    assert parse_target("python:pkg.mod:run").module == "pkg.mod"
    assert parse_target('cmd:python "my agent.py" --fast').argv == [
        "python", "my agent.py", "--fast"]
    assert parse_target("http://127.0.0.1:9/agent").kind == "http"
    for bad, why in (("python:pkg.mod", "python:pkg.module:function"), ("gpt-4o", "a target is"),
                     ("cmd:", "names a program"), ("http://u:p@h/x", "credentials"),
                     ("http://h/x?key=1", "query string")):
        with pytest.raises(ValueError, match=why):
            parse_target(bad)
    agent = Candidate(target="python:pkg.mod:run", model="openai/gpt-4o-mini")
    assert (agent.name, agent.model) == ("python:pkg.mod:run", "openai/gpt-4o-mini")
    assert agent.parameters()["target"] == "python:pkg.mod:run"  # recorded with the run
    with pytest.raises(InputError, match="api_base: does not apply to a target"):
        resolve_candidate("x", overrides={"target": "python:a:b", "api_base": "http://h"})
    with pytest.raises(InputError, match="target_version: names the version of a target"):
        resolve_candidate("openai/x", overrides={"target_version": "1"})


def test_a_target_error_is_excluded_never_the_models_mistake(tmp_path: Path) -> None:
    suite = load_suite(write_suite(tmp_path / "suite", [lookup_case("a")]))
    response = Response(case_id="a", error={"kind": "target_error",
                                            "message": "case 'a' repeat 0: the agent fell over"})
    verdict = check_response(suite.cases["a"], response, suite.tools, suite.validators)
    assert verdict.status == "target_error" and not verdict.right_tool
    assert verdict.tool_reason == "target error: case 'a' repeat 0: the agent fell over"
    assert excluded_share(2, {"target_error": 1}) == 0.5


@pytest.fixture
def agent_env(loopback: Loopback, monkeypatch: pytest.MonkeyPatch) -> Loopback:
    monkeypatch.setenv("LOOPBACK_URL", loopback.base_url)
    loopback.script("[", ok(calls=[CALL]))
    return loopback


def statuses(live: LiveRun) -> dict[str, str]:
    return {v.case_id: v.status for v in live.result.verdicts}


@pytest.mark.parametrize("function", ["answer", "answer_async"])
def test_a_python_target_fails_in_classified_ways_and_the_run_goes_on(
    agent_env: Loopback, tmp_path: Path, function: str
) -> None:
    suite = load_suite(write_suite(tmp_path / "suite", [
        lookup_case(c) for c in ("a", "crash", "hang", "garbage", "slowmodel", "b")]))
    live = run(tmp_path, suite, f"python:target_agents:{function}", settings(timeout=0.5))
    assert statuses(live) == {"a": "scored", "b": "scored", "crash": "target_error",
                              "hang": "target_error", "garbage": "target_error",
                              "slowmodel": "target_error"}
    reasons = {v.case_id: v.tool_reason for v in live.result.verdicts}
    assert reasons["crash"] == ("target error: case 'crash' repeat 0: raised RuntimeError: the "
                                "agent fell over (gave up after 2 tries)")
    assert "case 'hang' repeat 0: no reply within 0.5 s" in reasons["hang"]
    assert "case 'garbage' repeat 0: malformed reply: a reply is" in reasons["garbage"]
    # The agent's own timeout is not callgate's.
    assert "raised TimeoutError: the agent's model did not answer" in reasons["slowmodel"]
    assert live.result.scores.excluded["target_error"] == 4
    assert live.result.scores.figures.right_arguments.pct == 100.0
    assert (live.client, live.called, live.retries) == ("python", 6, 3)  # all but garbage


def test_the_cache_is_keyed_by_the_targets_version(
    agent_env: Loopback, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    suite = load_suite(write_suite(tmp_path / "suite", [lookup_case("a"), lookup_case("crash")]))
    target = "python:target_agents:answer"
    first = run(tmp_path, suite, target)
    assert (first.called, first.cached) == (2, 0)
    again = run(tmp_path, suite, target)  # the stored target error is asked again
    assert (again.called, again.cached) == (1, 1)
    monkeypatch.setattr(target_agents.answer, "callgate_version", "2")
    changed = run(tmp_path, suite, target)
    assert (changed.called, changed.cached) == (2, 0)
    given = run(tmp_path, suite, target, target_version="pinned")
    assert given.called == 2
    with Store(tmp_path / "callgate.db") as store:
        requests = [json.loads(row["request"]) for row in store.db.query(
            "SELECT request FROM live_responses WHERE case_id = 'a'")]
    assert sorted(r["version"] for r in requests) == ["1", "2", "pinned"]
    assert {r["target"] for r in requests} == {target}
    assert requests[0]["body"]["metadata"] == {"case_id": "a", "repeat": 0, "tags": ["clean"],
                                               "max_turns": 10}


def test_an_agent_whose_own_loop_runs_the_tools(agent_env: Loopback, tmp_path: Path) -> None:
    cancel = tool_call("cancel_order", {"order_id": "ord_1", "reason": "changed_mind"}, "call_2")
    agent_env.script_turns("[loop]", ok(calls=[CALL]), ok(calls=[cancel]),
                           ok(content="Cancelled."))
    case = lookup_case("loop")
    case["expect"] = {"type": "trajectory", "mode": "strict", "args": "key", "calls": [
        {"tool": "lookup_order", "args": {"order_id": "ord_1"}, "step": 0},
        {"tool": "cancel_order", "args": {"order_id": "ord_1", "reason": "changed_mind"},
         "step": 1}]}
    suite = load_suite(write_suite(tmp_path / "suite", [case]))
    live = run(tmp_path, suite, "python:target_agents:answer")
    (verdict,) = live.result.verdicts
    assert (verdict.status, verdict.right_arguments, verdict.calls) == ("scored", True, 2)
    # The model saw the results of the agent's own tools, not the suite's.
    last = [s.body for s in agent_env.requests if s.marker.startswith(marker("loop"))][-1]
    assert [m["role"] for m in last["messages"]][-4:] == ["assistant", "tool", "assistant", "tool"]
    assert json.loads(last["messages"][3]["content"]) == {"order_id": "ord_1", "status": "pending"}


def test_a_target_that_cannot_be_loaded_is_a_usage_error(tmp_path: Path) -> None:
    suite = load_suite(write_suite(tmp_path / "suite", [lookup_case("a")]))
    with pytest.raises(CallgateError, match="cannot import no_such_agent: ModuleNotFoundError"):
        run(tmp_path, suite, "python:no_such_agent:run")
    with pytest.raises(CallgateError, match="target_agents has no function nothing"):
        run(tmp_path, suite, "python:target_agents:nothing")


def test_the_bundled_example_agent_is_checked_as_its_recorded_turns_are(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The example agent's own loop against the loopback model replaying release 2026.11: its
    transcripts get the verdicts the same turns get as a recorded file (final states included,
    recomputed on the suite's environment)."""
    from callgate.cli.demo import example_path
    from callgate.examples import order_agent
    from callgate.scoring.pipeline import score_file

    server = order_agent.replay_model()
    monkeypatch.setenv(order_agent.API_BASE_ENV, f"http://127.0.0.1:{server.server_port}/v1")
    try:
        root = example_path("examples/order_store")
        suite = load_suite(root)
        live = run(tmp_path, suite, order_agent.TARGET)
    finally:
        server.shutdown()
    recorded = tmp_path / "repeat0.jsonl"
    recorded.write_text("".join(
        line + "\n" for line in (root / order_agent.REPLAYED).read_text().splitlines()
        if json.loads(line)["repeat"] == 0))
    with Store(tmp_path / "recorded.db") as store:
        scored = score_file(suite, recorded, store, model="recorded", release="2026.11")
    assert live.called == len(suite.cases) == 13
    kinds = {case.expect.type for case in suite.cases.values()}
    assert kinds == {"final_state", "trajectory"}
    assert [v.model_dump() for v in live.result.verdicts] == [
        v.model_dump() for v in scored.verdicts]
    assert any(v.right_arguments for v in live.result.verdicts)


def test_a_stopped_target_run_resumes_with_only_the_unanswered_attempts(
    agent_env: Loopback, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    suite = load_suite(write_suite(tmp_path / "suite", [lookup_case(c) for c in "abcd"]))
    candidate = Candidate(target="python:target_agents:answer_then_hook")
    answered: list[str] = []

    def stop_after_two(metadata: dict[str, Any]) -> None:
        answered.append(metadata["case_id"])
        if len(answered) == 2:
            runner.stop()

    monkeypatch.setattr(target_agents, "HOOK", [stop_after_two])
    with Store(tmp_path / "callgate.db") as store:
        runner = LiveRunner(suite, candidate, store, "r1", settings=settings(concurrency=1))
        stopped = asyncio.run(runner.run())
        assert stopped.stopped == "interrupted" and stopped.called == 2
        assert store.db.execute("SELECT status FROM runs").fetchone()[0] == "interrupted"
    answered.clear()
    resumed = run(tmp_path, suite, candidate.target or "")
    assert (resumed.called, resumed.cached, resumed.stopped) == (2, 2, None)
    assert sorted(answered) == ["c", "d"]  # the resumed run has 4 in flight: any order
    assert all(v.right_arguments for v in resumed.result.verdicts)


def test_no_secret_of_the_environment_reaches_the_store_through_a_target(
    agent_env: Loopback, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "sk-agent-5ecret-0123456789"
    monkeypatch.setenv("AGENT_API_KEY", secret)
    monkeypatch.setattr(target_agents, "behave", lambda *_: (_ for _ in ()).throw(
        RuntimeError(f"401 for key {secret}")))
    suite = load_suite(write_suite(tmp_path / "suite", [lookup_case("a")]))
    with Store(tmp_path / "callgate.db") as store:
        live = run_live(suite, Candidate(target="python:target_agents:answer"), store,
                        release="r1", settings=settings(), environ={"AGENT_API_KEY": secret})
    assert live.result.verdicts[0].tool_reason.endswith("401 for key [redacted] (gave up after "
                                                        "2 tries)")
    for path in tmp_path.rglob("callgate.db*"):
        assert secret.encode() not in path.read_bytes()
    with pytest.raises(InputError, match="'api-key', which reads as a credential") as refused:
        resolve_candidate("x", overrides={"target": f"cmd:agent --api-key={secret}"})
    assert secret not in str(refused.value)


def test_without_concurrency_a_target_gets_no_more_attempts_than_its_pool(
    tmp_path: Path,
) -> None:
    """Without --concurrency the model's pacer may let 256 attempts fly, but a target's pool
    is 8: attempts queued for a thread must not spend their timeout waiting (they came back
    as target errors, never the agent's doing)."""
    suite = load_suite(write_suite(tmp_path / "suite", [
        lookup_case(f"c{i}", order=f"ord_{i}") for i in range(40)]))
    live = run(tmp_path, suite, "python:target_agents:slow_sync",
               settings(concurrency=None, timeout=0.6, retry=RetryPolicy(max_retries=0)))
    assert set(statuses(live).values()) == {"scored"}
    assert live.result.scores.figures.right_arguments.pct == 100.0


def test_a_secret_cut_where_a_long_error_is_shortened_is_hidden_too(
    agent_env: Loopback, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An error is shortened to 300 characters before it is redacted: a key straddling the cut
    left its head in the reason and the store."""
    secret = "sk-agent-5ecret-0123456789"
    monkeypatch.setattr(target_agents, "behave", lambda *_: (_ for _ in ()).throw(
        RuntimeError("x" * 280 + secret + " and more")))
    suite = load_suite(write_suite(tmp_path / "suite", [lookup_case("a")]))
    with Store(tmp_path / "callgate.db") as store:
        live = run_live(suite, Candidate(target="python:target_agents:answer"), store,
                        release="r1", settings=settings(), environ={"AGENT_API_KEY": secret})
    reason = live.result.verdicts[0].tool_reason
    assert "x" * 200 in reason and "[redacted]…" in reason
    assert secret[:MIN_CUT] not in reason
    for path in tmp_path.rglob("callgate.db*"):
        assert secret[:8].encode() not in path.read_bytes()
