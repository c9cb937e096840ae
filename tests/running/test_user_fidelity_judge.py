"""`run --user SPEC --user-judge judges/user_fidelity.toml` (docs/simulated-user.md, "Blame"):
the user_fidelity judge reads the failed scenario conversations the deterministic checks did
not blame. The agent, the simulated user and the judge are scripted models on one loopback
server over real HTTP: a user that gives the wrong reason in words (no value of a known fact's
shape, so no check sees it) is blamed on the simulator only with the judge, and the agent's
shares then equal a run without that case; a faithful user whose agent got it wrong is not
blamed; a rerun asks no model at all, the judge included; the shipped judge has no certificate
and is refused without --uncalibrated; its shipped set is marked model-written."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import simulated_users
from conftest import KEY, KEY_ENV
from live_runs import settings
from loopback import Loopback, Reply, ok, tool_call, turn_of
from multiturn import STATE, env_suite
from paths import ROOT

from callgate.cli.common import user_judge_for
from callgate.errors import CallgateError
from callgate.judging.calibration import check_fit
from callgate.judging.calibration_set import read_set
from callgate.judging.judge import load_judge
from callgate.judging.step import JudgeStep, judge_step
from callgate.models.config import Candidate
from callgate.models.simulated_user import SimulatedUser
from callgate.running.run import LiveRun, run_live
from callgate.store.db import Store
from callgate.suites.suite import Suite, load_suite

USER_PROMPT = "SIMULATED USER. Play this scenario, and write {{stop}} when done.\n{{scenario}}\n"
JUDGE_MODEL = "openai/judge-2026-01-01"
WRONG_REASON = "the user gave 'found it cheaper elsewhere' where the scenario's reason is duplicate"
# What the user model answers, by a marker in the agent's last message to it.
USER_SAYS = {
    "[c-ask]": "ord_1, it is a duplicate. [c-u1]",
    "[w-ask]": "Cancel ord_1, I found it cheaper elsewhere. [w-u1]",  # the wrong reason
    "[f-ask]": "It is ord_1, I ordered it twice. [f-u1]",  # faithful
}
# What the agent does after each user turn: its call's reason (then it says it is done).
AGENT_REASON = {"[c-u1]": "duplicate", "[w-u1]": "cheaper elsewhere", "[f-u1]": "twice"}


def last_user(messages: list[dict[str, Any]]) -> str:
    return next((str(m.get("content")) for m in reversed(messages) if m.get("role") == "user"),
                "")


def judge_reply(prompt: str) -> Reply:
    verdict = ({"user_fidelity": "fail", "reason": WRONG_REASON} if "[w-u1]" in prompt
               else {"user_fidelity": "pass", "reason": "every user turn fits the scenario"})
    return ok(content=json.dumps(verdict), provider=None, cost=None)


def models(request: dict[str, Any]) -> Reply:
    """The agent, the user model (asked with the simulator's prompt) and the judge (its model)."""
    messages = request.get("messages") or []
    if "judge" in str(request.get("model")):
        return judge_reply(str(messages[0].get("content")))
    last = last_user(messages)
    if messages and "SIMULATED USER" in str(messages[0].get("content")):
        said = next((text for marker, text in USER_SAYS.items() if marker in last), None)
        return ok(content=said or "###STOP###")
    for marker, reason in AGENT_REASON.items():
        if marker in last:
            if turn_of(request) == 0:
                return ok(calls=[tool_call("cancel_order",
                                           {"order_id": "ord_1", "reason": reason}, "a")])
            return ok(content="It is cancelled. [done]")
    case = last.split("]", 1)[0].strip("[")
    return ok(content=f"Which order, and why? [{case[0]}-ask]")


@pytest.fixture
def server() -> Iterator[Loopback]:
    with Loopback(default=models) as loopback:
        yield loopback


def scenario_case(case_id: str) -> dict[str, Any]:
    return {"id": case_id, "messages": [{"role": "user", "content": f"[{case_id}] hello"}],
            "tools": ["lookup_order", "cancel_order"], "state": STATE,
            "expect": {"type": "final_state", "calls": [
                {"tool": "cancel_order", "args": {"order_id": "ord_1", "reason": "duplicate"}}]},
            "scenario": {"instructions": "You want order ord_1 cancelled: you ordered it twice.",
                         "known": {"order_id": "ord_1", "reason": "duplicate"},
                         "done_when": "the agent says it is cancelled"}}


def suite_of(root: Path, names: tuple[str, ...] = ("cancel", "wrong", "faithful")) -> Suite:
    return load_suite(env_suite(root, [scenario_case(name) for name in names]))


def user_spec(root: Path, loopback: Loopback) -> SimulatedUser:
    return simulated_users.user_spec(root, loopback, USER_PROMPT)


def judge_spec(root: Path, base_url: str) -> Path:
    """The shipped judge's prompt, its model at the loopback (no certificate)."""
    root.mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / "judges" / "user_fidelity.md", root / "user_fidelity.md")
    path = root / "user_fidelity.toml"
    path.write_text(
        f'name = "user_fidelity"\nmodel = "{JUDGE_MODEL}"\napi_base = "{base_url}"\n'
        f'api_key_env = "{KEY_ENV}"\nprompt = "user_fidelity.md"\n'
        'dimensions = ["user_fidelity"]\n[parameters]\ntemperature = 0\nsamples = 1\n')
    return path


