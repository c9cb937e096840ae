"""Merge 8 shard stores of 125,000 attempts each (1,000,000 in all): wall time and peak RSS.

Usage: uv run python benchmarks/merge_shards.py [--scale F] [--shards N]

The suite is the bundled order_support example with its cases copied under new ids (40,000
cases at scale 1), each answered 25 times like its original. Each shard's responses are scored
into its own store with `--shard K/N` through the Python API (setup, timed apart); the timed
part is the installed `callgate merge OUT.db SHARD1.db ...` in its own process, whose peak RSS
is read from the kernel. The reference, measured in the same run on the same stores: plain
SQLite copying the same response and verdict rows (ATTACH and INSERT ... SELECT, no checks),
the least any merge that copies the rows must do. Then merging one shard again (`--into`,
nothing new) and recomputing the release's scores from its verdicts are timed.
--scale 0.1 makes 1/10 of the cases (100,000 attempts); the figures printed say so.
Goal (issue 17): under 30 s and 300 MB at scale 1 on one core.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from score_memory import WRAPPER, make_suite

from callgate.scoring.pipeline import score_file
from callgate.store.db import Store
from callgate.suites.shard import Shard, shard_of
from callgate.suites.suite import load_suite

REPEATS = 25
CASES = 40_000


def write_shard_responses(folder: Path, plan: list[tuple[str, list[str]]], count: int
                          ) -> list[Path]:
    paths = [folder / f"responses-{k}.jsonl" for k in range(1, count + 1)]
    handles = [path.open("w") for path in paths]
    try:
        for case_id, texts in plan:
            if not texts:
                continue
            out = handles[shard_of(case_id, count) - 1]
            for repeat in range(REPEATS):
                item = json.loads(texts[repeat % len(texts)])
                item["case_id"], item["repeat"] = case_id, repeat
                out.write(json.dumps(item) + "\n")
    finally:
        for handle in handles:
            handle.close()
    return paths


def timed_cli(*args: str) -> tuple[float, float, str]:
    """(wall seconds, peak RSS MB, stdout) of the installed CLI in its own process."""
    cli = Path(sys.executable).with_name("callgate")
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", WRAPPER, str(cli), *args],
                          capture_output=True, text=True, check=True)
    wall = time.perf_counter() - start
    code, rss_kb = done.stdout.split()
    if code != "0":
        raise SystemExit(f"callgate {args[0]} failed ({code}): {done.stderr}")
    return wall, int(rss_kb) / 1024, done.stderr


def plain_copy(out: Path, stores: list[Path]) -> float:
    start = time.perf_counter()
    conn = sqlite3.connect(out, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    with sqlite3.connect(stores[0]) as first:
        for table in ("responses", "verdicts"):
            ddl = first.execute("SELECT sql FROM sqlite_master WHERE name = ?",
                                [table]).fetchone()[0]
            conn.execute(ddl.replace("REFERENCES runs(id) ON DELETE CASCADE", ""))
    for store in stores:
        conn.execute("ATTACH DATABASE ? AS src", [str(store)])
        conn.execute("BEGIN")
        for table in ("responses", "verdicts"):
            conn.execute(f"INSERT INTO {table} SELECT * FROM src.{table}")
        conn.execute("COMMIT")
        conn.execute("DETACH DATABASE src")
    conn.close()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0, help="fraction of 40,000 cases")
    parser.add_argument("--shards", type=int, default=8)
    args = parser.parse_args()
    cases = max(args.shards, round(CASES * args.scale))
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        start = time.perf_counter()
        plan = make_suite(root / "suite", cases)
        suite = load_suite(root / "suite")
        responses = write_shard_responses(root, plan, args.shards)
        stores = []
        for k, path in enumerate(responses, start=1):
            db = root / f"shard{k}.db"
            with Store(db) as store:
                score_file(suite, path, store, model="bench", release="r1",
                           keep_verdicts=False, shard=Shard(index=k, count=args.shards))
            stores.append(db)
        setup = time.perf_counter() - start
        per_shard = []
        for db in stores:
            with sqlite3.connect(db) as conn:
                per_shard.append(conn.execute("SELECT count(*) FROM verdicts").fetchone()[0])
        total = sum(per_shard)
        print(f"scale {args.scale:g}: {cases:,} cases x {REPEATS} repeats = {total:,} attempts "
              f"in {args.shards} shards ({min(per_shard):,} to {max(per_shard):,} each); "
              f"setup (scoring the shards) {setup:.1f} s, {total / setup:,.0f} attempts/s",
              flush=True)

        reference = plain_copy(root / "plain.db", stores)
        wall, rss, _ = timed_cli("merge", str(root / "merged.db"), *map(str, stores))
        with sqlite3.connect(root / "merged.db") as conn:
            merged = conn.execute("SELECT count(*) FROM verdicts").fetchone()[0]
            scores = json.loads(conn.execute("SELECT scores FROM runs").fetchone()[0])
        assert merged == total, (merged, total)
        again, again_rss, _ = timed_cli("merge", "--into", str(root / "merged.db"),
                                        str(stores[0]))
        print(f"callgate merge           : {wall:6.1f} s  peak RSS {rss:5.0f} MB  "
              f"{total / wall:,.0f} attempts/s  (goal at 1M: < 30 s, < 300 MB)")
        print(f"reference (plain copy)   : {reference:6.1f} s  "
              f"merge / plain copy = {wall / reference:.1f}x")
        print(f"merge one shard again    : {again:6.1f} s  peak RSS {again_rss:5.0f} MB  "
              "(nothing new: checked, not copied)")
        print(f"merged release           : {scores['attempts']:,} attempts, right tool "
              f"{scores['figures']['right_tool']['pct']:.2f} %, right arguments "
              f"{scores['figures']['right_arguments']['pct']:.2f} %")
        if args.scale != 1:
            print(f"scaled: x{1 / args.scale:g} for 1M attempts, if linear: "
                  f"~{wall / args.scale:.0f} s")


if __name__ == "__main__":
    main()
