"""Per-release audits end to end: a loopback judge, a scored run, a seeded audit sample,
labels typed in the terminal, and the three estimates and the plans read back."""

from __future__ import annotations

import json
import sqlite3
import subprocess
from pathlib import Path

import pytest
from loopback import Loopback, ok
from test_judge_live import (
    calibrate_perfect_judge,
    judged_responses,
    judged_suite,
    make_judge,
    make_set,
    run,
    verdict,
)

from callgate.judging.audit import case_audits, sample_order
from callgate.judging.estimates import AuditTable, combined_share, crossfit_ppi, ppi_share


@pytest.fixture
def scored(tmp_path: Path, loopback: Loopback, callgate_exe: str, cli_env: dict
           ) -> tuple[int, Path]:
    spec = make_judge(tmp_path, loopback.base_url)
    labels = make_set(tmp_path / "set.jsonl")
    calibrate_perfect_judge(loopback, labels, callgate_exe, cli_env, tmp_path, spec,
                            tmp_path / "set.jsonl")
    # The judge passes j0, j1 and j2 (j2 is schema-invalid: stays wrong) and fails j3.
    for n, tool, args in [(0, "pass", "pass"), (1, "pass", "pass"), (2, "pass", "pass"),
                          (3, "fail", "n/a")]:
        loopback.script(f"[case-{n}]", ok(content=verdict(tool, args), provider=None,
                                           cost=None))
    result = run(callgate_exe, cli_env, tmp_path, "score", str(judged_suite(tmp_path / "suite")),
                 "-r", str(judged_responses(tmp_path / "r.jsonl")), "-m", "m", "--release",
                 "r1", "--db", "c.db", "--judge", str(spec), "--json")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["scores"]["judged"]["estimators"]["corrected"] == "rogan_gladen"
    return doc["run_id"], spec


def label(exe: str, env: dict, cwd: Path, run_id: int, answers: str, *extra: str
          ) -> subprocess.CompletedProcess:
    return subprocess.run([exe, "judge", "label", "--audit", str(run_id), "--db", "c.db",
                           *extra], input=answers, cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=60)


