"""`--max-cost` and `--max-attempts`: a live run against the loopback model stops cleanly when
its budget is reached (every attempt it started finished and stored), within one attempt's
cost of it, marked so, and resumes calling only what it had not answered; the gate decides on
what was paired and says the budget ended it. Cost and latency per right answer are figures
beside the shares, with their change against the baseline."""

from __future__ import annotations

import json
import random
import subprocess
from pathlib import Path

import pytest
from conftest import KEY, KEY_ENV, marker, no_call_case, write_suite
from live_runs import candidate, config, rows, run, settings
from loopback import Loopback, ok

from callgate import gate_release
from callgate.report.history import history_rows
from callgate.running.run import run_live
from callgate.store.db import Store
from callgate.suites.suite import load_suite


def _suite(tmp_path: Path, cases: int) -> Path:
    return write_suite(tmp_path / "suite", [no_call_case(f"c{n:02d}") for n in range(cases)])


def test_max_cost_stops_within_one_attempt_of_the_budget_and_resumes(
    loopback: Loopback, tmp_path: Path
) -> None:
    rng = random.Random(7)
    costs = {f"c{n:02d}": round(rng.uniform(0.004, 0.02), 4) for n in range(30)}
    for case_id, cost in costs.items():
        loopback.script(marker(case_id), ok(content="9 to 5", cost=cost))
    suite = load_suite(_suite(tmp_path, 30))
    budget = 0.1
    live = run(tmp_path, suite, loopback, settings(concurrency=4, max_cost=budget))
    assert live.budget is not None and live.budget.startswith("--max-cost $0.1 reached")
    spent = sum(costs[r.marker[1:4]] for r in loopback.requests)
    assert live.spend == pytest.approx(spent)
    most = max(costs.values())
    assert budget - most < spent <= budget + most, (spent, most)
    called = len(loopback.requests)
    assert live.called == called < 30
    # Nothing half-written: every call made is stored and scored; the run is finished, marked
    # as ended by the budget and not released.
    stored = rows(tmp_path, "SELECT count(*) AS n FROM live_responses")[0]["n"]
    assert stored == called == live.result.scores.attempts
    run_row = rows(tmp_path, "SELECT status, scores, gate FROM runs")[0]
    assert run_row["status"] == "done"
    assert json.loads(run_row["scores"])["stopped"] == live.budget
    assert json.loads(run_row["gate"])["released"] is False
    # Resumed without the budget: only the attempts not answered are called.
    again = run(tmp_path, suite, loopback)
    assert again.cached == called and again.called == 30 - called and again.budget is None
    assert len(loopback.requests) == 30


def test_max_attempts_calls_exactly_that_many_with_attempts_in_flight(
    loopback: Loopback, tmp_path: Path
) -> None:
    loopback.script("[c", ok(content="9 to 5", cost=0.001))
    suite = load_suite(_suite(tmp_path, 20))
    live = run(tmp_path, suite, loopback, settings(concurrency=8, max_attempts=7))
    assert live.called == 7 == len(loopback.requests)
    assert live.budget == "--max-attempts 7 reached; 7 of 20 attempts called"
    # A budget the plan fits in ends nothing.
    more = run(tmp_path, suite, loopback, settings(concurrency=8, max_attempts=13))
    assert more.called == 13 and more.cached == 7 and more.budget is None


def test_max_cost_with_answers_that_cannot_be_priced_stops_at_the_first(
    loopback: Loopback, tmp_path: Path
) -> None:
    loopback.script("[c", ok(content="9 to 5", cost=None))  # OpenRouter without usage.cost
    suite = load_suite(_suite(tmp_path, 10))
    live = run(tmp_path, suite, loopback, settings(concurrency=4, max_cost=1.0))
    assert live.called == 1 and live.budget is not None
    assert "cost is not known" in live.budget


@pytest.mark.slow
def test_the_cli_stops_on_the_budget_and_the_gate_decides_on_what_was_paired(
    loopback: Loopback, tmp_path: Path, callgate_exe: str, cli_env: dict[str, str]
) -> None:
    loopback.script("[c", ok(content="9 to 5", cost=0.01))
    suite = _suite(tmp_path, 20)
    cfg = config(tmp_path, loopback)

    def callgate(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([callgate_exe, *args], env=cli_env, cwd=tmp_path,
                              capture_output=True, text=True, timeout=120)

    base = ["run", str(suite), "-m", "router", "-k", "1", "--config", str(cfg), "--db", "c.db"]
    first = callgate(*base, "--release", "r1")
    assert first.returncode == 0, first.stderr
    assert callgate("gate", "-m", "router", "--release", "r1", "--db", "c.db").returncode == 0
    loopback.script("[c", ok(content="9 to 5", cost=0.01))
    cut = callgate(*base, "--release", "r2", "--no-cache", "--max-cost", "0.045",
                   "--concurrency", "2")
    assert cut.returncode == 3, cut.stdout + cut.stderr
    assert "budget: --max-cost $0.045 reached" in " ".join(cut.stderr.split())
    assert KEY not in cut.stdout + cut.stderr and KEY_ENV in cli_env
    gated = callgate("gate", "-m", "router", "--release", "r2", "--db", "c.db", "--json")
    decision = json.loads(gated.stdout)
    # 4 of the 20 cases answered: the 16 others are missing, too many to pass on.
    assert gated.returncode == 3, gated.stdout
    assert any(w.startswith("the budget ended this run (--max-cost $0.045 reached")
               for w in decision["warnings"]), decision
    assert decision["shared_cases"] == 4


def test_cost_and_latency_per_right_answer_beside_the_figures_with_their_change(
    loopback: Loopback, tmp_path: Path
) -> None:
    suite = load_suite(_suite(tmp_path, 10))
    with Store(tmp_path / "callgate.db") as store:
        loopback.script("[c", ok(content="9 to 5", cost=0.01))
        first = run_live(suite, candidate(loopback), store, release="r1",
                         settings=settings(), environ={KEY_ENV: KEY})
        # r2: the five odd cases make a needless call (wrong), the same price each.
        loopback.reset()
        loopback.script("[c", ok(content="9 to 5", cost=0.01))
        for n in range(1, 10, 2):
            loopback.script(marker(f"c{n:02d}"), ok(calls=[{
                "id": "x", "type": "function",
                "function": {"name": "lookup_order", "arguments": '{"order_id": "ord_1"}'}}],
                cost=0.01))
        second = run_live(suite, candidate(loopback), store, release="r2",
                          settings=settings(cache=False), environ={KEY_ENV: KEY})
        now, then = second.result.scores, first.result.scores
        assert then.cost_per_right_usd == pytest.approx(0.01)
        assert now.cost_per_right_usd == pytest.approx(0.1 / 5)
        latencies = [r["latency_ms"] for r in store.db.query(
            "SELECT latency_ms FROM responses WHERE run = ?", [second.result.run_id])]
        assert now.latency_per_right_ms == pytest.approx(sum(latencies) / 5)
        assert gate_release(store, "cand", "r1")[0].exit_code == 0
        decision, _ = gate_release(store, "cand", "r2")
        assert any(m.startswith("cost per right answer $0.0200 (baseline $0.0100, +100%); "
                                "latency per right answer ") for m in decision.messages)
        history = history_rows(store.stored_runs("cand"))
        assert history[-1].cost_per_right_usd == pytest.approx(0.02)
        assert history[-1].change_cost_per_right_pct == pytest.approx(100)
