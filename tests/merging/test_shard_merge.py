"""Sharded runs merged back: the installed CLI as subprocesses, on real SQLite files.

Four `callgate run --shard k/4` processes in parallel against the loopback server (and four
`callgate score --shard k/4` over recorded responses), merged with `callgate merge`, give the
figures, verdicts and gate decision of one unsharded run. Merging again changes nothing;
stores that disagree are refused, naming the case; a missing shard makes the gate
inconclusive, naming it."""

from __future__ import annotations

import hashlib
import json
import shutil
import signal
import sqlite3
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from conftest import lookup_case, marker, no_call_case, write_suite
from loopback import Loopback, ok, tool_call
from paths import EXAMPLES

from callgate.scoring.scores import percentile
from callgate.suites.shard import shard_of

EXAMPLE = EXAMPLES / "order_store"
SCORED_COLUMNS = ("case_id", "repeat", "status", "tool", "tool_reason", "arguments",
                  "schema_kind", "arguments_reason", "calls", "right_tool", "right_arguments")


def callgate(exe: str, env: dict[str, str], cwd: Path, *args: str
             ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([exe, *args], env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=120)


def dump_hash(db: Path) -> str:
    with sqlite3.connect(db) as conn:
        return hashlib.sha256("\n".join(conn.iterdump()).encode()).hexdigest()


def release_run(db: Path, release: str) -> dict[str, Any]:
    with sqlite3.connect(db) as conn:
        conn.row_factory = sqlite3.Row
        rows = conn.execute("SELECT * FROM runs WHERE release = ? AND status = 'done' "
                            "ORDER BY id DESC", [release]).fetchall()
    assert len(rows) == 1, [dict(r) for r in rows]
    return dict(rows[0])


def verdict_rows(db: Path, release: str) -> list[tuple]:
    run_id = release_run(db, release)["id"]
    with sqlite3.connect(db) as conn:
        return conn.execute(f"SELECT {', '.join(SCORED_COLUMNS)} FROM verdicts WHERE run = ? "
                            "ORDER BY case_id, repeat", [run_id]).fetchall()


def scores_of(db: Path, release: str) -> dict[str, Any]:
    scores = json.loads(release_run(db, release)["scores"])
    cost = scores.pop("cost_usd")  # a float sum: the order of the additions may differ
    return {**scores, "cost_usd": None if cost is None else round(cost, 9)}


def gate_json(exe: str, env: dict[str, str], cwd: Path, db: Path, release: str,
              *extra: str) -> tuple[int, dict[str, Any]]:
    done = callgate(exe, env, cwd, "gate", "-m", "router", "--release", release, "--db",
                    str(db), "--json", *extra)
    assert done.returncode in (0, 1, 3), done.stderr
    decision = json.loads(done.stdout)
    decision.pop("baseline_source", None)  # names the store it read
    # latency per right answer is wall-clock, different in every run
    decision["messages"] = [m for m in decision["messages"] if "per right answer" not in m]
    return done.returncode, decision


# ----------------------------------------------------------------------------- live runs

CASES = [lookup_case(f"c{i:02d}", order=f"ord_{i}") for i in range(20)] + [
    no_call_case(f"h{i:02d}") for i in range(6)]


def script(loopback: Loopback, good: bool) -> None:
    """Per case, the replies to its repeats in order: some right, some wrong value, some wrong
    tool, some a needless call; `good` answers every lookup right (the baseline release)."""
    loopback.reset()
    for i in range(20):
        right = ok(calls=[tool_call("lookup_order", {"order_id": f"ord_{i}"})])
        wrong_value = ok(calls=[tool_call("lookup_order", {"order_id": "ord_999"})])
        wrong_tool = ok(calls=[tool_call("cancel_order", {"order_id": f"ord_{i}"})])
        replies = ([right] if good or i % 4 == 0 else
                   [right, wrong_value, right] if i % 4 == 1 else
                   [wrong_tool] if i % 4 == 2 else [wrong_value, right])
        loopback.script(marker(f"c{i:02d}"), *replies)
    for i in range(6):
        loopback.script(marker(f"h{i:02d}"), ok(content="Nine to five.") if good or i % 2 else
                        ok(calls=[tool_call("lookup_order", {"order_id": "ord_1"})]))


def config(tmp_path: Path, loopback: Loopback) -> Path:
    path = tmp_path / "callgate.toml"
    path.write_text("\n".join([
        "[[candidates]]", 'name = "router"', 'model = "openrouter/test/model"',
        f'api_base = "{loopback.base_url}"', 'api_key_env = "CALLGATE_TEST_KEY"']) + "\n")
    return path


def run_args(suite: Path, cfg: Path, release: str, db: Path) -> list[str]:
    # One request at a time in each process, so each case's scripted replies reach its
    # repeats in order; the four shard processes run at once.
    return ["run", str(suite), "-m", "router", "-k", "3", "-c", "1", "--config", str(cfg),
            "--release", release, "--db", str(db), "--json"]


@pytest.mark.slow
def test_four_parallel_shard_runs_merge_into_the_unsharded_run(
    loopback: Loopback, tmp_path: Path, callgate_exe: str, cli_env: dict[str, str]
) -> None:
    suite = write_suite(tmp_path / "suite", CASES)
    cfg = config(tmp_path, loopback)
    assert {shard_of(c["id"], 4) for c in CASES} == {1, 2, 3, 4}

    script(loopback, good=True)
    first = callgate(callgate_exe, cli_env, tmp_path, *run_args(suite, cfg, "r1", tmp_path /
                                                                 "base.db"))
    assert first.returncode == 0, first.stderr
    baseline = tmp_path / "releases" / "r1.json"
    done = callgate(callgate_exe, cli_env, tmp_path, "gate", "-m", "router", "--release", "r1",
                    "--db", str(tmp_path / "base.db"), "--scores-out", str(baseline))
    assert done.returncode == 0, done.stderr

    script(loopback, good=False)
    whole = tmp_path / "whole.db"
    unsharded = callgate(callgate_exe, cli_env, tmp_path, *run_args(suite, cfg, "r2", whole))
    assert unsharded.returncode == 0, unsharded.stderr

    script(loopback, good=False)
    processes = [subprocess.Popen(
        [callgate_exe, *run_args(suite, cfg, "r2", tmp_path / f"shard{k}.db"), "--shard",
         f"{k}/4"], env=cli_env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True) for k in range(1, 5)]
    for k, process in enumerate(processes, start=1):
        out, err = process.communicate(timeout=120)
        assert process.returncode == 0, err
        attempts = json.loads(out)["attempts"]
        assert attempts and {shard_of(a["case_id"], 4) for a in attempts} == {k}
    assert len(loopback.requests) == len(CASES) * 3  # the shards called each attempt once

    merged = tmp_path / "merged.db"
    shards = [str(tmp_path / f"shard{k}.db") for k in (3, 1, 4, 2)]
    done = callgate(callgate_exe, cli_env, tmp_path, "merge", str(merged), *shards)
    assert done.returncode == 0, done.stderr
    assert "shards 1, 2, 3, 4 of 4" in done.stdout

    assert verdict_rows(merged, "r2") == verdict_rows(whole, "r2")
    assert len(verdict_rows(merged, "r2")) == len(CASES) * 3
    # wall-clock: differ from run to run
    measured = ("latency_p50_ms", "latency_p95_ms", "latency_per_right_ms")
    merged_scores, whole_scores = scores_of(merged, "r2"), scores_of(whole, "r2")
    latencies = sorted(latency for k in range(1, 5) for latency in sqlite3.connect(
        tmp_path / f"shard{k}.db").execute("SELECT latency_ms FROM responses").fetchall())
    assert merged_scores["latency_p50_ms"] == percentile([x for (x,) in latencies], 50)
    assert ({k: v for k, v in merged_scores.items() if k not in measured}
            == {k: v for k, v in whole_scores.items() if k not in measured})
    assert merged_scores["figures"]["right_arguments"]["pct"] < 100
    code_whole, decision_whole = gate_json(callgate_exe, cli_env, tmp_path, whole, "r2",
                                           "--baseline", str(baseline))
    code_merged, decision_merged = gate_json(callgate_exe, cli_env, tmp_path, merged, "r2",
                                             "--baseline", str(baseline))
    assert code_whole == code_merged == 1  # a regression either way
    assert decision_merged == decision_whole


# ----------------------------------------------------------------------------- recorded

def score_shards(exe: str, env: dict[str, str], tmp_path: Path, count: int,
                 responses: str = "responses-2026.11.jsonl", release: str = "2026.11"
                 ) -> list[Path]:
    dbs = []
    for k in range(1, count + 1):
        db = tmp_path / f"{release}-shard{k}.db"
        done = callgate(exe, env, tmp_path, "score", str(EXAMPLE), "-r", str(EXAMPLE / responses),
                        "-m", "router", "--release", release, "--shard", f"{k}/{count}",
                        "--db", str(db))
        assert done.returncode == 0, done.stderr
        dbs.append(db)
    return dbs


def score_whole(exe: str, env: dict[str, str], tmp_path: Path, db: Path) -> None:
    for responses, release in (("responses-2026.10.jsonl", "2026.10"),
                               ("responses-2026.11.jsonl", "2026.11")):
        done = callgate(exe, env, tmp_path, "score", str(EXAMPLE), "-r",
                        str(EXAMPLE / responses), "-m", "router", "--release", release,
                        "--db", str(db))
        assert done.returncode == 0, done.stderr


@pytest.mark.slow
def test_scored_shards_merge_into_the_unsharded_release_and_merging_twice_is_a_no_op(
    tmp_path: Path, callgate_exe: str, cli_env: dict[str, str]
) -> None:
    whole = tmp_path / "whole.db"
    score_whole(callgate_exe, cli_env, tmp_path, whole)
    old = score_shards(callgate_exe, cli_env, tmp_path, 4, "responses-2026.10.jsonl", "2026.10")
    new = score_shards(callgate_exe, cli_env, tmp_path, 4)
    merged = tmp_path / "merged.db"
    done = callgate(callgate_exe, cli_env, tmp_path, "merge", str(merged), *map(str, old + new))
    assert done.returncode == 0, done.stderr
    for release in ("2026.10", "2026.11"):
        assert verdict_rows(merged, release) == verdict_rows(whole, release)
        assert scores_of(merged, release) == scores_of(whole, release)
    assert gate_json(callgate_exe, cli_env, tmp_path, merged, "2026.10") == gate_json(
        callgate_exe, cli_env, tmp_path, whole, "2026.10")
    assert gate_json(callgate_exe, cli_env, tmp_path, merged, "2026.11") == gate_json(
        callgate_exe, cli_env, tmp_path, whole, "2026.11")

    before = dump_hash(merged)
    again = callgate(callgate_exe, cli_env, tmp_path, "merge", "--into", str(merged),
                     str(new[2]), *map(str, old))
    assert again.returncode == 0, again.stderr
    assert "nothing new" in again.stdout
    assert dump_hash(merged) == before

    # A person's label given in one shard's store (serve's calibration session) is copied,
    # once however often that store is merged.
    from callgate.store.db import Store

    with Store(new[0]) as shard_store:
        shard_store.add_person_label("set.jsonl", "i1", "ana", "pass", "n/a", "n", "{}")
    for _ in range(2):
        assert callgate(callgate_exe, cli_env, tmp_path, "merge", "--into", str(merged),
                        str(new[0])).returncode == 0
    with Store(merged) as merged_store:
        assert [(r["item_id"], r["labeller"]) for r in merged_store.person_labels("set.jsonl")
                ] == [("i1", "ana")]


@pytest.mark.slow
def test_a_missing_shard_makes_the_gate_inconclusive_naming_it(
    tmp_path: Path, callgate_exe: str, cli_env: dict[str, str]
) -> None:
    shards = score_shards(callgate_exe, cli_env, tmp_path, 4)
    merged = tmp_path / "merged.db"
    done = callgate(callgate_exe, cli_env, tmp_path, "merge", str(merged),
                    str(shards[0]), str(shards[1]), str(shards[3]))
    assert done.returncode == 0, done.stderr
    assert "(missing 3)" in done.stdout
    gated = callgate(callgate_exe, cli_env, tmp_path, "gate", "-m", "router", "--release",
                     "2026.11", "--db", str(merged))
    assert gated.returncode == 3, gated.stdout + gated.stderr
    assert "shard(s) 3/4" in gated.stderr and "Traceback" not in gated.stderr
    # Recorded: the release is never a later one's baseline.
    assert json.loads(release_run(merged, "2026.11")["gate"])["outcome"] == "inconclusive"
    # A single shard's own store is no more a whole release than the merge.
    alone = callgate(callgate_exe, cli_env, tmp_path, "gate", "-m", "router", "--release",
                     "2026.11", "--db", str(shards[1]))
    assert alone.returncode == 3 and "1/4, 3/4, 4/4" in alone.stderr
    # With the last shard merged in, the release is whole and the gate decides.
    done = callgate(callgate_exe, cli_env, tmp_path, "merge", "--into", str(merged),
                    str(shards[2]))
    assert done.returncode == 0, done.stderr
    gated = callgate(callgate_exe, cli_env, tmp_path, "gate", "-m", "router", "--release",
                     "2026.11", "--db", str(merged))
    assert gated.returncode == 0, gated.stdout + gated.stderr


@pytest.mark.slow
def test_every_gate_output_holds_the_decision_on_a_release_missing_shards(
    tmp_path: Path, callgate_exe: str, cli_env: dict[str, str]
) -> None:
    """A CI step that parses `gate --json` (or reads the JUnit or Markdown file) gets the
    inconclusive decision, not nothing; the reason stays on stderr and the exit code is 3."""
    db = tmp_path / "c.db"
    score_whole(callgate_exe, cli_env, tmp_path, db)  # 2026.10 (the baseline) and 2026.11
    done = callgate(callgate_exe, cli_env, tmp_path, "score", str(EXAMPLE), "-r",
                    str(EXAMPLE / "responses-2026.11.jsonl"), "-m", "router", "--release",
                    "2026.12", "--shard", "1/2", "--db", str(db))
    assert done.returncode == 0, done.stderr
    gated = callgate(callgate_exe, cli_env, tmp_path, "gate", "-m", "router", "--release",
                     "2026.12", "--db", str(db), "--baseline", "auto", "--json",
                     "--junit", "junit.xml", "--markdown", "summary.md",
                     "--scores-out", "releases/2026.12.json")
    assert gated.returncode == 3, gated.stdout + gated.stderr
    decision = json.loads(gated.stdout)
    assert decision["outcome"] == "inconclusive" and decision["exit_code"] == 3
    assert "missing shard(s) 2/2" in decision["messages"][0]
    assert decision["baseline_release"] == "2026.11" and decision["shared_cases"] > 0
    assert {"checks", "worse", "better", "warnings"} <= set(decision)
    assert gated.stderr.startswith("inconclusive: ") and "shard(s) 2/2" in gated.stderr
    assert "Traceback" not in gated.stderr

    gate_suite = ET.parse(tmp_path / "junit.xml").getroot().find(
        "testsuite[@name='order-store.gate']")
    assert gate_suite is not None and gate_suite.get("errors") == "1"
    error = gate_suite.find("testcase[@name='inconclusive']/error")
    assert error is not None and "shard(s) 2/2" in error.get("message", "")
    summary = (tmp_path / "summary.md").read_text()
    assert "gate INCONCLUSIVE" in summary and "shard(s) 2/2" in summary
    kept = json.loads((tmp_path / "releases" / "2026.12.json").read_text())
    assert kept["gate"]["outcome"] == "inconclusive" and kept["gate"]["released"] is False
    assert json.loads(release_run(db, "2026.12")["gate"])["outcome"] == "inconclusive"

    text = callgate(callgate_exe, cli_env, tmp_path, "gate", "-m", "router", "--release",
                    "2026.12", "--db", str(db))
    assert text.returncode == 3
    assert "gate INCONCLUSIVE" in text.stdout and "shard(s) 2/2" in text.stderr


@pytest.mark.slow
def test_shards_that_disagree_are_refused_naming_the_case(
    tmp_path: Path, callgate_exe: str, cli_env: dict[str, str]
) -> None:
    shards = score_shards(callgate_exe, cli_env, tmp_path, 2)
    # The same shard scored again from responses where one attempt differs.
    lines = (EXAMPLE / "responses-2026.11.jsonl").read_text().splitlines()
    changed_case = None
    for index, text in enumerate(lines):
        doc = json.loads(text)
        if shard_of(doc["case_id"], 2) == 1 and doc.get("repeat", 0) == 0:
            doc["turns"] = [{"role": "assistant", "content": "I cannot help with that."}]
            lines[index], changed_case = json.dumps(doc), doc["case_id"]
            break
    assert changed_case is not None
    altered = tmp_path / "altered.jsonl"
    altered.write_text("\n".join(lines) + "\n")
    other = tmp_path / "other" / "shard1.db"
    other.parent.mkdir()
    done = callgate(callgate_exe, cli_env, tmp_path, "score", str(EXAMPLE), "-r", str(altered),
                    "-m", "router", "--release", "2026.11", "--shard", "1/2", "--db", str(other))
    assert done.returncode == 0, done.stderr

    merged = tmp_path / "merged.db"
    done = callgate(callgate_exe, cli_env, tmp_path, "merge", str(merged), *map(str, shards))
    assert done.returncode == 0, done.stderr
    before = dump_hash(merged)
    refused = callgate(callgate_exe, cli_env, tmp_path, "merge", "--into", str(merged),
                       str(other))
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert f"case {changed_case!r} repeat 0 was scored differently" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert dump_hash(merged) == before  # nothing half-written

    # A refused merge into a new store leaves no store behind.
    fresh = tmp_path / "fresh.db"
    refused = callgate(callgate_exe, cli_env, tmp_path, "merge", str(fresh), str(shards[0]),
                       str(shards[1]), str(other))
    assert refused.returncode == 2
    assert not fresh.exists()

    # Shards of one release from another suite, another callgate or another N.
    changed = tmp_path / "suite2"
    shutil.copytree(EXAMPLE, changed)
    cases = (changed / "cases.jsonl").read_text().splitlines()
    first = json.loads(cases[0])
    first["tags"] = [*first.get("tags", []), "edited"]
    (changed / "cases.jsonl").write_text("\n".join([json.dumps(first), *cases[1:]]) + "\n")
    edited = tmp_path / "edited.db"
    done = callgate(callgate_exe, cli_env, tmp_path, "score", str(changed), "-r",
                    str(EXAMPLE / "responses-2026.11.jsonl"), "-m", "router", "--release",
                    "2026.11", "--shard", "2/2", "--db", str(edited))
    assert done.returncode == 0, done.stderr
    refused = callgate(callgate_exe, cli_env, tmp_path, "merge", "--into", str(merged),
                       str(edited))
    assert refused.returncode == 2 and "suite fingerprint" in refused.stderr
    with sqlite3.connect(shards[1]) as conn:
        conn.execute("UPDATE runs SET callgate_version = '0.0.1'")
    refused = callgate(callgate_exe, cli_env, tmp_path, "merge", "--into", str(merged),
                       str(shards[1]))
    assert refused.returncode == 2 and "callgate version" in refused.stderr
    thirds = score_shards(callgate_exe, cli_env, tmp_path / "other", 3)
    refused = callgate(callgate_exe, cli_env, tmp_path, "merge", "--into", str(merged),
                       str(thirds[0]))
    assert refused.returncode == 2 and "number of shards" in refused.stderr
    assert dump_hash(merged) == before


@pytest.mark.slow
@pytest.mark.parametrize("args, message", [
    (["merge", "only.db"], "name the new store"),
    (["merge", "--into", "nope.db", "x.db"], "no such store"),
])
def test_merge_usage_errors(tmp_path: Path, callgate_exe: str, cli_env: dict[str, str],
                            args: list[str], message: str) -> None:
    done = callgate(callgate_exe, cli_env, tmp_path, *args)
    assert done.returncode == 2 and message in done.stderr


@pytest.mark.slow
def test_a_release_missing_shards_is_never_a_baseline(
    tmp_path: Path, callgate_exe: str, cli_env: dict[str, str]
) -> None:
    old = score_shards(callgate_exe, cli_env, tmp_path, 2, "responses-2026.10.jsonl", "2026.10")
    store = tmp_path / "store.db"
    done = callgate(callgate_exe, cli_env, tmp_path, "merge", str(store), str(old[1]))
    assert done.returncode == 0, done.stderr
    done = callgate(callgate_exe, cli_env, tmp_path, "score", str(EXAMPLE), "-r",
                    str(EXAMPLE / "responses-2026.11.jsonl"), "-m", "router", "--release",
                    "2026.11", "--db", str(store))
    assert done.returncode == 0, done.stderr
    code, decision = gate_json(callgate_exe, cli_env, tmp_path, store, "2026.11")
    assert code == 0 and decision["baseline_release"] is None  # first whole release
    assert any("release 2026.10 is not a baseline" in note and "shard(s) 1/2" in note
               for note in decision["warnings"]), decision


@pytest.mark.slow
def test_merge_keeps_a_refused_release_refused(
    tmp_path: Path, callgate_exe: str, cli_env: dict[str, str]
) -> None:
    """A release its gate refused is not a baseline after a merge either: merging copies the
    decision, and attempts merged into a refused release do not lift the refusal."""
    support = EXAMPLE.parent / "order_support"
    good, bad = support / "responses-2026.10.jsonl", support / "responses-2026.11.jsonl"

    def cg(db: Path, *args: str) -> subprocess.CompletedProcess:
        return callgate(callgate_exe, cli_env, tmp_path, *args, "--db", str(db))

    source = tmp_path / "t.db"
    assert cg(source, "score", str(support), "-r", str(good), "-m", "a", "--release",
              "r1").returncode == 0
    assert cg(source, "gate", "-m", "a", "--release", "r1").returncode == 0
    assert cg(source, "score", str(support), "-r", str(bad), "-m", "a", "--release",
              "r2").returncode == 0
    assert cg(source, "gate", "-m", "a", "--release", "r2").returncode == 1

    merged = tmp_path / "m.db"
    assert callgate(callgate_exe, cli_env, tmp_path, "merge", str(merged),
                    str(source)).returncode == 0
    assert cg(merged, "score", str(support), "-r", str(bad), "-m", "a", "--release",
              "r3").returncode == 0
    gated = cg(merged, "gate", "-m", "a", "--release", "r3", "--json")
    assert gated.returncode == 1, gated.stdout + gated.stderr
    assert json.loads(gated.stdout)["baseline_release"] == "r1"

    # Attempts added to the refused r2 by a merge leave it refused.
    extra = tmp_path / "extra.db"
    assert callgate(callgate_exe, cli_env, tmp_path, "score", str(support), "-r", str(bad),
                    "-m", "a", "--release", "r2", "--db", str(extra)).returncode == 0
    with sqlite3.connect(extra) as conn:  # the same answers as another repeat: new attempts
        conn.execute("UPDATE verdicts SET repeat = repeat + 100")
        conn.execute("UPDATE responses SET repeat = repeat + 100")
    assert callgate(callgate_exe, cli_env, tmp_path, "merge", "--into", str(merged),
                    str(extra)).returncode == 0
    gated = cg(merged, "gate", "-m", "a", "--release", "r3", "--json")
    assert json.loads(gated.stdout)["baseline_release"] == "r1", gated.stdout


@pytest.mark.slow
def test_a_calibration_item_labelled_differently_is_refused(
    tmp_path: Path, callgate_exe: str, cli_env: dict[str, str]
) -> None:
    from callgate.store.db import Store

    one, two = tmp_path / "one.db", tmp_path / "two.db"
    with Store(one) as store:
        store.save_calibration_items("set.jsonl", [("i1", "test", "pass", "pass", "{}")])
    with Store(two) as store:
        store.save_calibration_items("set.jsonl", [("i1", "test", "pass", "fail", "{}")])
    before = dump_hash(one)
    refused = callgate(callgate_exe, cli_env, tmp_path, "merge", "--into", str(one), str(two))
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "item i1 is labelled pass/fail (test) there and pass/pass (test)" in refused.stderr
    assert dump_hash(one) == before
    shutil.copyfile(one, tmp_path / "copy.db")  # the same labels merge as a no-op
    same = callgate(callgate_exe, cli_env, tmp_path, "merge", "--into", str(one),
                    str(tmp_path / "copy.db"))
    assert same.returncode == 0, same.stderr
    assert dump_hash(one) == before


# A merge into a new store that is killed part-way: _rescore_merged runs after every row of
# the inputs has been copied into the new store (inside its transaction), so a SIGKILL there is
# a kill in the middle of the merge.
KILLED_MERGE = """
import os, signal, sys
from pathlib import Path
import callgate.merging.merge as merge
def killed(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGKILL)
merge._rescore_merged = killed
merge.merge_stores(Path(sys.argv[1]), [Path(p) for p in sys.argv[2:]])
"""


@pytest.mark.slow
def test_a_merge_killed_half_way_leaves_no_store_and_can_be_run_again(
    tmp_path: Path, callgate_exe: str, cli_env: dict[str, str]
) -> None:
    shards = score_shards(callgate_exe, cli_env, tmp_path, 2)
    out = tmp_path / "merged.db"
    killed = subprocess.run([sys.executable, "-c", KILLED_MERGE, str(out), *map(str, shards)],
                            env=cli_env, cwd=tmp_path, capture_output=True, text=True,
                            timeout=120)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert not out.exists()  # before: an empty store, which the same command then refused
    again = callgate(callgate_exe, cli_env, tmp_path, "merge", str(out), *map(str, shards))
    assert again.returncode == 0, again.stderr
    whole = tmp_path / "whole.db"
    done = callgate(callgate_exe, cli_env, tmp_path, "score", str(EXAMPLE), "-r",
                    str(EXAMPLE / "responses-2026.11.jsonl"), "-m", "router", "--release",
                    "2026.11", "--db", str(whole))
    assert done.returncode == 0, done.stderr
    assert verdict_rows(out, "2026.11") == verdict_rows(whole, "2026.11")
    # Only the killed run's temporary file is left beside it, named as one.
    assert sorted(p.name for p in tmp_path.glob(".merged.db.*")) != []
    assert all(p.name.endswith((".merging", ".merging-wal", ".merging-shm"))
               for p in tmp_path.glob(".merged.db.*"))


@pytest.mark.slow
def test_merge_inputs_are_read_only_and_never_written(
    tmp_path: Path, callgate_exe: str, cli_env: dict[str, str]
) -> None:
    """An input is opened read-only: a read-only store merges, its bytes stay as they were;
    a 0-byte file, a text file and a SQLite file without tables are refused (exit 2, one line
    naming the input) and stay as they were, and no output store is made."""
    (shard,) = score_shards(callgate_exe, cli_env, tmp_path, 1)
    shard.chmod(0o444)
    before = hashlib.sha256(shard.read_bytes()).hexdigest()
    done = callgate(callgate_exe, cli_env, tmp_path, "merge", "merged.db", str(shard))
    assert done.returncode == 0, done.stderr
    assert hashlib.sha256(shard.read_bytes()).hexdigest() == before
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    text = tmp_path / "notes.db"
    text.write_text("not a store\n")
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE t (x)")
    conn.close()
    for path, words in ((empty, "an empty file"), (text, "not a SQLite database"),
                        (other, "another program's SQLite database")):
        kept = path.read_bytes()
        refused = callgate(callgate_exe, cli_env, tmp_path, "merge", "new.db", str(shard),
                           str(path))
        assert refused.returncode == 2, refused.stdout + refused.stderr
        lines = refused.stderr.splitlines()
        assert len(lines) == 1 and str(path) in lines[0] and words in lines[0], lines
        assert path.read_bytes() == kept
        assert not (tmp_path / "new.db").exists()
        assert not list(tmp_path.glob(".new.db.*"))
