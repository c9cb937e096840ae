"""A judge endpoint that answers no verdict (an HTML page, a 200 holding an error object, a 500)
makes each judged attempt a `judge_error` after the client's retries, excluded and counted as a
provider error is: too many of them and the run is not a result (exit 3), never a silent pass
with every judged attempt left `pending_judge` (issue 32, point 8). Real HTTP on 127.0.0.1."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import KEY, KEY_ENV
from live_judge import certified, judged_responses, judged_suite, run  # noqa: F401  (fixture)
from loopback import Loopback, Reply, error, ok
from multiturn import assistant, c, mt_case, plain_suite
from paths import ROOT

from callgate.judging.judge import Judge, JudgeModel, load_judge
from callgate.judging.step import JudgeStep
from callgate.models.retry import RetryPolicy
from callgate.scoring.pipeline import score_file
from callgate.store.db import Store
from callgate.suites.suite import Suite, load_suite

HTML = Reply(raw="<!doctype html><html><body><h1>502 Bad Gateway</h1></body></html>")
ERROR_OBJECT = Reply(body={"error": {"message": "upstream model overloaded", "code": 503}})
FAILURES = {"html": (HTML, "not valid JSON"),
            "error object": (ERROR_OBJECT, "upstream model overloaded"),
            "500": (error(500, "judge down"), "judge down")}
VERDICT = json.dumps({"tool_choice": "pass", "arguments": "pass", "reason": "fine"})


def _judge(root: Path, base_url: str) -> Judge:
    shutil.copy(ROOT / "judges" / "tool_choice.md", root / "tool_choice.md")
    (root / "tool_choice.toml").write_text(
        'name = "tool_choice"\nmodel = "openai/judge-2026-01-01"\n'
        f'api_base = "{base_url}"\napi_key_env = "{KEY_ENV}"\nprompt = "tool_choice.md"\n')
    return load_judge(root / "tool_choice.toml")


def _suite(root: Path) -> tuple[Suite, Path]:
    judged = {"type": "judge", "rubric": "Look the order up."}
    suite = load_suite(plain_suite(root / "s", [mt_case(f"j{n}", judged) for n in range(4)]))
    responses = root / "r.jsonl"
    responses.write_text("".join(json.dumps({"case_id": f"j{n}", "response": assistant(
        c("lookup_order", order_id="ord_1"))}) + "\n" for n in range(4)))
    return suite, responses


def _step(judge: Judge) -> JudgeStep:
    model = JudgeModel(judge, {KEY_ENV: KEY})
    model.policy = RetryPolicy(max_retries=2, base_delay=0.01, max_delay=0.02)
    return JudgeStep(judge, model.complete, None, 8, model.aclose)


@pytest.mark.parametrize("kind", list(FAILURES))
def test_an_endpoint_with_no_verdict_is_a_judge_error_after_retries(
        kind: str, loopback: Loopback, tmp_path: Path) -> None:
    reply, said = FAILURES[kind]
    judge = _judge(tmp_path, loopback.base_url)
    suite, responses = _suite(tmp_path)
    for n in range(4):
        loopback.script(f"[j{n}]", ok(content=VERDICT, provider=None, cost=None))
    for n in (1, 2):
        loopback.script(f"[j{n}]", reply)
    with Store(tmp_path / "c.db") as store:
        result = score_file(suite, responses, store, model="m", release="r1",
                            judge=_step(judge))
        by_case = {v.case_id: v for v in result.verdicts}
        assert {v.status for v in result.verdicts} == {"scored", "judge_error"}
        for n in (1, 2):
            verdict = by_case[f"j{n}"]
            assert verdict.status == "judge_error", verdict
            assert said in verdict.tool_reason and "after retries" in verdict.tool_reason
            asked = [r for r in loopback.requests if f"[j{n}]" in r.marker]
            assert len(asked) == 3  # the first try and the client's 2 retries
        assert result.scores.excluded["judge_error"] == 2
        assert result.scores.excluded.get("pending_judge", 0) == 0
        assert result.scores.judged.judge_errors == 2 and result.scores.judged.n == 2
        # Half the attempts excluded: not a result, as provider errors would make it.
        assert result.not_a_result is not None
        assert "2 judge error" in result.not_a_result.messages[0]
        # Not cached: scoring again asks the judge again, and a verdict now counts.
        loopback.reset()
        for n in range(4):
            loopback.script(f"[j{n}]", ok(content=VERDICT, provider=None, cost=None))
        again = score_file(suite, responses, store, model="m", release="r1", judge=_step(judge))
        assert {v.status for v in again.verdicts} == {"scored"}
        assert len(loopback.requests) == 2 and again.not_a_result is None


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["html", "500"])
def test_score_judge_exits_3_when_the_judge_endpoint_fails(
        kind: str, certified: Path, loopback: Loopback, callgate_exe: str, cli_env: dict,  # noqa: F811
        tmp_path: Path) -> None:
    """`score --judge` with a certified judge whose endpoint then fails: exit 3, every judged
    attempt a judge_error in the store, none pending."""
    loopback.reset()
    for n in range(4):
        loopback.script(f"[case-{n}]", FAILURES[kind][0])
    suite = judged_suite(tmp_path / "suite")
    responses = judged_responses(tmp_path / "r.jsonl")
    result = run(callgate_exe, cli_env, tmp_path, "score", str(suite), "-r", str(responses),
                 "-m", "m", "--release", "r1", "--db", "c.db", "--judge", str(certified))
    assert result.returncode == 3, result.stdout + result.stderr
    assert "4 judge error" in result.stderr, result.stderr
    assert len(loopback.requests) == 4 * 5  # each asked once and retried 4 times
    with Store(tmp_path / "c.db") as store:
        statuses = [r["status"] for r in store.db.query(
            "SELECT status FROM verdicts ORDER BY case_id")]
    assert statuses == ["judge_error"] * 4 + ["scored"]