def run(db: Path, suite: Suite, loopback: Loopback, user: SimulatedUser,
        judge: Path | None) -> tuple[LiveRun, JudgeStep | None]:
    agent = Candidate(name="cand", model="openrouter/test/model", api_base=loopback.base_url,
                      api_key_env=KEY_ENV)
    with Store(db) as store:
        step = (judge_step(judge, store, uncalibrated=True, environ={KEY_ENV: KEY})
                if judge is not None else None)
        live = run_live(suite, agent, store, release="r1", settings=settings(),
                        environ={KEY_ENV: KEY}, user=user, user_judge=step)
    return live, step


def judged(loopback: Loopback) -> list[str]:
    return [str(r.body["messages"][0]["content"]) for r in loopback.requests
            if isinstance(r.body, dict) and "judge" in str(r.body.get("model"))]


def test_a_wrong_reason_in_words_is_the_simulators_only_with_the_judge(
    server: Loopback, tmp_path: Path
) -> None:
    suite, user = suite_of(tmp_path / "shop"), user_spec(tmp_path / "users", server)
    spec = judge_spec(tmp_path / "judges", server.base_url)

    # Without the judge, no check sees the wrong reason: the agent takes the blame.
    plain, _ = run(tmp_path / "plain.db", suite, server, user, None)
    verdicts = {v.case_id: v for v in plain.result.verdicts}
    assert verdicts["wrong"].status == "scored" and not verdicts["wrong"].right_arguments
    assert plain.result.scores.figures.scored == 3
    assert judged(server) == []

    server.reset()
    live, step = run(tmp_path / "judged.db", suite, server, user, spec)
    verdicts = {v.case_id: v for v in live.result.verdicts}
    assert verdicts["wrong"].status == "user_error"  # the simulator's failure, not the agent's
    assert f"the user_fidelity judge: {WRONG_REASON}" in verdicts["wrong"].tool_reason
    # A faithful user whose agent got it wrong: the agent's failure, as without the judge.
    assert verdicts["faithful"].status == "scored"
    assert not verdicts["faithful"].right_arguments
    assert verdicts["cancel"].right_arguments
    # Only the failed conversations no check blamed were judged: the goal reached was not.
    prompts = judged(server)
    assert len(prompts) == 2 and step is not None and step.calls == 2
    assert all("[c-u1]" not in prompt for prompt in prompts)
    wrong = next(prompt for prompt in prompts if "[w-u1]" in prompt)
    assert '"reason": "duplicate"' in wrong  # the scenario, as its rubric
    response = json.loads(wrong[wrong.rindex("<<<CANDIDATE_RESPONSE") + 21:
                                wrong.rindex("CANDIDATE_RESPONSE>>>")])
    assert response == {"conversation": [
        {"role": "agent", "content": "Which order, and why? [w-ask]"},
        {"role": "user", "content": USER_SAYS["[w-ask]"]},
        {"role": "agent", "content": "It is cancelled. [done]"}],
        "simulated_user_turns": [USER_SAYS["[w-ask]"]]}
    scores = live.result.scores
    assert scores.excluded["user_error"] == 1 and scores.figures.scored == 2

    # The agent's shares equal a run without the blamed case.
    server.reset()
    without, _ = run(tmp_path / "without.db", suite_of(tmp_path / "shop2", ("cancel", "faithful")),
                     server, user, None)
    right, alone = scores.figures.right_arguments, without.result.scores.figures.right_arguments
    assert (right.successes, right.n) == (alone.successes, alone.n) == (1, 2)

    # A rerun replays every turn and every verdict from the store: no request at all.
    server.reset()
    again, step = run(tmp_path / "judged.db", suite, server, user, spec)
    assert server.requests == [] and again.called == 0
    assert step is not None and step.calls == 0 and step.cache_hits == 2
    assert ({v.case_id: v.status for v in again.result.verdicts}
            == {v.case_id: v.status for v in live.result.verdicts})
    assert again.result.scores.excluded["user_error"] == 1


