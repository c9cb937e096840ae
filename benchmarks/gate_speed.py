"""`callgate gate` at 100,000 cases of one attempt each, many of them flipped.

Usage: uv run python benchmarks/gate_speed.py [CASES] [--keep DIR] [--profile]

Setup (not timed, done once): serve_latency.py's flips store, a suite of CASES cases (the
bundled example's, copied under new ids) and two releases of one attempt a case, r1 answered
as the example's 2026.10 and r2 as its 2026.11, both scored and r1 gated. `--keep DIR` keeps
the store in DIR and reuses it when it is there (the setup takes minutes).

Timed, each best of three, CPU seconds (process time; wall times grow with the machine's load):

- in process: the decision on r2 (`decide_release`: pairing both releases in the store, the
  statistics), `record_gate` (the decision and writing it to the store, what the CLI does),
  and `gate_release` (that, and the release's scores with every case, the API's return);
- `callgate gate` on r2 through the installed CLI, end to end (process start included), CPU
  and wall: with its modules' bytecode cached, as an installed tool runs after its first
  start, and without a bytecode cache (each start compiles every module it imports);
- the reference, in the same run: plain sqlite3 reading both releases' verdict rows.

A store kept from before migration m010 has no per-case tallies: the gate tallies its verdicts
and pairs the records in memory (the output says which path ran). `--profile` prints
cProfile's top functions of one in-process decision. Goal (issue 23 item 7): `gate` under 1 s.
"""

from __future__ import annotations

import cProfile
import os
import pstats
import resource
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from serve_latency import flips_store
from webserver import callgate_script

from callgate.gating.finding import find_current
from callgate.gating.release import decide_release, gate_release, record_gate
from callgate.store.db import Store


def cpu_seconds(fn: Callable[[], object], times: int = 3) -> float:
    best = float("inf")
    for _ in range(times):
        start = time.process_time()
        fn()
        best = min(best, time.process_time() - start)
    return best


def cli_seconds(db: Path, env: dict[str, str], times: int = 3) -> tuple[float, float, int]:
    """The best CPU and wall seconds of `callgate gate` on r2, and its exit code."""
    best, wall, code = float("inf"), float("inf"), -1
    for _ in range(times):
        before, start = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
        done = subprocess.run([callgate_script(), "gate", "--model", "bench", "--release",
                               "r2", "--db", str(db)], capture_output=True, text=True, env=env)
        wall = min(wall, time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if done.returncode not in (0, 1, 3):
            raise SystemExit(f"callgate gate failed: {done.stderr}")
        code = done.returncode
        best = min(best, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return best, wall, code


def cli_environments(cache: Path) -> dict[str, dict[str, str]]:
    """The CLI as installed (its modules' bytecode cached after the first start, here in
    `cache`, warmed before timing), and as started without a bytecode cache (every module
    compiled from source at each start: PYTHONDONTWRITEBYTECODE without .pyc files)."""
    cached = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    cached["PYTHONPYCACHEPREFIX"] = str(cache)
    subprocess.run([callgate_script(), "--version"], capture_output=True, env=cached,
                   check=True)
    uncached = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1",
                "PYTHONPYCACHEPREFIX": str(cache / "none")}
    return {"bytecode cached": cached, "no bytecode cache": uncached}


def build(folder: Path, cases: int) -> Path:
    db = folder / "flips.db"
    if db.exists():
        return db
    start = time.perf_counter()
    flips_store(folder, cases)
    with Store(db) as store:
        gate_release(store, "bench", "r1")
    print(f"setup: {cases:,} cases, two releases scored in {time.perf_counter() - start:.0f} s")
    return db


def measure(db: Path, profile: bool) -> None:
    with sqlite3.connect(db) as conn:
        ids = dict(conn.execute("SELECT release, id FROM runs"))

    def reference() -> None:
        with sqlite3.connect(db) as conn:
            conn.execute("SELECT * FROM verdicts WHERE run IN (?, ?)",
                         [ids["r1"], ids["r2"]]).fetchall()

    with Store(db) as store:
        run = find_current(store, "bench", "r2", None)
        kept = all(store.case_tallies(i) for i in ids.values())
        decision, _ = decide_release(store, run)
        decided = cpu_seconds(lambda: decide_release(store, run))
        recorded = cpu_seconds(lambda: record_gate(store, run))
        gated = cpu_seconds(lambda: gate_release(store, "bench", "r2"))
        if profile:
            profiler = cProfile.Profile()
            profiler.runcall(decide_release, store, run)
            pstats.Stats(profiler).sort_stats("cumulative").print_stats(25)
    sqlite_reading = cpu_seconds(reference)
    with tempfile.TemporaryDirectory() as cache:
        clis = {name: cli_seconds(db, env)
                for name, env in cli_environments(Path(cache)).items()}
    code = clis["bytecode cached"][2]
    worse = sum(c.flipped_worse + c.flipped_better for c in decision.checks[1:])
    print(f"r2 against r1: {decision.shared_cases:,} paired cases, {worse:,} flipped "
          f"(right arguments), outcome {decision.outcome} (CLI exit {code})")
    print("  the cases read from the tallies kept when each run finished" if kept else
          "  no kept tallies (a store from before migration m010): the verdicts tallied")
    print(f"  reference: sqlite3 reading both releases' verdict rows: {sqlite_reading:.3f} s")
    for label, seconds in (("decide_release (in process)", decided),
                           ("record_gate (in process, recorded)", recorded),
                           ("gate_release (recorded, with every case)", gated)):
        print(f"  {label:<45} {seconds:6.3f} s CPU  {seconds / sqlite_reading:5.1f}x sqlite3")
    for name, (cpu, wall, _) in clis.items():
        print(f"  {'callgate gate (CLI, ' + name + ')':<45} {cpu:6.3f} s CPU  "
              f"{cpu / sqlite_reading:5.1f}x sqlite3  ({wall:.3f} s wall)")
    print(f"  goal: callgate gate < 1 s; load average {os.getloadavg()[0]:.1f}")


def main() -> None:
    args = sys.argv[1:]
    profile = "--profile" in args
    keep = None
    if "--keep" in args:
        keep = Path(args[args.index("--keep") + 1])
        del args[args.index("--keep"):args.index("--keep") + 2]
    numbers = [a for a in args if a.isdigit()]
    cases = int(numbers[0]) if numbers else 100_000
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        measure(build(keep, cases), profile)
        return
    with tempfile.TemporaryDirectory() as tmp:
        measure(build(Path(tmp), cases), profile)


if __name__ == "__main__":
    main()
