"""Issue 10, the judge's certificate: spec errors, judge errors, the arguments population,
revocation and the labels a certificate is bound to."""

from __future__ import annotations

import json
import random
import shutil
import subprocess
from pathlib import Path

import pytest
from paths import ROOT

from callgate.errors import InputError
from callgate.judging.judge import load_judge
from callgate.models.config import MAX_TOKENS_KEYS, Candidate

SECRET = "sk-proj-" + "Zq7" * 16  # a 56-character key that must never be echoed


def write_spec(root: Path, body: str) -> Path:
    shutil.copy(ROOT / "judges" / "tool_choice.md", root / "tool_choice.md")
    spec = root / "bad.toml"
    spec.write_text('name = "bad"\nmodel = "openai/gpt-4.1-2025-04-14"\n'
                    f'prompt = "tool_choice.md"\n{body}\n')
    return spec


SPEC_MISTAKES = [  # (the lines after the spec's first three, the field, the line it is on)
    ('api_key_env = ""', "api_key_env", 4),
    (f'api_key_env = "{SECRET}"', "api_key_env", 4),
    (f'api_key_env = "K"\n[parameters.extra]\napi_key = "{SECRET}"', "parameters.extra.api_key",
     6),
    (f'api_key_env = "K"\n[parameters.extra]\nextra_headers = {{ Authorization = "{SECRET}" }}',
     "parameters.extra.extra_headers", 6),
    (f'api_key_env = "K"\napi_base = "https://me:{SECRET}@example.com/v1"', "api_base", 5),
    (f'api_key_env = "K"\napi_base = "https://example.com/v1?key={SECRET}"', "api_base", 5),
    (f'api_key = "{SECRET}"', "api_key", 4),
    ('api_key_env = "K"\n[parameters.extra]\nmax_output_tokens = 100',
     "parameters.extra.max_output_tokens", 6),
    ("max_tokens = 100", "max_tokens", 4),
    ("[parameters]\nmax_completion_tokens = 100", "parameters.max_completion_tokens", 5),
    (f'[parameters]\nreasoning_effort = "{SECRET}"', "parameters.reasoning_effort", 5),
]


@pytest.mark.slow
@pytest.mark.parametrize(("body", "field", "line"), SPEC_MISTAKES)
def test_a_spec_mistake_is_an_input_error_that_never_echoes_the_value(
    tmp_path: Path, callgate_exe: str, cli_env: dict, body: str, field: str, line: int
) -> None:
    spec = write_spec(tmp_path, body)
    with pytest.raises(InputError) as info:
        load_judge(spec)
    assert (info.value.field, info.value.line) == (field, line)
    shown = subprocess.run([callgate_exe, "judge", "show", str(spec), "--db", "c.db"],
                           cwd=tmp_path, env=cli_env, capture_output=True, text=True, timeout=60)
    assert shown.returncode == 2, shown.stdout + shown.stderr
    assert f"bad.toml:{line}: {field}: " in shown.stderr
    assert "Traceback" not in shown.stderr and "internal error" not in shown.stderr
    assert SECRET not in shown.stdout + shown.stderr and "Zq7Zq7" not in shown.stderr


@pytest.mark.parametrize("key", sorted(MAX_TOKENS_KEYS))
def test_one_max_tokens_rule_for_candidates_and_judges(tmp_path: Path, key: str) -> None:
    with pytest.raises(ValueError, match="is refused"):
        Candidate(model="openai/m", extra={key: 10})
    with pytest.raises(InputError, match="is refused") as info:
        load_judge(write_spec(tmp_path, f"[parameters.extra]\n{key} = 10"))
    assert info.value.field == f"parameters.extra.{key}"


# --------------------------------------------------------------------------- point 4