def test_audit_draws_a_seeded_sample_labels_it_and_reports_three_estimates(
    scored: tuple, callgate_exe: str, cli_env: dict, tmp_path: Path
) -> None:
    run_id, _ = scored
    history = json.loads(run(callgate_exe, cli_env, tmp_path, "history", "-m", "m", "--json",
                             "--db", "c.db").stdout)
    assert [r["estimator"] for r in history["releases"]] == ["checks+judge"]
    drawn = run(callgate_exe, cli_env, tmp_path, "judge", "audit", str(run_id), "--n", "3",
                "--seed", "7", "--db", "c.db")
    assert drawn.returncode == 0, drawn.stderr
    assert "3 of 4 judged attempts drawn (seed 7), 0 labelled" in drawn.stdout
    with sqlite3.connect(tmp_path / "c.db") as conn:
        sample = conn.execute("select case_id, repeat from audit_items where run = ? "
                              "order by position", [run_id]).fetchall()
        seed = conn.execute("select seed from audits where run = ?", [run_id]).fetchone()[0]
    keys = [(f"j{n}", 0) for n in range(4)]
    assert seed == 7 and sample == sample_order(keys, 7)[:3]

    # A person disagrees with the judge on the first item (tool fail where it said pass
    # or pass where it said fail), agrees on the rest.
    judge_says = {"j0": "pass", "j1": "pass", "j2": "pass", "j3": "fail"}
    answers = ""
    person = {}
    for index, (case_id, _) in enumerate(sample):
        tool = judge_says[case_id]
        if index == 0:
            tool = "fail" if tool == "pass" else "pass"
        person[case_id] = tool
        answers += f"{tool}\n{'pass' if tool == 'pass' else 'n/a'}\n"
    labelled = label(callgate_exe, cli_env, tmp_path, run_id, answers, "--labeller", "Ada")
    assert labelled.returncode == 0, labelled.stderr
    assert "labelled 3 audit item(s)" in labelled.stdout
    assert "judge:" not in labelled.stdout  # the judge's verdict is hidden from the labeller
    with sqlite3.connect(tmp_path / "c.db") as conn:
        rows = conn.execute("select labeller, labelled_at from audit_items where run = ?",
                            [run_id]).fetchall()
    assert all(who == "Ada" and when for who, when in rows)

    report = run(callgate_exe, cli_env, tmp_path, "judge", "audit", str(run_id), "--json",
                 "--db", "c.db")
    assert report.returncode == 0, report.stderr
    doc = json.loads(report.stdout)
    assert doc["labelled"] == 3 and doc["labellers"] == ["Ada"]
    tool = doc["dimensions"]["tool_choice"]
    assert tool["raw"]["estimator"] == "raw" and tool["raw"]["value"] == 0.75
    assert tool["rogan_gladen"]["corrected"] == pytest.approx(75.0)  # a perfect calibration
    # PPI++ with λ cross-fitted over folds of cases drawn from the audit's seed.
    population = {(c, 0): judge_says[c] == "pass" for c in judge_says}
    truth = {(c, 0): person[c] == "pass" for c in person}
    expected = crossfit_ppi(case_audits(population, truth, 7), "agent")
    assert expected is not None
    assert tool["ppi"]["estimator"] == "ppi++"
    assert tool["ppi"]["value"] == pytest.approx(expected.value)
    assert tool["ppi"]["low"] == pytest.approx(expected.low)
    assert tool["disagreements"] == 1
    # The release figure: `plain` is deterministic and right; j2 is schema-invalid, so its
    # right-arguments truth is 0 whatever the labels say.
    right_tool = doc["release"]["right_tool"]
    assert right_tool["estimator"] == "deterministic+ppi++"
    assert right_tool["value"] == pytest.approx(
        combined_share(1, 1, expected, 4).value)

    text = run(callgate_exe, cli_env, tmp_path, "judge", "audit", str(run_id), "--db", "c.db")
    assert "Rogan–Gladen" in text.stdout and "PPI++" in text.stdout
    assert "audit labels give ±2 points" in text.stdout or "out of reach" in text.stdout
    history = run(callgate_exe, cli_env, tmp_path, "history", "-m", "m", "--db", "c.db")
    assert "ppi++" in history.stdout  # the table says how judged shares are estimated
    history = json.loads(run(callgate_exe, cli_env, tmp_path, "history", "-m", "m", "--json",
                             "--db", "c.db").stdout)
    assert [r["estimator"] for r in history["releases"]] == ["checks+judge, audited"]


def test_an_audit_grows_keeping_its_labels_and_refuses_another_seed(
    scored: tuple, callgate_exe: str, cli_env: dict, tmp_path: Path
) -> None:
    run_id, _ = scored
    assert run(callgate_exe, cli_env, tmp_path, "judge", "audit", str(run_id), "--n", "2",
               "--seed", "3", "--db", "c.db").returncode == 0
    assert label(callgate_exe, cli_env, tmp_path, run_id, "pass\npass\nq\n", "--labeller",
                 "Ada").returncode == 0
    grown = run(callgate_exe, cli_env, tmp_path, "judge", "audit", str(run_id), "--n", "4",
                "--db", "c.db", "--json")
    doc = json.loads(grown.stdout)
    assert (doc["sample"], doc["labelled"], doc["seed"]) == (4, 1, 3)
    with sqlite3.connect(tmp_path / "c.db") as conn:
        sample = conn.execute("select case_id, repeat from audit_items where run = ? "
                              "order by position", [run_id]).fetchall()
    assert sample == sample_order([(f"j{n}", 0) for n in range(4)], 3)
    other = run(callgate_exe, cli_env, tmp_path, "judge", "audit", str(run_id), "--n", "4",
                "--seed", "5", "--db", "c.db")
    assert other.returncode == 2 and "seed 3" in other.stderr


