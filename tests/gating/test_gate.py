"""The gate on crafted histories, its statistics against hand-computed values, and its CLI."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from releases import release, uniform

from callgate.cli.demo import example_path
from callgate.gating.decision import OtherAgent, decide
from callgate.gating.scores_file import read_release_file
from callgate.gating.statistics import (
    detectable_drop_paired,
    detectable_drop_unpaired,
    mcnemar_exact,
    paired_cases_needed,
)
from callgate.report.console import gate_junit, gate_markdown

CALLGATE = str(Path(sys.executable).with_name("callgate"))

if TYPE_CHECKING:
    from callgate.store.db import Store


def test_pass_within_the_allowed_drop() -> None:
    d = decide(release("r2", uniform(100, 89, 84)), release("r1", uniform(100, 90, 85)))
    assert d.outcome == "pass" and d.exit_code == 0
    assert [c.change for c in d.checks] == [pytest.approx(-1.0), pytest.approx(-1.0)]
    assert [c.case_id for c in d.worse] == ["c0084"]  # c0089 had wrong arguments before too


def test_fail_on_the_tool_share_alone() -> None:
    d = decide(release("r2", uniform(100, 87, 84)), release("r1", uniform(100, 90, 85)))
    assert d.outcome == "regression" and d.exit_code == 1
    assert [c.failed for c in d.checks] == [True, False]


def test_fail_on_the_arguments_share_alone() -> None:
    d = decide(release("r2", uniform(100, 90, 80)), release("r1", uniform(100, 90, 85)))
    assert d.outcome == "regression"
    assert [c.failed for c in d.checks] == [False, True]
    assert any("right arguments fell 5.0 points" in m for m in d.messages)


def test_a_drop_of_exactly_two_points_passes_and_a_little_more_fails() -> None:
    # 87/300 → 81/300 is exactly 2 points, which floating point computes as 1.9999999999999964
    d = decide(release("r2", uniform(300, 81, 81)), release("r1", uniform(300, 87, 87)))
    assert d.checks[0].change == pytest.approx(-2.0)
    assert d.outcome == "pass"
    d = decide(release("r2", uniform(300, 80, 80)), release("r1", uniform(300, 87, 87)))
    assert d.outcome == "regression"
    d = decide(release("r2", uniform(100, 88, 88)), release("r1", uniform(100, 90, 90)),
               max_drop=1.5)
    assert d.outcome == "regression"


def test_first_release_is_recorded_and_passes() -> None:
    d = decide(release("r1", uniform(10, 9, 9)), None)
    assert d.outcome == "first_release" and d.exit_code == 0
    assert "no baseline" in d.messages[0]


def test_a_first_release_that_is_not_a_result_never_says_it_passes() -> None:
    d = decide(release("r1", uniform(94, 90, 85), excluded=6), None)
    assert d.outcome == "inconclusive"
    assert d.messages[0] == "first release of m on s: no baseline"
    whole = decide(release("r1", uniform(10, 9, 9)), None, not_whole="missing shard(s) 2/2")
    assert whole.outcome == "inconclusive" and whole.exit_code == 3
    assert whole.messages == ["missing shard(s) 2/2", "first release of m on s: no baseline"]


def test_a_warning_about_the_first_release_is_not_an_earlier_release_passed_over() -> None:
    pending = release("r1", uniform(10, 9, 9))
    pending = pending.model_copy(update={"attempts": 11, "excluded": {**pending.excluded,
                                                                      "pending_judge": 1}})
    d = decide(pending, None, max_excluded=0.5)
    assert d.outcome == "first_release" and d.warnings
    assert d.messages == ["first release of m on s: no baseline; recorded, passes"]


def test_a_first_release_beside_another_agent_is_inconclusive_unless_a_new_line() -> None:
    other = OtherAgent(agent="old/model", release="r1", model="old/model")
    d = decide(release("r2", uniform(10, 9, 9)), None, other_agent=other)
    assert d.outcome == "inconclusive" and d.exit_code == 3
    assert "agent old/model has: its last is r1" in d.messages[-1]
    assert "--baseline-agent old/model" in d.messages[-1] and "--new-agent" in d.messages[-1]
    started = decide(release("r2", uniform(10, 9, 9)), None, other_agent=other, new_agent=True)
    assert started.outcome == "first_release" and started.new_agent
    assert "starts a new line on purpose" in started.messages[-1]


def test_a_model_change_is_named_and_a_parameter_change_warned() -> None:
    before = release("r1", uniform(100, 90, 85)).model_copy(
        update={"agent": "bot", "model": "a", "model_params": {"reasoning_effort": "low"}})
    now = release("r2", uniform(100, 90, 85)).model_copy(
        update={"agent": "bot", "model": "b", "model_params": {"reasoning_effort": "high"}})
    d = decide(now, before)
    assert d.outcome == "pass" and d.messages[0] == "model changed: a → b"
    assert (d.agent, d.model, d.baseline_agent, d.baseline_model) == ("bot", "b", "bot", "a")
    same_model = decide(now.model_copy(update={"model": "a"}), before)
    assert not any("model changed" in m for m in same_model.messages)
    assert "model parameters changed since r1: reasoning_effort" in same_model.warnings


def test_suite_changed_compares_shared_cases_and_lists_the_difference() -> None:
    before = {"a": (1, 1, 1), "b": (1, 1, 1), "gone": (1, 0, 0)}
    after = {"a": (1, 1, 1), "b": (1, 1, 0), "new": (1, 0, 0)}
    d = decide(release("r2", after, fingerprint="f2"), release("r1", before))
    assert d.suite_changed and d.shared_cases == 2
    assert d.added_cases == ["new"] and d.removed_cases == ["gone"]
    assert d.checks[0].baseline.pct == 100.0 and d.checks[0].current.pct == 100.0
    assert d.checks[1].current.pct == 50.0
    assert any("suite changed" in w for w in d.warnings)
    assert [c.case_id for c in d.worse] == ["b"] and d.worse[0].reason == "b failed"


def test_no_shared_cases_is_inconclusive() -> None:
    d = decide(release("r2", {"x": (1, 1, 1)}, fingerprint="f2"),
               release("r1", {"y": (1, 1, 1)}))
    assert d.outcome == "inconclusive" and d.exit_code == 3


def test_too_many_exclusions_is_inconclusive_but_a_regression_still_fails() -> None:
    d = decide(release("r2", uniform(94, 90, 85), excluded=6),
               release("r1", uniform(94, 90, 85)))
    assert d.outcome == "inconclusive" and d.exit_code == 3
    assert d.excluded_share == pytest.approx(0.06)
    ok = decide(release("r2", uniform(96, 90, 85), excluded=4),
                release("r1", uniform(96, 90, 85)))
    assert ok.outcome == "pass"
    bad = decide(release("r2", uniform(94, 80, 75), excluded=6),
                 release("r1", uniform(94, 90, 85)))
    assert bad.outcome == "regression"


def test_a_different_judge_is_pointed_out() -> None:
    d = decide(release("r2", uniform(10, 9, 9), judge="j2"),
               release("r1", uniform(10, 9, 9), judge="j1"))
    assert any("judge differs" in w for w in d.warnings)


def test_mcnemar_exact_against_hand_values() -> None:
    assert mcnemar_exact(5, 1) == pytest.approx(2 * (1 + 6) / 64)  # 0.21875
    assert mcnemar_exact(10, 0) == pytest.approx(2 / 1024)
    assert mcnemar_exact(0, 0) == 1.0
    assert mcnemar_exact(3, 3) == 1.0


def test_paired_sample_size_against_hand_value() -> None:
    # [1.959964·√0.03 + 0.841621·√(0.03 − 0.0004)]² / 0.0004 = 0.484273² / 0.0004
    assert paired_cases_needed(0.02, 0.03) == pytest.approx(586.3, abs=0.5)
    # design.md: a 2-point drop needs roughly 300–1,500 paired cases, by how many flip
    assert 300 < paired_cases_needed(0.02, 0.02) < paired_cases_needed(0.02, 0.08) < 1600
    assert paired_cases_needed(0.02, 0.0003) == math.inf  # a drop larger than the flips
    assert paired_cases_needed(0.03, 0.03) < math.inf  # every flip one way: still finite


def test_detectable_drop_inverts_the_sample_size() -> None:
    drop = detectable_drop_paired(586, 0.03)
    assert drop == pytest.approx(0.02, abs=2e-4)
    assert detectable_drop_paired(0, 0.1) is None
    # floating point once made sqrt(ψ)² > ψ and hid these (review finding)
    assert detectable_drop_paired(1000, 0.01) is not None
    assert detectable_drop_paired(300, 0.2) is not None
    for n, flips in [(300, 1), (1000, 10), (50, 19), (500, 40)]:
        drop = detectable_drop_paired(n, flips / n)
        if drop is not None:
            assert drop <= flips / n
            assert paired_cases_needed(drop, flips / n) == pytest.approx(n, rel=1e-3)
    # unpaired, 90% → 88%: (1.96·√(2·0.89·0.11) + 0.8416·√(0.09 + 0.1056))² / 0.0004 ≈ 3,841
    assert detectable_drop_unpaired(3841, 0.90) == pytest.approx(0.02, abs=2e-4)


def test_small_suite_warns_that_the_rule_cannot_see_two_points() -> None:
    d = decide(release("r2", uniform(50, 45, 45)), release("r1", uniform(50, 45, 45)))
    assert d.outcome == "pass"
    # no flips observed (one assumed): 2% flip share, and 50 cases cannot see even that
    assert d.checks[0].detectable_drop_paired is None
    assert any("50 paired cases cannot detect any drop with 80% power at a flip rate of 2%" in w
               for w in d.warnings)
    assert not any("none at all" in w or "smallest drop" in w for w in d.warnings)
    assert any(m.startswith("right tool unchanged (90.0 → 90.0") for m in d.messages)
    wide = decide(release("r2", uniform(200, 160, 160)), release("r1", uniform(200, 180, 180)))
    assert 2 < wide.checks[0].detectable_drop_paired <= 10  # 10% of cases flipped
    assert any("smallest drop detectable with 80% power is" in w for w in wide.warnings)


def test_junit_parsed_back() -> None:
    before = release("r1", {"a": (2, 2, 2), "b": (2, 2, 2), "c": (2, 0, 0), "d": (0, 0, 0)})
    after = release("r2", {"a": (2, 2, 2), "b": (2, 2, 0), "c": (2, 0, 0), "d": (0, 0, 0)})
    d = decide(after, before)
    root = ET.fromstring(gate_junit(d, after))
    cases = root.find("testsuite[@name='s.cases']")
    assert cases is not None and cases.get("tests") == "4" and cases.get("failures") == "2"
    by_name = {tc.get("name"): tc for tc in cases.iter("testcase")}
    assert by_name["a"].find("failure") is None
    assert by_name["b"].find("failure").get("message") == "regressed: b failed"
    assert by_name["c"].find("failure").get("message") == "c failed"
    assert by_name["d"].find("skipped") is not None
    gate = root.find("testsuite[@name='s.gate']")
    assert gate.get("failures") == "1"
    assert "gate FAIL" in gate_markdown(d) and "`b`: b failed" in gate_markdown(d)


def test_junit_never_shows_an_inconclusive_or_judged_regression_as_green() -> None:
    before = release("r1", uniform(10, 9, 9))
    after = release("r2", uniform(10, 9, 9), excluded=5)
    for decision in (decide(after, before), decide(after, None)):
        assert decision.outcome == "inconclusive"
        gate = ET.fromstring(gate_junit(decision, after)).find("testsuite[@name='s.gate']")
        assert gate is not None and gate.get("errors") == "1"
        assert gate.get("tests") == str(len(gate.findall("testcase")))
        error = gate.find("testcase[@name='inconclusive']/error")
        assert error is not None and "attempts were excluded" in error.get("message", "")
        assert gate.find("testcase[@name='first_release']") is None
    judged = decide(release("r2", uniform(10, 9, 9)), before,
                    judged_checks=[("regression", "right arguments, audited, fell 9 points")])
    assert judged.outcome == "regression" and not any(c.failed for c in judged.checks)
    gate = ET.fromstring(gate_junit(judged, after)).find("testsuite[@name='s.gate']")
    assert gate is not None and gate.get("failures") == "1"
    failure = gate.find("testcase[@name='regression']/failure")
    assert failure is not None and "audited, fell 9" in failure.get("message", "")


def test_release_file_round_trip_is_stable(tmp_path: Path) -> None:
    r = release("r1", uniform(5, 4, 3))
    path = tmp_path / "r1.json"
    path.write_text(r.to_json())
    again = read_release_file(path)
    assert again == r and again.to_json() == path.read_text()
    keys = list(json.loads(path.read_text()))
    assert keys == sorted(keys)


# --------------------------------------------------------------------------- CLI


def cli(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200"}
    env.pop("CALLGATE_DB", None)
    return subprocess.run([CALLGATE, *args], cwd=cwd, capture_output=True, text=True, env=env,
                          timeout=120)


def score(cwd: Path, rel: str) -> None:
    example = example_path()
    result = cli(cwd, "score", str(example), "-r", str(example / f"responses-{rel}.jsonl"),
                 "-m", "agent", "--release", rel)
    assert result.returncode == 0, result.stderr


@pytest.mark.slow
def test_ci_flow_baseline_from_a_committed_file_with_an_empty_store(tmp_path: Path) -> None:
    first, second = tmp_path / "first-runner", tmp_path / "second-runner"
    first.mkdir()
    second.mkdir()
    score(first, "2026.10")
    releases = tmp_path / "repo" / "releases"
    typo = cli(first, "gate", "-m", "agent", "--release", "2026.10", "--baseline",
               str(releases))
    assert typo.returncode == 2 and "no such scores file or folder" in typo.stderr
    releases.mkdir(parents=True)
    result = cli(first, "gate", "-m", "agent", "--release", "2026.10",
                 "--baseline", str(releases), "--scores-out", str(releases / "2026.10.json"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "first release" in result.stdout
    kept = read_release_file(releases / "2026.10.json")
    assert kept.release == "2026.10" and len(kept.cases) == 54

    score(second, "2026.11")  # a fresh runner: its store has never seen 2026.10
    result = cli(second, "gate", "-m", "agent", "--release", "2026.11", "--baseline",
                 str(releases), "--junit", "junit.xml", "--markdown", "summary.md", "--json")
    assert result.returncode == 1, result.stderr
    decision = json.loads(result.stdout)
    assert decision["outcome"] == "regression" and decision["baseline_release"] == "2026.10"
    assert decision["shared_cases"] == 50
    assert "clean-001" in {c["case_id"] for c in decision["worse"]}
    assert ET.parse(second / "junit.xml").getroot().tag == "testsuites"
    assert "REGRESSION" in (second / "summary.md").read_text()


@pytest.mark.slow
def test_gate_errors_exit_2(tmp_path: Path) -> None:
    result = cli(tmp_path, "gate", "-m", "agent", "--release", "x")
    assert result.returncode == 2 and "no such database" in result.stderr
    score(tmp_path, "2026.10")
    result = cli(tmp_path, "gate", "-m", "agent", "--release", "nope")
    assert result.returncode == 2 and "no finished run" in result.stderr
    (tmp_path / "bad.json").write_text("{}")
    result = cli(tmp_path, "gate", "-m", "agent", "--release", "2026.10",
                 "--baseline", "bad.json")
    assert result.returncode == 2 and "bad.json" in result.stderr


@pytest.mark.slow
def test_history_lists_releases_oldest_first(tmp_path: Path) -> None:
    score(tmp_path, "2026.10")
    score(tmp_path, "2026.11")
    score(tmp_path, "2026.10")  # re-scoring keeps its place in history
    result = cli(tmp_path, "history", "-m", "agent")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert out.index("2026.10") < out.index("2026.11") and "-10.4" in out
    result = cli(tmp_path, "gate", "-m", "agent", "--release", "2026.11")
    assert result.returncode == 1


def test_a_partial_release_is_inconclusive_not_green() -> None:
    full = uniform(100, 90, 85)
    partial = {c: full[c] for c in list(full)[:20]}  # only the first 20 cases answered
    baseline = release("r1", full)
    current = release("r2", partial).model_copy(update={"suite_cases": sorted(full)})
    d = decide(current, baseline.model_copy(update={"suite_cases": sorted(full)}))
    assert d.outcome == "inconclusive" and d.exit_code == 3
    assert d.removed_cases == [] and not d.suite_changed
    assert any("80 of 100 cases the baseline scored" in m for m in d.messages)
    few = {c: full[c] for c in list(full)[:97]}
    d = decide(release("r2", few).model_copy(update={"suite_cases": sorted(full)}),
               baseline.model_copy(update={"suite_cases": sorted(full)}))
    assert d.outcome == "pass" and any("3 case(s) scored in the baseline" in w
                                       for w in d.warnings)


@pytest.mark.slow
def test_partial_responses_file_through_the_cli(tmp_path: Path) -> None:
    example = example_path()
    lines = (example / "responses-2026.10.jsonl").read_text().splitlines()
    (tmp_path / "part.jsonl").write_text("\n".join(lines[:6]) + "\n")
    score(tmp_path, "2026.10")
    result = cli(tmp_path, "score", str(example), "-r", "part.jsonl", "-m", "agent",
                 "--release", "partial")
    assert result.returncode == 0, result.stderr
    gate = cli(tmp_path, "gate", "-m", "agent", "--release", "partial")
    assert gate.returncode == 3, gate.stdout
    assert "have no scored attempt now" in gate.stdout and "removed" not in gate.stdout


def test_attempts_left_to_a_judge_are_never_dropped_silently() -> None:
    current = release("r2", uniform(100, 90, 85))
    current = current.model_copy(update={
        "attempts": 104, "excluded": {**current.excluded, "pending_judge": 4}})
    d = decide(current, release("r1", uniform(100, 90, 85)))
    assert d.outcome == "pass"
    assert any("4 of 104 attempts expect a judge" in w for w in d.warnings), d.warnings


# --------------------------------------------------------------------------- stored cases


def scored_store(tmp_path: Path) -> tuple[Path, list[int]]:
    """Two releases of a three-case suite, three repeats each: right, wrong value and no call
    at different repeats, and a cut response (excluded)."""
    from conftest import lookup_case, no_call_case, write_suite
    from factories import line, message, tool_call, write_lines

    from callgate.scoring.pipeline import score_file
    from callgate.store.db import Store
    from callgate.suites.suite import load_suite

    suite = load_suite(write_suite(tmp_path / "suite", [
        lookup_case("a"), lookup_case("b", "ord_2"), no_call_case("c")]))
    right = message(tool_call("lookup_order", {"order_id": "ord_1"}))
    wrong = message(tool_call("lookup_order", {"order_id": "ord_9"}))
    answers = {
        "r1": [line("a", right), line("a", wrong, 1), line("a", right, 2),
               line("b", wrong), line("b", message(content="hi"), 1),
               line("b", wrong, 2, finish_reason="length"), line("c", message(content="9-5")),
               line("c", right, 1), line("c", message(content="9-5"), 2)],
        "r2": [line("a", wrong), line("a", right, 1), line("a", wrong, 2),
               line("b", right, 0, finish_reason="length"), line("c", right)],
    }
    runs = []
    with Store(tmp_path / "callgate.db") as store:
        for release, lines in answers.items():
            path = write_lines(tmp_path / f"{release}.jsonl", lines)
            runs.append(score_file(suite, path, store, model="m", release=release).run_id)
    return tmp_path / "callgate.db", runs


def test_a_stored_release_tallies_its_cases_as_case_records_does(tmp_path: Path) -> None:
    from callgate.checks.verdict import Verdict
    from callgate.gating.cases import case_records
    from callgate.gating.finding import stored_release
    from callgate.store.db import Store

    db, runs = scored_store(tmp_path)
    with Store(db) as store:
        for run_id in runs:
            verdicts = [Verdict.model_validate(row) for row in store.verdicts(run_id)]
            stored = stored_release(store, store.stored_run(run_id)).cases
            assert stored == case_records(verdicts)
    first = case_records(Verdict.model_validate(r) for r in Store(db).verdicts(runs[0]))
    assert first["a"][:4] == (3, 3, 2, 0) and "ord_9" in first["a"].reason
    assert first["b"][:4] == (2, 1, 0, 1) and first["c"][:4] == (3, 2, 2, 0)


def test_a_stored_release_reads_its_own_rows_when_two_runs_interleave(tmp_path: Path) -> None:
    from callgate.gating.finding import stored_release
    from callgate.store.db import Store

    db, runs = scored_store(tmp_path)
    with Store(db) as store:
        with store.atomic():  # the verdicts themselves are read, not the kept tallies
            store.db.execute("DELETE FROM case_tallies")
        before = [stored_release(store, store.stored_run(run_id)).cases for run_id in runs]
        # rewrite the verdicts in turn, one row of each run after the other (two runs written
        # at once), so each run's rowid range holds the other's rows
        rows = store.db.execute("SELECT * FROM verdicts ORDER BY case_id, run").fetchall()
        with store.atomic():
            store.db.execute("DELETE FROM verdicts")
            marks = ", ".join("?" * len(rows[0]))
            store.db.conn.executemany(f"INSERT INTO verdicts VALUES ({marks})", rows)
        spans = [store.db.execute("SELECT MIN(rowid), MAX(rowid) FROM verdicts WHERE run = ?",
                                  [run_id]).fetchone() for run_id in runs]
        assert spans[0][0] < spans[1][0] < spans[0][1]  # they overlap
        after = [stored_release(store, store.stored_run(run_id)).cases for run_id in runs]
    assert after == before


def test_a_scores_file_keeps_case_records_as_objects(tmp_path: Path) -> None:
    from callgate.errors import InputError

    scores = release("r1", {"a": (2, 2, 1), "b": (1, 0, 0)})
    text = scores.to_json()
    assert json.loads(text)["cases"]["a"] == {"trials": 2, "right_tool": 2,
                                              "right_arguments": 1, "excluded": 0,
                                              "reason": "a failed"}
    path = tmp_path / "r1.json"
    path.write_text(text)
    assert read_release_file(path) == scores
    document = json.loads(text)
    document["cases"]["a"] = [2, 2, 1, 0, ""]
    path.write_text(json.dumps(document))
    with pytest.raises(InputError, match=r"cases\.a"):
        read_release_file(path)


def kept_and_tallied(store: Store, run_id: int) -> tuple[dict, dict]:
    from callgate.gating.cases import kept_records, tally

    return kept_records(store.case_tallies(run_id)), tally(store.gate_rows(run_id))


def test_the_tallies_kept_when_a_run_finishes_equal_its_verdicts_tallied(
        tmp_path: Path) -> None:
    from callgate.store.columns import VERDICT_COLUMNS
    from callgate.store.db import Store
    from callgate.suites.suite import load_suite

    db, runs = scored_store(tmp_path)
    suite = load_suite(tmp_path / "suite")
    with Store(db) as store:
        for run_id in runs:  # repeats, wrong answers at different repeats, a cut response
            kept, tallied = kept_and_tallied(store, run_id)
            assert kept and kept == tallied
        # attempts pending the judge or failed by it (excluded), reasons missing on one side
        # or both, and a case whose first failure is written after a later one
        run_id = store.replace_run(suite, "m", "r3", "score", "0", None)
        rows = [("a", 0, "pending_judge", None, None, 0, 0), ("a", 1, "judge_error", "", "", 0, 0),
                ("a", 2, "scored", "wrong tool", None, 0, 0),
                ("b", 3, "scored", "", "bad id", 1, 0), ("b", 1, "scored", None, "", 1, 0),
                ("b", 0, "scored", "", "", 1, 1), ("c", 0, "scored", "t", "u", 0, 0)]
        verdicts = [tuple({"run": run_id, "case_id": c, "repeat": r, "status": s,
                           "tool_reason": tr, "arguments_reason": ar, "calls": 1,
                           "right_tool": t, "right_arguments": a}.get(column)
                          for column in VERDICT_COLUMNS)
                    for c, r, s, tr, ar, t, a in rows]
        store.add_attempts([], verdicts)
        assert store.case_tallies(run_id) == []  # kept once it finishes, not before
        store.finish_run(run_id, {"figures": {"scored": 0, "right_tool": {"pct": None},
                                              "right_arguments": {"pct": None},
                                              "calls_per_task": None}, "by_tag": {}})
        kept, tallied = kept_and_tallied(store, run_id)
    assert kept == tallied
    assert kept["a"] == (1, 0, 0, 2, "wrong tool")
    assert kept["b"] == (3, 3, 1, 0, "") and kept["c"] == (1, 0, 0, 0, "t; u")


def test_the_tallies_of_merged_shards_equal_their_verdicts_tallied(tmp_path: Path) -> None:
    from factories import line, message, tool_call, write_lines

    from callgate.merging.merge import merge_stores
    from callgate.scoring.pipeline import score_file
    from callgate.store.db import Store
    from callgate.suites.shard import Shard
    from callgate.suites.suite import load_suite

    scored_store(tmp_path)  # writes the suite
    suite = load_suite(tmp_path / "suite")
    wrong = message(tool_call("lookup_order", {"order_id": "ord_9"}))
    path = write_lines(tmp_path / "r.jsonl", [
        line(c, wrong, r) for c in "abc" for r in range(2)] + [line("a", message(content="x"), 2)])
    shards = []
    for k in (1, 2):
        with Store(tmp_path / f"shard{k}.db") as store:
            score_file(suite, path, store, model="m", release="r", shard=Shard(index=k, count=2))
        shards.append(tmp_path / f"shard{k}.db")
    merge_stores(tmp_path / "merged.db", shards)
    with Store(tmp_path / "merged.db") as store:
        (run,) = store.runs()
        kept, tallied = kept_and_tallied(store, run["id"])
    assert set(kept) == {"a", "b", "c"} and kept == tallied


def test_a_store_without_kept_tallies_gates_as_one_with_them(tmp_path: Path) -> None:
    from callgate.gating.finding import stored_release
    from callgate.gating.release import decide_release
    from callgate.store.db import Store

    db, runs = scored_store(tmp_path)
    with Store(db) as store:
        kept = [stored_release(store, store.stored_run(run_id)) for run_id in runs]
        decision, _ = decide_release(store, store.stored_run(runs[1]))
        with store.atomic():  # as a store whose runs finished before tallies were kept
            store.db.execute("DELETE FROM case_tallies")
        assert all(store.case_tallies(run_id) == [] for run_id in runs)
        tallied = [stored_release(store, store.stored_run(run_id)) for run_id in runs]
        again, _ = decide_release(store, store.stored_run(runs[1]))
    assert tallied == kept
    assert again.model_dump_json() == decision.model_dump_json()


def test_the_gates_paired_figures_are_clustered_by_case() -> None:
    """Three identical repeats of each case say no more than one attempt per case: the gate's
    table shows the one-attempt interval for both (it showed one sqrt(3) narrower)."""
    once = {f"c{i:03d}": (1, int(i < 70), int(i < 60)) for i in range(100)}
    thrice = {case: (3, 3 * tool, 3 * args) for case, (_, tool, args) in once.items()}
    base_once, base_thrice = release("r1", once), release("r1", thrice)
    for name in ("right_tool", "right_arguments"):
        one, three = getattr(base_once.figures, name), getattr(base_thrice.figures, name)
        assert three.pct == one.pct
        assert (three.low, three.high) == pytest.approx((one.low, one.high), abs=1e-9)
    decision = decide(release("r2", thrice), base_thrice)
    shown = {check.name: check.current for check in decision.checks}
    assert shown["right_arguments"].high - shown["right_arguments"].low == pytest.approx(
        base_once.figures.right_arguments.high - base_once.figures.right_arguments.low)
