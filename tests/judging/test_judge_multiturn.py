"""The judge on multi-turn attempts (it reads the whole trajectory, with the tool results the
model got between its turns), the shares a run corrects for the judge's errors (on the
quantities calibration measures them on), and what survives when judging is cut short."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from conftest import KEY, KEY_ENV
from judge_outputs import certificate, out
from loopback import Loopback, error, ok, tool_call
from multiturn import STATE, assistant, c, env_suite, mt_case, plain_suite, turns
from paths import ROOT
from pydantic import ValidationError

from callgate.checks.verdict import Verdict
from callgate.errors import CallgateError
from callgate.judging.calibration import run_judge_on_items
from callgate.judging.calibration_set import (
    CalibrationCall,
    CalibrationCase,
    CalibrationItem,
    CalibrationResponse,
    Labels,
    item_payloads,
    read_set,
)
from callgate.judging.certificates import Certificate
from callgate.judging.judge import (
    Judge,
    JudgeModel,
    cache_key,
    corrected_share,
    load_judge,
)
from callgate.judging.labelling import (
    judged_items as _judged_items,
)
from callgate.judging.payloads import judge_payloads
from callgate.judging.step import JudgedTally, JudgeStep, judged_shares
from callgate.models.config import Candidate
from callgate.models.retry import RetryPolicy
from callgate.running.run import run_live
from callgate.running.settings import RunSettings
from callgate.scoring.pipeline import Recorder, score_file
from callgate.store.db import Store
from callgate.suites.responses import Response, parse_response
from callgate.suites.suite import Suite, load_suite

RUBRIC = "Cancel ord_1 if it can still be cancelled; otherwise say why not."
JUDGED = {"type": "judge", "rubric": RUBRIC}


# --------------------------------------------------------------------------- helpers


@pytest.fixture
def judge(tmp_path: Path) -> Judge:
    folder = tmp_path / "judge"
    folder.mkdir()
    shutil.copy(ROOT / "judges" / "tool_choice.toml", folder / "tool_choice.toml")
    shutil.copy(ROOT / "judges" / "tool_choice.md", folder / "tool_choice.md")
    return load_judge(folder / "tool_choice.toml")


def candidate_block(prompt: str) -> Any:
    """The JSON document between the candidate delimiters of a rendered prompt."""
    block = prompt.rsplit("<<<CANDIDATE_RESPONSE\n", 1)[1].rsplit("\nCANDIDATE_RESPONSE>>>", 1)[0]
    return json.loads(block)


class StubJudge:
    """The judge model: a verdict per case marker; records every candidate block it reads."""

    def __init__(self, verdicts: dict[str, tuple[str, str]] | None = None,
                 fail: dict[str, BaseException] | None = None, fail_after: int = 0) -> None:
        self.verdicts = verdicts or {}
        self.fail = fail or {}
        self.seen: list[Any] = []
        # A failing call fails only once `fail_after` other calls have answered (an event,
        # not a sleep: at load 17 a 50 ms sleep need not be enough for the others).
        self.fail_after = fail_after
        self._answered = asyncio.Event() if fail_after else None

    async def __call__(self, messages: list[dict[str, Any]]) -> str:
        prompt = messages[0]["content"]
        for marker, exc in self.fail.items():
            if marker in prompt:
                if self._answered is not None:
                    await asyncio.wait_for(self._answered.wait(), 60)
                    for _ in range(20):  # their callers store the verdicts: the loop's turns,
                        await asyncio.sleep(0)  # not wall time
                raise exc
        self.seen.append(candidate_block(prompt))
        if self._answered is not None and len(self.seen) >= self.fail_after:
            self._answered.set()
        tool, args = next((v for m, v in self.verdicts.items() if m in prompt), ("pass", "pass"))
        return json.dumps({"tool_choice": tool, "arguments": args, "reason": "stub"})


def step(judge: Judge, complete: Any, certificate: Certificate | None = None) -> JudgeStep:
    return JudgeStep(judge, complete, certificate)


def shop(tmp_path: Path, name: str = "shop", state: dict[str, Any] = STATE) -> Suite:
    return load_suite(env_suite(tmp_path / name, [
        mt_case("cancel", JUDGED, state=state),
        mt_case("ask", JUDGED, state=state),
    ]))


CANCEL_TURNS = turns(
    "cancel",
    [c("lookup_order", order_id="ord_1")],
    [c("cancel_order", order_id="ord_1", reason="duplicate"), c("lookup_order", order_id="ord_1")],
    "Cancelled.",
)


def write_lines(path: Path, lines: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def rows(store: Store, sql: str, params: list[Any] | None = None) -> list[dict[str, Any]]:
    return list(store.db.query(sql, params or []))


# --------------------------------------------------------------------------- what the judge sees


def test_single_turn_payloads_are_exactly_as_before(tmp_path: Path) -> None:
    suite = load_suite(plain_suite(tmp_path / "plain", [mt_case("one", JUDGED)]))
    case = suite.cases["one"]
    message = assistant(c("lookup_order", order_id="ord_1"), content="Looking.")
    single = parse_response({"case_id": "one", "response": message})
    case_doc, doc = judge_payloads(suite, case, single)
    # the document (and so the cache key) of a one-turn response has not changed
    assert doc == {"content": "Looking.",
                   "tool_calls": [{"name": "lookup_order", "arguments": '{"order_id": "ord_1"}'}]}
    assert case_doc == {"messages": [{"role": "user", "content": "[one] help"}],
                        "tools": suite.raw_tools, "rubric": JUDGED["rubric"]}
    # a `turns` line with one turn is the same attempt, with the same key
    one_turn = parse_response({"case_id": "one", "turns": [message]})
    assert judge_payloads(suite, case, one_turn) == (case_doc, doc)
    assert cache_key("f" * 64, *judge_payloads(suite, case, one_turn)) == cache_key(
        "f" * 64, case_doc, doc)


def test_a_multi_turn_attempt_is_judged_on_its_whole_trajectory(tmp_path: Path) -> None:
    suite = shop(tmp_path)
    response = parse_response(CANCEL_TURNS)
    _, doc = judge_payloads(suite, suite.cases["cancel"], response)
    assert list(doc) == ["turns"]
    trajectory = doc["turns"]
    assert [m["role"] for m in trajectory] == [
        "assistant", "tool", "assistant", "tool", "tool", "assistant"]
    assert trajectory[0] == {"role": "assistant", "content": None, "tool_calls": [
        {"name": "lookup_order", "arguments": '{"order_id": "ord_1"}'}]}
    # one environment for the whole attempt: the second lookup sees the cancellation
    results = [(m["name"], json.loads(m["content"])) for m in trajectory if m["role"] == "tool"]
    assert results == [
        ("lookup_order", {"order_id": "ord_1", "status": "pending"}),
        ("cancel_order", {"order_id": "ord_1", "status": "cancelled"}),
        ("lookup_order", {"order_id": "ord_1", "status": "cancelled", "reason": "duplicate"}),
    ]
    assert trajectory[-1] == {"role": "assistant", "content": "Cancelled.", "tool_calls": []}


def test_the_cache_key_covers_the_tool_results(tmp_path: Path) -> None:
    """The same assistant turns, answered differently (ord_1 already shipped), are another
    attempt for the judge: the cancel failed, so "Cancelled." is now a false claim."""
    pending, shipped = shop(tmp_path, "a"), shop(tmp_path, "b", {"orders": {
        "ord_1": {"status": "shipped"}}})
    response = parse_response(CANCEL_TURNS)
    first = judge_payloads(pending, pending.cases["cancel"], response)
    second = judge_payloads(shipped, shipped.cases["cancel"], response)
    assert json.loads(second[1]["turns"][3]["content"]) == {"error": "ord_1 is shipped"}
    assert cache_key("f" * 64, *first) != cache_key("f" * 64, *second)


def test_scripted_results_and_broken_calls_in_the_trajectory(tmp_path: Path) -> None:
    case = mt_case("where", JUDGED, tool_results=[
        {"tool": "lookup_order", "args": {"order_id": "ord_1"}, "result": {"status": "shipped"}},
    ])
    suite = load_suite(plain_suite(tmp_path / "s", [case]))
    broken = {"case_id": "where", "turns": [
        {"role": "assistant", "content": None, "tool_calls": [
            tool_call("lookup_order", {"order_id": "ord_1"}, "a"),
            tool_call("track_shipment", '{"order_id": "ord_', "b")]},
        {"role": "assistant", "content": "It has shipped."},
    ]}
    _, doc = judge_payloads(suite, suite.cases["where"], parse_response(broken))
    tool_messages = [m for m in doc["turns"] if m["role"] == "tool"]
    assert json.loads(tool_messages[0]["content"]) == {"status": "shipped"}
    assert json.loads(tool_messages[1]["content"])["error"].startswith(
        "arguments are not valid JSON")


def test_the_judge_reads_the_tool_results_the_live_model_was_sent(
    loopback: Loopback, tmp_path: Path, judge: Judge
) -> None:
    loopback.script_turns(
        "[cancel]",
        ok(calls=[tool_call("lookup_order", {"order_id": "ord_1"}, "a")]),
        ok(calls=[tool_call("cancel_order", {"order_id": "ord_1", "reason": "duplicate"}, "b"),
                  tool_call("lookup_order", {"order_id": "ord_1"}, "c")]),
        ok(content="Cancelled."),
    )
    loopback.script_turns("[ask]", ok(content="Which order?"))
    suite = shop(tmp_path)
    stub = StubJudge()
    candidate = Candidate(name="cand", model="openrouter/test/model",
                          api_base=loopback.base_url, api_key_env=KEY_ENV)
    settings = RunSettings(repeats=1, concurrency=2, timeout=2, progress=False,
                           retry=RetryPolicy(base_delay=0.01))
    with Store(tmp_path / "callgate.db") as store:
        live = run_live(suite, candidate, store, release="r1", settings=settings,
                        environ={KEY_ENV: KEY}, judge=step(judge, stub))
    assert live.result.scores.judged.n == 2
    last = [r for r in loopback.requests if r.marker.startswith("[cancel]")][-1]
    sent = [m for m in last.body["messages"] if m["role"] == "tool"]
    judged = next(doc for doc in stub.seen if "turns" in doc)
    read = [m for m in judged["turns"] if m["role"] == "tool"]
    assert [m["content"] for m in read] == [m["content"] for m in sent]  # the same text
    assert [m["role"] for m in judged["turns"]] == [
        "assistant", "tool", "assistant", "tool", "tool", "assistant"]
    assert {"content": "Which order?", "tool_calls": []} in stub.seen  # one turn: as before


# --------------------------------------------------------------------------- calibration


def test_calibration_items_hold_trajectories_and_one_turn_items_keep_their_key(
    tmp_path: Path, judge: Judge
) -> None:
    suite = shop(tmp_path)
    case_doc, doc = judge_payloads(suite, suite.cases["cancel"], parse_response(CANCEL_TURNS))
    response = CalibrationResponse.model_validate(doc)
    assert response.judged() == doc
    multi = CalibrationItem(id="m", split="test", case=CalibrationCase.model_validate(case_doc),
                            response=response, label=Labels(tool_choice="pass", arguments="pass"))
    single = CalibrationItem(
        id="s", split="test", case=CalibrationCase.model_validate(case_doc),
        response=CalibrationResponse(tool_calls=[CalibrationCall(name="lookup_order",
                                                                 arguments="{}")]),
        label=Labels(tool_choice="fail", arguments="n/a"))
    assert item_payloads(single)[1] == {"content": None, "tool_calls": [
        {"name": "lookup_order", "arguments": "{}"}]}
    assert "turns" not in json.loads(single.line())["response"]
    path = tmp_path / "set.jsonl"
    path.write_text(multi.line() + "\n" + single.line() + "\n")
    items, _ = read_set(path)
    assert items == [multi, single]

    stub = StubJudge()
    with Store(tmp_path / "c.db") as store:
        asyncio.run(run_judge_on_items(JudgeStep(judge, stub, None), store, items))
    assert stub.seen == [doc, item_payloads(single)[1]]

    with pytest.raises(ValidationError, match="not both"):
        CalibrationResponse(content="hi", turns=doc["turns"])
    with pytest.raises(ValidationError, match="begin and end with an assistant turn"):
        CalibrationResponse(turns=doc["turns"][:2])


def test_labelling_a_run_keeps_the_trajectory_the_judge_saw(tmp_path: Path, judge: Judge) -> None:
    root = env_suite(tmp_path / "shop", [mt_case("cancel", JUDGED, state=STATE)])
    suite = load_suite(root)
    responses = write_lines(tmp_path / "r.jsonl", [CANCEL_TURNS])
    with Store(tmp_path / "c.db") as store:
        result = score_file(suite, responses, store, model="m", release="r1",
                            judge=step(judge, StubJudge()))
        ((_, item),) = _judged_items(store, result.run_id)
        _, doc = judge_payloads(suite, suite.cases["cancel"], parse_response(CANCEL_TURNS))
        assert item.response.judged() == doc
        # once labelled, calibrating on it reads the judge's verdict of the run from the cache
        key = cache_key(judge.fingerprint, *item_payloads(item))
        assert key in store.judge_outputs([key])

        (root / "env.py").write_text((root / "env.py").read_text() + "\n# changed\n")
        with pytest.raises(CallgateError, match="Restore the suite"):
            _judged_items(store, result.run_id)


# --------------------------------------------------------------------------- corrected shares


def pending(case_id: str, arguments: str | None = None) -> Verdict:
    return Verdict(case_id=case_id, repeat=0, status="pending_judge", arguments=arguments)


JUDGED_ATTEMPTS = (
    [(pending(f"ok{n}"), out("pass", "pass")) for n in range(6)]
    + [(pending(f"bad{n}"), out("pass", "fail")) for n in range(2)]
    + [(pending("text"), out("pass", "n/a"))]  # a valid answer without a call
    # the judge passed both, but the arguments failed their schema: not the judge's to decide
    + [(pending("schema", "schema_violation"), out("pass", "pass"))]
    + [(pending(f"wrong{n}"), out("fail", "n/a")) for n in range(2)]
)


def test_shares_are_corrected_on_what_calibration_measured(judge: Judge) -> None:
    tally = JudgedTally()
    for verdict, output in JUDGED_ATTEMPTS:
        tally.add(verdict, output)
    shares = judged_shares(tally, judge.fingerprint, certificate(judge)).model_dump(
        mode="json", exclude_unset=True)
    assert shares["n"] == 12 and shares["certified"]
    # tool choice: 10 of the 12 judged attempts; θ = (10/12 + 0.90 − 1) / (0.90 + 0.90 − 1)
    tool = shares["tool_choice"]
    assert tool["n"] == 12 and tool["raw"] == pytest.approx(100 * 10 / 12)
    assert tool["corrected"] == pytest.approx(100 * (10 / 12 - 0.1) / 0.8)  # 91.67
    # arguments: the judge's pass/fail where it passed the tool choice: 6 of 8 (the n/a and the
    # schema failure are left out); θ = (0.75 + 0.90 − 1) / (0.95 + 0.90 − 1) = 0.65 / 0.85
    args = shares["arguments"]
    assert args["n"] == 8 and args["raw"] == pytest.approx(75.0)
    assert args["corrected"] == pytest.approx(100 * 0.65 / 0.85)  # 76.47
    assert args["not_applicable"] == 1 and args["deterministic_failures"] == 1
    expected = corrected_share(6, 8, 0.95, 0.90, 40, 40)
    assert (args["low"], args["high"]) == (expected["low"], expected["high"])
    assert args["low"] < args["corrected"] < args["high"]

    uncertified = judged_shares(tally, judge.fingerprint, None).model_dump(
        mode="json", exclude_unset=True)
    assert uncertified["arguments"] == {"raw": 75.0, "corrected": None, "low": None,
                                        "high": None, "n": 8, "not_applicable": 1,
                                        "deterministic_failures": 1, "design_effect": 1.0,
                                        "icc": None}


def test_a_run_reports_those_shares(tmp_path: Path, judge: Judge) -> None:
    """Through score_file: 4 judged one-turn attempts (j0 pass/pass, j1 pass/fail, j2 pass/pass
    but schema-invalid, j3 fail/n/a), judged by a judge with the rates above."""
    suite = load_suite(plain_suite(tmp_path / "s", [
        mt_case(f"j{n}", JUDGED) for n in range(4)]))
    lines = [{"case_id": f"j{n}", "response": assistant(c("lookup_order", order_id="ord_1"))}
             for n in (0, 1, 3)]
    lines.insert(2, {"case_id": "j2", "response": assistant(c("lookup_order", order_id=7))})
    stub = StubJudge({"[j1]": ("pass", "fail"), "[j3]": ("fail", "n/a")})
    with Store(tmp_path / "c.db") as store:
        result = score_file(suite, write_lines(tmp_path / "r.jsonl", lines), store, model="m",
                            release="r1", judge=step(judge, stub, certificate(judge)))
    judged = result.scores.model_dump(mode="json")["judged"]  # as stored
    assert judged["tool_choice"]["n"] == 4 and judged["tool_choice"]["raw"] == 75.0
    # (0.75 + 0.9 − 1) / 0.8
    assert judged["tool_choice"]["corrected"] == pytest.approx(100 * 0.65 / 0.8)
    assert judged["arguments"]["n"] == 2 and judged["arguments"]["raw"] == 50.0
    # (0.5 + 0.9 − 1) / 0.85
    assert judged["arguments"]["corrected"] == pytest.approx(100 * 0.4 / 0.85)
    assert judged["arguments"]["deterministic_failures"] == 1


# --------------------------------------------------------------------------- cut short


def four_judged(tmp_path: Path) -> tuple[Suite, Path]:
    suite = load_suite(plain_suite(tmp_path / "s", [mt_case(f"j{n}", JUDGED) for n in range(4)]))
    lines = [{"case_id": f"j{n}", "response": assistant(c("lookup_order", order_id="ord_1"))}
             for n in range(4)]
    return suite, write_lines(tmp_path / "r.jsonl", lines)


@pytest.mark.parametrize("failure", [RuntimeError("judge crashed"), KeyboardInterrupt()])
def test_judge_verdicts_already_paid_for_survive_a_failed_run(
    tmp_path: Path, judge: Judge, failure: BaseException
) -> None:
    suite, responses = four_judged(tmp_path)
    with Store(tmp_path / "c.db") as store:
        with pytest.raises(type(failure)):
            score_file(suite, responses, store, model="m", release="r1",
                       judge=step(judge, StubJudge(fail={"[j2]": failure}, fail_after=3)))
        assert rows(store, "SELECT count(*) AS n FROM judge_cache")[0]["n"] == 3
        (run,) = rows(store, "SELECT * FROM runs")
        assert run["status"] == "interrupted"  # never shown as a finished run
        statuses = {r["case_id"]: r["status"] for r in rows(store, "SELECT * FROM verdicts")}
        assert statuses == {"j0": "scored", "j1": "scored", "j2": "pending_judge",
                            "j3": "scored"}
        assert json.loads(run["scores"])["excluded"]["pending_judge"] == 1

        again = step(judge, StubJudge())
        result = score_file(suite, responses, store, model="m", release="r1", judge=again)
        assert (again.calls, again.cache_hits) == (1, 3)  # only j2 is asked again
        assert rows(store, "SELECT status FROM runs") == [{"status": "done"}]
        assert result.scores.judged.n == 4


def test_a_judge_answering_500_loses_nothing_already_judged(
    loopback: Loopback, tmp_path: Path
) -> None:
    folder = tmp_path / "judge"
    folder.mkdir()
    shutil.copy(ROOT / "judges" / "tool_choice.md", folder / "tool_choice.md")
    (folder / "tool_choice.toml").write_text(
        'name = "tool_choice"\nmodel = "openai/judge-2026-01-01"\n'
        f'api_base = "{loopback.base_url}"\napi_key_env = "{KEY_ENV}"\n'
        'prompt = "tool_choice.md"\n')
    judge = load_judge(folder / "tool_choice.toml")
    verdict = json.dumps({"tool_choice": "pass", "arguments": "pass", "reason": "fine"})
    for n in range(4):
        loopback.script(f"[j{n}]", ok(content=verdict, provider=None, cost=None))
    loopback.script("[j1]", error(500, "judge down"))
    suite, responses = four_judged(tmp_path)

    def model_step() -> JudgeStep:
        model = JudgeModel(judge, {KEY_ENV: KEY})
        model.policy = RetryPolicy(max_retries=1, base_delay=0.01)
        return JudgeStep(judge, model.complete, None, 8, model.aclose)

    with Store(tmp_path / "c.db") as store:
        first = score_file(suite, responses, store, model="m", release="r1", judge=model_step())
        by_case = {v.case_id: v for v in first.verdicts}
        assert by_case["j1"].status == "judge_error"  # excluded and counted, not waiting
        assert "judge down" in by_case["j1"].tool_reason
        assert first.scores.judged.n == 3
        assert rows(store, "SELECT count(*) AS n FROM judge_cache")[0]["n"] == 3

        loopback.reset()
        loopback.script("[j1]", ok(content=verdict, provider=None, cost=None))
        second = score_file(suite, responses, store, model="m", release="r1", judge=model_step())
        (asked,) = loopback.requests  # the others come from the cache
        assert "[j1] help" in asked.marker and "[j0]" not in asked.marker
        assert second.scores.judged.n == 4


def test_attempts_stay_recorded_as_pending_when_judging_raises(
    tmp_path: Path, judge: Judge
) -> None:
    suite, _ = four_judged(tmp_path)
    with Store(tmp_path / "c.db") as store:
        store.save_suite(suite)
        with store.atomic():
            run_id = store.replace_run(suite, "m", "r1", "recorded", "test")
        recorder = Recorder(suite, store, run_id,
                            judge=step(judge, StubJudge(fail={"[j": RuntimeError("down")})))
        for n in range(4):
            recorder.add(Response(case_id=f"j{n}", message=None))
        assert recorder.awaiting_judge == 4
        with pytest.raises(RuntimeError):
            asyncio.run(recorder.judge_pending())
        assert recorder.awaiting_judge == 4  # nothing vanished
        recorder.keep_unjudged()
        scores = recorder.finish("interrupted")
    assert scores.excluded["pending_judge"] == 4 and scores.attempts == 4