def test_audit_of_a_run_without_judged_attempts_is_a_clear_error(
    callgate_exe: str, cli_env: dict, tmp_path: Path
) -> None:
    from callgate.store.db import Store

    Store(tmp_path / "c.db").close()
    missing = run(callgate_exe, cli_env, tmp_path, "judge", "audit", "99", "--db", "c.db")
    assert missing.returncode == 2 and "no run 99" in missing.stderr
    assert "Traceback" not in missing.stderr
    bare = run(callgate_exe, cli_env, tmp_path, "judge", "plan", "--db", "c.db")
    assert bare.returncode == 2 and "give SPEC --set FILE, or --run RUN" in bare.stderr
    unlabelled = run(callgate_exe, cli_env, tmp_path, "judge", "label", "--audit", "99",
                     "--labeller", "Ada", "--db", "c.db")
    assert unlabelled.returncode == 2 and "run 99 has no audit" in unlabelled.stderr


def test_plans_for_a_run_and_for_a_calibration_set(
    scored: tuple, callgate_exe: str, cli_env: dict, tmp_path: Path
) -> None:
    run_id, spec = scored
    plan = run(callgate_exe, cli_env, tmp_path, "judge", "plan", "--run", str(run_id),
               "--width", "2", "--db", "c.db")
    assert plan.returncode == 0, plan.stderr
    # 4 judged attempts cannot give ±2 points however many are labelled.
    assert "tool_choice: ±2 points is out of reach with 4 judged attempts" in plan.stdout
    assert "calibration TPR/TNR" in plan.stdout

    # The set: 5 pass + 5 fail items per dimension on the test split, all agreed; the spec
    # asks 4 per class at 0.9. Point rule: certified now; Wilson: 35 agreeing items needed.
    point = run(callgate_exe, cli_env, tmp_path, "judge", "plan", str(spec), "--set",
                "set.jsonl", "--db", "c.db")
    assert point.returncode == 0, point.stderr
    assert point.stdout.count("0 more") == 4
    wilson = run(callgate_exe, cli_env, tmp_path, "judge", "plan", str(spec), "--set",
                 "set.jsonl", "--rule", "wilson", "--db", "c.db")
    assert "tool_choice:\n  pass items (TPR): 25 more (10 so far)" in wilson.stdout
    assert "fail items (TNR): 30 more (5 so far)" in wilson.stdout


def test_judge_show_says_who_labelled_and_the_plan(
    scored: tuple, callgate_exe: str, cli_env: dict, tmp_path: Path
) -> None:
    _, spec = scored
    show = run(callgate_exe, cli_env, tmp_path, "judge", "show", str(spec), "--db", "c.db")
    assert show.returncode == 0, show.stderr
    # The test set's items carry no labeller: none counts as confirmed by a person.
    assert "0 of 15 test labels confirmed by a person (required share: 0)" in show.stdout
    assert "under the point rule" in show.stdout and "under the wilson rule" in show.stdout
    assert "tool_choice: pass items (TPR): 25 more (10 so far)" in show.stdout


def _report(table: AuditTable, judged: int, judged_passes: int, det_right: int, det_n: int):
    from callgate.judging.audit import AuditReport, ReleasePart

    others = judged - table.n
    ppi = ppi_share(table, judged_passes - table.pass_pass - table.fail_pass, others)
    part = ReleasePart(deterministic_right=det_right, deterministic_n=det_n, judged=judged,
                       judged_passes=judged_passes, table=table)
    return AuditReport(run=1, seed=0, population=judged, sample=table.n, labelled=table.n,
                       labellers=["Ada"], dimensions={},
                       release={"right_tool": combined_share(det_right, det_n, ppi, judged)},
                       parts={"right_tool": part})