def simulated_bias(tpr: float, tnr: float, seed: int, items: int = 20_000) -> float:
    """Corrected arguments share minus the true share, in points, for a scripted judge with
    these rates on both dimensions, through the real calibration (evaluate) and the real
    scoring tally (JudgedTally) and correction.

    Every attempt: the tool is right with p 0.75; when it is, the arguments are right with p
    0.8 (a person labels pass/pass, pass/fail, or fail/n/a). The judge, as the default prompt
    asks, grades the arguments only when it passes the tool choice; whenever it grades them,
    "truly right" (right tool and right arguments) passes with p TPR and anything else with
    p 1 − TNR."""
    from callgate.checks.verdict import Verdict
    from callgate.judging.calibration import evaluate
    from callgate.judging.calibration_set import CalibrationItem, Labels
    from callgate.judging.judge import JudgeOutput, corrected_share
    from callgate.judging.step import JudgedTally

    rng = random.Random(seed)
    labels = {key: Labels(tool_choice=key[0], arguments=key[1])
              for key in [("pass", "pass"), ("pass", "fail"), ("fail", "n/a")]}
    outputs = {key: JudgeOutput(tool_choice=key[0], arguments=key[1], reason="")
               for key in [("pass", "pass"), ("pass", "fail"), ("fail", "n/a")]}

    def draw() -> tuple[tuple[str, str], tuple[str, str]]:
        tool_right = rng.random() < 0.75
        args_right = tool_right and rng.random() < 0.8
        person = ("pass", "pass" if args_right else "fail") if tool_right else ("fail", "n/a")
        judge_tool = rng.random() < (tpr if tool_right else 1 - tnr)
        if not judge_tool:
            return person, ("fail", "n/a")
        judge_args = rng.random() < (tpr if args_right else 1 - tnr)
        return person, ("pass", "pass" if judge_args else "fail")

    judge = load_judge(ROOT / "judges" / "tool_choice.toml")
    calibration = [draw() for _ in range(items)]
    set_items = [CalibrationItem.model_construct(id=str(n), split="test", label=labels[person])
                 for n, (person, _) in enumerate(calibration)]
    certificate, _ = evaluate(judge, set_items, {str(n): outputs[judged] for n, (_, judged)
                                                 in enumerate(calibration)}, "sim", "0" * 64)
    rates = certificate.dimensions["arguments"]

    tally, truly_right = JudgedTally(), 0
    verdict = Verdict.model_construct(case_id="c", repeat=0, status="pending_judge",
                                      arguments="not_applicable")
    for _ in range(items):
        person, judged = draw()
        tally.add(verdict, outputs[judged])
        if judged == ("pass", "pass") or judged == ("pass", "fail"):
            truly_right += person == ("pass", "pass")
    share = corrected_share(tally.arguments, tally.arguments_n, rates.tpr, rates.tnr,
                            rates.m1, rates.m0)
    return share["corrected"] - 100 * truly_right / tally.arguments_n


@pytest.mark.slow
@pytest.mark.parametrize(("tpr", "tnr"), [(0.97, 0.95), (0.90, 0.95)])
def test_the_corrected_arguments_share_is_unbiased(tpr: float, tnr: float) -> None:
    biases = [simulated_bias(tpr, tnr, seed) for seed in range(5)]
    mean = sum(biases) / len(biases)
    assert abs(mean) < 1.0, biases


# --------------------------------------------------------------------------- point 3

REFUSAL = "I am not able to grade this response."


@pytest.mark.slow
def test_a_judge_that_refuses_the_fail_items_is_not_certified(
    tmp_path: Path, loopback, callgate_exe: str, cli_env: dict
) -> None:
    from live_judge import make_judge, make_set, run, script_judge
    from loopback import ok

    spec, calib = make_judge(tmp_path, loopback.base_url), tmp_path / "set.jsonl"
    labels = make_set(calib)
    script_judge(loopback, labels)
    for marker, tool, _ in labels:
        if tool == "fail":  # every fail-labelled item: a refusal, never a verdict
            loopback.script(marker, ok(content=REFUSAL, provider=None, cost=None))
    result = run(callgate_exe, cli_env, tmp_path, "judge", "calibrate", str(spec), "--set",
                 str(calib), "--db", "c.db", "--json")
    assert result.returncode == 1, result.stdout + result.stderr
    cert = json.loads(result.stdout)
    assert not cert["certified"] and cert["judge_errors"] == 6  # 5 test items + 1 dev item
    tool = cert["dimensions"]["tool_choice"]
    assert tool["confusion"] == {"tp": 10, "fn": 0, "tn": 0, "fp": 0, "judge_error": 5}
    assert tool["tnr"] is None and tool["kappa"] is None and not tool["passed"]
    assert "judge errors" in cert["why_not"]
    # the spec's retries: each refusal was asked 3 times, and never cached as a verdict
    fail_markers = [marker for marker, tool, _ in labels if tool == "fail"]
    refused = [r for r in loopback.requests if any(m in r.marker for m in fail_markers)]
    assert len(refused) == 6 * 3
    shown = run(callgate_exe, cli_env, tmp_path, "judge", "calibrate", str(spec), "--set",
                str(calib), "--db", "c.db")
    assert shown.returncode == 1 and "judge_error" in shown.stdout  # listed as disagreements


