"""`callgate gate` at 100,000 cases of one attempt each, many of them flipped.

Usage: uv run python benchmarks/gate_speed.py [CASES] [--keep DIR] [--profile]

Setup (not timed, done once): serve_latency.py's flips store, a suite of CASES cases (the
bundled example's, copied under new ids) and two releases of one attempt a case, r1 answered
as the example's 2026.10 and r2 as its 2026.11, both scored and r1 gated. `--keep DIR` keeps
the store in DIR and reuses it when it is there (the setup takes minutes).

Timed, each best of three, CPU seconds (process time; wall times grow with the machine's load):

- in process: the decision on r2 (`decide_release`: reading both releases, pairing, the
  statistics), and `gate_release` (the decision and writing it to the store);
- `callgate gate` on r2 through the installed CLI, end to end (process start included);
- the reference, in the same run: plain sqlite3 reading both releases' verdict rows.

A store kept from before migration m010 has no per-case tallies: the gate tallies its verdicts
(the output says which path ran). `--profile` prints cProfile's top functions of one in-process
decision. Goal (issue 23
item 7): `gate` under 1 s.
"""

from __future__ import annotations

import cProfile
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

from callgate.gating.gate import find_current
from callgate.gating.release import decide_release, gate_release
from callgate.store.db import Store


def cpu_seconds(fn: Callable[[], object], times: int = 3) -> float:
    best = float("inf")
    for _ in range(times):
        start = time.process_time()
        fn()
        best = min(best, time.process_time() - start)
    return best


def cli_seconds(db: Path, times: int = 3) -> tuple[float, int]:
    """The best CPU seconds of `callgate gate` on r2, and its exit code."""
    best, code = float("inf"), -1
    for _ in range(times):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        done = subprocess.run([callgate_script(), "gate", "--model", "bench", "--release",
                               "r2", "--db", str(db)], capture_output=True, text=True)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if done.returncode not in (0, 1, 3):
            raise SystemExit(f"callgate gate failed: {done.stderr}")
        code = done.returncode
        best = min(best, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return best, code


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
        gated = cpu_seconds(lambda: gate_release(store, "bench", "r2"))
        if profile:
            profiler = cProfile.Profile()
            profiler.runcall(decide_release, store, run)
            pstats.Stats(profiler).sort_stats("cumulative").print_stats(25)
    sqlite_reading = cpu_seconds(reference)
    cli, code = cli_seconds(db)
    worse = sum(c.flipped_worse + c.flipped_better for c in decision.checks[1:])
    print(f"r2 against r1: {decision.shared_cases:,} paired cases, {worse:,} flipped "
          f"(right arguments), outcome {decision.outcome} (CLI exit {code})")
    print("  the cases read from the tallies kept when each run finished" if kept else
          "  no kept tallies (a store from before migration m010): the verdicts tallied")
    print(f"  reference: sqlite3 reading both releases' verdict rows: {sqlite_reading:.3f} s")
    for label, seconds in (("decide_release (in process)", decided),
                           ("gate_release (in process, recorded)", gated),
                           ("callgate gate (CLI, process start included)", cli)):
        print(f"  {label:<45} {seconds:6.3f} s CPU  {seconds / sqlite_reading:5.1f}x sqlite3")
    print("  goal: callgate gate < 1 s")


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