def test_the_gate_reads_an_audited_estimate_against_the_two_point_rule() -> None:
    from callgate.judging.audit import judged_check

    # 600 deterministic attempts (540 right) and 400 judged (judge: 360 pass); an audit of 40
    # with 4 disagreements: 88.5 [84.3–92.6].
    table = AuditTable(pass_pass=34, pass_fail=1, fail_pass=3, fail_fail=2)
    report = _report(table, 400, 360, 540, 600)
    estimate = report.release["right_tool"]
    low, high = 100 * estimate.low, 100 * estimate.high
    assert judged_check(report, "right_tool", low + 2, 2).outcome == "pass"
    assert judged_check(report, "right_tool", high + 2.5, 2).outcome == "regression"
    # The line 2.5 points above the estimate: the deterministic part alone is ±1.4 points,
    # so more audit labels can decide it.
    undecided = judged_check(report, "right_tool", 100 * estimate.value + 4.5, 2)
    assert undecided.outcome == "undecided"
    assert undecided.labels_needed is not None and undecided.labels_needed > 40
    assert f"--n {undecided.labels_needed}" in undecided.message
    # With that many labels at the same disagreement rates, the interval's half-width is
    # the 2.5-point margin (up to rounding of the scaled counts), where it was 4.2.
    scale = undecided.labels_needed / 40
    bigger = AuditTable(pass_pass=round(34 * scale), pass_fail=round(1 * scale),
                        fail_pass=round(3 * scale), fail_fail=round(2 * scale))
    grown = _report(bigger, 400, 360, 540, 600).release["right_tool"]
    assert 100 * (grown.high - grown.low) / 2 == pytest.approx(2.5, abs=0.15)


def test_gate_with_an_audit_of_too_few_judged_attempts_is_inconclusive(
    scored: tuple, callgate_exe: str, cli_env: dict, tmp_path: Path
) -> None:
    _, spec = scored
    first = run(callgate_exe, cli_env, tmp_path, "gate", "-m", "m", "--release", "r1",
                "--db", "c.db")
    assert first.returncode == 0, first.stdout + first.stderr
    again = run(callgate_exe, cli_env, tmp_path, "score", "suite", "-r", "r.jsonl", "-m", "m",
                "--release", "r2", "--db", "c.db", "--judge", str(spec), "--json")
    second = json.loads(again.stdout)["run_id"]
    unaudited = run(callgate_exe, cli_env, tmp_path, "gate", "-m", "m", "--release", "r2",
                    "--db", "c.db")
    assert "decided by the judge and are counted as it said" in unaudited.stdout
    assert run(callgate_exe, cli_env, tmp_path, "judge", "audit", str(second), "--n", "4",
               "--seed", "1", "--db", "c.db").returncode == 0
    # The person agrees with the judge on every item (labels follow the sample order).
    with sqlite3.connect(tmp_path / "c.db") as conn:
        order = [r[0] for r in conn.execute("select case_id from audit_items where run = ? "
                                            "order by position", [second])]
    answers = "".join("fail\nn/a\n" if c == "j3" else "pass\npass\n" for c in order)
    assert label(callgate_exe, cli_env, tmp_path, second, answers, "--labeller",
                 "Ada").returncode == 0
    gated = run(callgate_exe, cli_env, tmp_path, "gate", "-m", "m", "--release", "r2",
                "--db", "c.db", "--scores-out", "r2.json")
    # 4 judged attempts of 5: the judged part's interval is far wider than 2 points.
    assert gated.returncode == 3, gated.stdout + gated.stderr
    assert "deterministic+ppi++" in gated.stdout and "straddles" in gated.stdout
    kept = json.loads((tmp_path / "r2.json").read_text())["estimates"]
    assert kept["right_tool"]["estimator"] == "deterministic+ppi++"
    assert kept["audit"]["labellers"] == ["Ada"] and kept["audit"]["labelled"] == 4
    assert kept["judged"]["tool_choice"]["ppi++"]["estimator"] == "ppi++"
    assert kept["judged"]["tool_choice"]["rogan_gladen"]["estimator"] == "rogan_gladen"