@pytest.mark.slow
def test_a_reply_that_is_not_a_verdict_is_excluded_from_the_scores(
    tmp_path: Path, loopback, callgate_exe: str, cli_env: dict
) -> None:
    from live_judge import judged_responses, judged_suite, make_judge, run, verdict
    from loopback import ok

    spec = make_judge(tmp_path, loopback.base_url)
    loopback.script("[case-0]", ok(content=verdict("pass", "pass"), provider=None, cost=None))
    loopback.script("[case-1]", ok(content=REFUSAL, provider=None, cost=None))
    # off-schema once, then a verdict: the retry saves it
    loopback.script("[case-2]", ok(content='{"tool_choice": "maybe"}', provider=None, cost=None),
                    ok(content=verdict("pass", "pass"), provider=None, cost=None))
    loopback.script("[case-3]", ok(content=verdict("fail", "n/a"), provider=None, cost=None))
    suite, responses = judged_suite(tmp_path / "suite"), judged_responses(tmp_path / "r.jsonl")
    result = run(callgate_exe, cli_env, tmp_path, "score", str(suite), "-r", str(responses),
                 "-m", "m", "--release", "r1", "--db", "c.db", "--judge", str(spec),
                 "--uncalibrated", "--json")
    # 1 of 5 attempts is a judge error: above the default 5% excluded, so not a result
    assert result.returncode == 3, result.stderr
    assert "1 judge error" in result.stderr
    doc = json.loads(result.stdout)
    by_case = {a["case_id"]: a for a in doc["attempts"]}
    assert by_case["j1"]["status"] == "judge_error" and not by_case["j1"]["right_tool"]
    assert REFUSAL[:20] in by_case["j1"]["tool_reason"]
    assert by_case["j2"]["status"] == "scored"
    scores = doc["scores"]
    assert scores["excluded"]["judge_error"] == 1 and scores["figures"]["scored"] == 4
    assert scores["judged"]["n"] == 3 and scores["judged"]["judge_errors"] == 1
    table = run(callgate_exe, cli_env, tmp_path, "score", str(suite), "-r", str(responses),
                "-m", "m", "--release", "r2", "--db", "c.db", "--judge", str(spec),
                "--uncalibrated")
    assert "excluded: judge error" in table.stdout


# --------------------------------------------------------------------------- points 1 and 2


def relabel(calib: Path, changes: dict[str, str]) -> None:
    """Give items new arguments labels ("fail"), or both labels ("pass/pass"), in place."""
    lines = []
    for line in calib.read_text().splitlines():
        item = json.loads(line)
        if item["id"] in changes:
            tool, _, arguments = changes[item["id"]].rpartition("/")
            item["label"]["arguments"] = arguments
            if tool:
                item["label"]["tool_choice"] = tool
        lines.append(json.dumps(item))
    calib.write_text("\n".join(lines) + "\n")


@pytest.fixture
def certified(tmp_path: Path, loopback, callgate_exe: str, cli_env: dict):
    """A judge certified over loopback on a 17-item set; returns (call, spec, set)."""
    from live_judge import calibrate_perfect_judge, make_judge, make_set, run

    spec, calib = make_judge(tmp_path, loopback.base_url), tmp_path / "set.jsonl"
    labels = make_set(calib)
    calibrate_perfect_judge(loopback, labels, callgate_exe, cli_env, tmp_path, spec, calib)
    assert json.loads((tmp_path / "tool_choice.cert.json").read_text())["certified"]

    def call(*args: str) -> subprocess.CompletedProcess:
        return run(callgate_exe, cli_env, tmp_path, *args)

    return call, spec, calib