def test_the_shipped_judge_is_refused_without_a_certificate(server: Loopback,
                                                            tmp_path: Path) -> None:
    with Store(tmp_path / "callgate.db") as store:
        with pytest.raises(CallgateError, match="certificate"):
            judge_step(ROOT / "judges" / "user_fidelity.toml", store, uncalibrated=False,
                       environ={})
        with pytest.raises(CallgateError, match="certificate"):
            user_judge_for(Path("user_fidelity"), Path("default"), store, uncalibrated=False,
                           api_base=None, api_key_env=None)
        step = user_judge_for(Path("user_fidelity"), Path("default"), store,
                              uncalibrated=True, api_base=None, api_key_env=None)
        assert step is not None and step.certificate is None
        # Another judge is not a user_fidelity judge; without --user there is nothing to read.
        with pytest.raises(CallgateError, match="decides claim_support, not user_fidelity"):
            user_judge_for(Path("claim_support"), Path("default"), store, uncalibrated=True,
                           api_base=None, api_key_env=None)
        with pytest.raises(Exception) as raised:
            user_judge_for(Path("user_fidelity"), None, store, uncalibrated=True,
                           api_base=None, api_key_env=None)
        assert raised.type.__name__ == "Exit"
    assert server.requests == []


def test_the_shipped_set_is_model_written_and_fits_the_frozen_judge() -> None:
    judge = load_judge(ROOT / "judges" / "user_fidelity.toml")
    assert judge.spec.dimensions == ("user_fidelity",)
    assert judge.spec.parameters.temperature == 0 and "2025-04-14" in judge.spec.model
    path = ROOT / "calibration" / "user_fidelity.jsonl"
    items, _ = read_set(path)
    check_fit(judge, items, path)
    assert len(items) >= 12
    assert all(item.labeller == "assistant" for item in items)
    assert all(item.note.startswith("Written and labelled by a model") for item in items)
    labels = {item.label.columns()[0] for item in items}
    assert labels == {"pass", "fail"}
    # Each item is the document a run builds: the conversation and the simulated turns apart.
    for item in items:
        response = item.response.judged()
        assert set(response) == {"conversation", "simulated_user_turns"}
        users = [m["content"] for m in response["conversation"] if m["role"] == "user"]
        assert users == response["simulated_user_turns"]


def test_a_judge_that_agrees_with_every_label_is_still_not_certified_by_the_shipped_set(
    tmp_path: Path
) -> None:
    """Too few items, none a person confirmed: the shipped set cannot certify the judge, even
    one that gives every item its label (so a run needs --uncalibrated)."""
    import asyncio

    from callgate.judging.calibration import calibrate

    path = ROOT / "calibration" / "user_fidelity.jsonl"
    items, _ = read_set(path)
    by_turn = {json.dumps(item.response.judged()["simulated_user_turns"]):
               str(item.label.columns()[0]) for item in items}
    for name in ("user_fidelity.toml", "user_fidelity.md"):
        shutil.copy(ROOT / "judges" / name, tmp_path / name)
    judge = load_judge(tmp_path / "user_fidelity.toml")

    async def complete(messages: list[dict[str, Any]]) -> str:
        prompt = str(messages[0]["content"])
        block = prompt[prompt.rindex("<<<CANDIDATE_RESPONSE") + 21:
                       prompt.rindex("CANDIDATE_RESPONSE>>>")]
        label = by_turn[json.dumps(json.loads(block)["simulated_user_turns"])]
        return json.dumps({"user_fidelity": label, "reason": "as labelled"})

    with Store(tmp_path / "callgate.db") as store:
        certificate, disagreements, fresh = asyncio.run(
            calibrate(judge, path, store, complete))
    assert disagreements == [] and fresh == len(items)
    assert not certificate.certified
    assert not (tmp_path / "user_fidelity.cert.json").exists()


def test_run_refuses_the_user_judge_without_a_user_or_a_certificate(server: Loopback,
                                                                    tmp_path: Path) -> None:
    """Through the command line: a one-line error and a non-zero exit, no model asked."""
    from typer.testing import CliRunner

    from callgate.cli.main import app

    suite = env_suite(tmp_path / "shop", [scenario_case("wrong")])
    base = ["run", str(suite), "--model", "openrouter/test/model", "--api-base",
            server.base_url, "--api-key-env", KEY_ENV, "--release", "r1",
            "--db", str(tmp_path / "callgate.db"), "--user-judge", "user_fidelity"]
    env = {KEY_ENV: KEY}
    alone = CliRunner().invoke(app, base, env=env)
    assert alone.exit_code != 0
    assert "--user-judge reads what a simulated user wrote: give --user SPEC too" in (
        alone.output)
    unsure = CliRunner().invoke(app, [*base, "--user", "default"], env=env)
    assert unsure.exit_code != 0 and "certificate" in unsure.output
    assert server.requests == []