def test_the_terminal_labeller_takes_the_web_keys_records_skips_and_ends_with_the_answers(
    scored: tuple, callgate_exe: str, cli_env: dict, tmp_path: Path
) -> None:
    run_id, _ = scored
    assert run(callgate_exe, cli_env, tmp_path, "judge", "audit", str(run_id), "--n", "4",
               "--seed", "7", "--db", "c.db").returncode == 0
    # Item 1: a typo (x) is asked again, then p; 'maybe' for the arguments is asked again,
    # then p. Item 2: skipped, with a reason. Item 3: f, n. Then the piped answers end.
    answers = "x\np\nmaybe\np\ns\ncannot tell from the transcript\nf\nn\n"
    ended = label(callgate_exe, cli_env, tmp_path, run_id, answers, "--labeller", "Ada")
    assert ended.returncode == 2, ended.stdout + ended.stderr
    assert "interrupted" not in ended.stderr and "Traceback" not in ended.stderr
    assert ended.stderr.startswith("error: stdin: the answers ended at audit item 4")
    assert "the 2 label(s) given are kept" in ended.stderr
    assert "'x' is not an answer" in ended.stdout and "'maybe' is not an answer" in ended.stdout
    with sqlite3.connect(tmp_path / "c.db") as conn:
        rows = conn.execute("select label_tool_choice, label_arguments, skip_reason, labeller "
                            "from audit_items where run = ? order by position",
                            [run_id]).fetchall()
    assert rows == [("pass", "pass", None, "Ada"),
                    (None, None, "cannot tell from the transcript", "Ada"),
                    ("fail", "n/a", None, "Ada"), (None, None, None, None)]

    doc = json.loads(run(callgate_exe, cli_env, tmp_path, "judge", "audit", str(run_id),
                         "--json", "--db", "c.db").stdout)
    assert (doc["labelled"], doc["counted"], doc["skipped"], doc["complete"]) == (2, 2, 1, False)
    items = doc["items"]
    assert [(i["position"], i["counted"]) for i in items] == [(0, True), (1, False),
                                                                (2, True), (3, False)]
    assert items[0]["labeller"] == "Ada" and items[0]["labelled_at"]
    assert items[1]["skip_reason"] == "cannot tell from the transcript"
    text = run(callgate_exe, cli_env, tmp_path, "judge", "audit", str(run_id), "--db", "c.db")
    assert "INCOMPLETE: 1 item(s) skipped" in text.stdout
    assert "2: cannot tell from the transcript" in text.stdout

    # Labelling again offers the skipped item first; labelled, the audit is complete.
    again = label(callgate_exe, cli_env, tmp_path, run_id, "p\np\nf\nn\n", "--labeller", "Bo")
    assert again.returncode == 0, again.stderr
    assert "skipped before by Ada: cannot tell from the transcript" in again.stdout
    doc = json.loads(run(callgate_exe, cli_env, tmp_path, "judge", "audit", str(run_id),
                         "--json", "--db", "c.db").stdout)
    assert (doc["counted"], doc["skipped"], doc["complete"]) == (4, 0, True)


def test_only_the_answered_prefix_of_the_sample_order_counts(scored: tuple, tmp_path: Path
                                                             ) -> None:
    from callgate.judging.audit import audit_report, draw_audit
    from callgate.store.db import Store

    run_id, _ = scored
    with Store(tmp_path / "c.db") as store:
        _, items = draw_audit(store, run_id, 4, seed=7)
        # Labels on positions 0 and 2 (position 1 waits): only position 0 is counted.
        for item in (items[0], items[2]):
            store.save_audit_label(run_id, item["case_id"], item["repeat"], "pass", "pass",
                                   "Ada")
        report = audit_report(store, run_id)
        assert (report.labelled, report.counted, report.complete) == (2, 1, True)
        assert report.dimensions["tool_choice"].labels == 1
        store.save_audit_skip(run_id, items[1]["case_id"], items[1]["repeat"], "unsure", "Ada")
        report = audit_report(store, run_id)
        assert (report.counted, report.skipped, report.complete) == (2, 1, False)