def score_args(tmp_path: Path, spec: Path, release: str) -> list[str]:
    from live_judge import judged_responses, judged_suite

    suite = tmp_path / "suite"
    if not suite.exists():
        judged_suite(suite)
    responses = judged_responses(tmp_path / "r.jsonl")
    return ["score", str(suite), "-r", str(responses), "-m", "m", "--release", release,
            "--db", "c.db", "--judge", str(spec), "--json"]


@pytest.mark.slow
def test_a_failed_recalibration_revokes_the_certificate_end_to_end(
    certified, tmp_path: Path, loopback
) -> None:
    call, spec, calib = certified
    # A person corrects three labels: the judge, unchanged, now misses them.
    relabel(calib, {"i00": "fail", "i01": "fail", "i02": "fail"})
    loopback.reset()
    again = call("judge", "calibrate", str(spec), "--set", str(calib), "--db", "c.db")
    assert again.returncode == 1, again.stdout + again.stderr
    assert loopback.requests == []  # the verdicts came from the cache; only the labels moved
    refused = call(*score_args(tmp_path, spec, "r1"))
    assert refused.returncode == 2 and "certificate void" in refused.stderr
    assert "TNR 0.625" in refused.stderr
    show = call("judge", "show", str(spec), "--db", "c.db")
    assert "certificate void" in show.stdout and "TNR 0.625 below 0.9" in show.stdout
    said = " ".join(again.stdout.split())  # the console wraps a long path where it likes
    assert "not certified" in said and "earlier certificate is void" in said
    cert = json.loads((tmp_path / "tool_choice.cert.json").read_text())
    assert not cert["certified"] and "TNR 0.625 below 0.9" in cert["why_not"]

    # The store alone revokes too: the certificate file restored from git still loses.
    restored = json.loads((tmp_path / "tool_choice.cert.json").read_text())
    (tmp_path / "tool_choice.cert.json").write_text(json.dumps(
        {**restored, "certified": True, "why_not": "",
         "created_at": "2026-01-01T00:00:00+00:00"}))
    assert "certificate void" in call("judge", "show", str(spec), "--db", "c.db").stdout

    for n in range(4):
        from live_judge import verdict
        from loopback import ok

        loopback.script(f"[case-{n}]", ok(content=verdict("pass", "pass"), provider=None,
                                           cost=None))
    anyway = call(*score_args(tmp_path, spec, "r1"), "--uncalibrated")
    assert anyway.returncode == 0, anyway.stderr
    assert json.loads(anyway.stdout)["scores"]["uncalibrated"] is True


@pytest.mark.slow
def test_a_certificate_is_bound_to_the_labels_it_was_earned_on(
    certified, tmp_path: Path, loopback
) -> None:
    call, spec, calib = certified
    original = calib.read_text()
    relabel(calib, {"i03": "fail", "i12": "pass/pass"})  # i12 is a (fail, n/a) item
    refused = call(*score_args(tmp_path, spec, "r1"))
    assert refused.returncode == 2, refused.stdout + refused.stderr
    message = refused.stderr
    assert str(calib) in message and "has changed since" in message
    assert "2 label(s) changed" in message and "i03 test pass/pass -> test pass/fail" in message
    show = call("judge", "show", str(spec), "--db", "c.db")
    assert "NOT CERTIFIED" in show.stdout and "i12 test fail/n/a -> test pass/pass" in show.stdout

    calib.write_text(original + "\n")  # same labels, other bytes: still not the set it was
    reformatted = call(*score_args(tmp_path, spec, "r1"))
    assert reformatted.returncode == 2 and "no label changed" in reformatted.stderr

    # Without the file, the labels stored for the set decide.
    calib.unlink()
    show = call("judge", "show", str(spec), "--db", "c.db")
    assert "certified" in show.stdout and "NOT" not in show.stdout, show.stdout
    import sqlite3

    with sqlite3.connect(tmp_path / "c.db") as conn:
        conn.execute("UPDATE calibration_items SET label_tool_choice = 'pass', "
                     "label_arguments = 'pass' WHERE item_id = 'i10'")
    show = call("judge", "show", str(spec), "--db", "c.db")
    assert "NOT CERTIFIED" in show.stdout and "labels stored for it" in show.stdout
    assert "i10 test fail/n/a -> test pass/pass" in show.stdout
