"""`callgate history` at 100 releases of 5,000 cases: print the time it takes.

Usage: uv run python benchmarks/history.py [RELEASES] [CASES]

Setup (not timed): a suite of CASES generated cases, one release scored through the Python API
(`score_file`, one attempt per case), then copied RELEASES − 1 times in SQL (run row, verdict
and response rows), so the database holds what RELEASES scored releases hold. Timed:

- `callgate history` through the CLI, end to end (process start included), and its `--json`;
- in process, the rows history builds from the stored figures (`history_rows`);
- the reference, in the same run: the old way, re-reading and re-validating every verdict of
  every release (`stored_release` per run), which is what history did before.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from callgate.gating.finding import stored_release
from callgate.report.history import history_rows
from callgate.scoring.pipeline import score_file
from callgate.store.db import Store
from callgate.suites.suite import load_suite

TOOL = {"type": "function", "function": {
    "name": "lookup_order", "description": "Look up an order.",
    "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}},
                   "required": ["order_id"], "additionalProperties": False}}}


def write_suite(root: Path, cases: int) -> None:
    root.mkdir()
    (root / "tools.json").write_text(json.dumps([TOOL]))
    with (root / "cases.jsonl").open("w") as out:
        for index in range(cases):
            out.write(json.dumps({
                "id": f"c{index:05d}", "tags": ["clean"],
                "messages": [{"role": "user", "content": f"Where is ord_{index}?"}],
                "expect": {"type": "calls", "calls": [
                    {"tool": "lookup_order", "args": {"order_id": f"ord_{index}"}}]}}) + "\n")


def write_responses(path: Path, cases: int) -> None:
    with path.open("w") as out:
        for index in range(cases):
            order = f"ord_{index}" if index % 10 else f"ord_{index + 1}"  # 10% wrong value
            out.write(json.dumps({"case_id": f"c{index:05d}", "repeat": 0, "response": {
                "role": "assistant", "content": None, "tool_calls": [{
                    "id": "t1", "type": "function", "function": {
                        "name": "lookup_order",
                        "arguments": json.dumps({"order_id": order})}}]}}) + "\n")


def copy_release(store: Store, run_id: int, release: str, index: int) -> None:
    db = store.db
    with db.atomic():
        cursor = db.execute(
            "INSERT INTO runs (suite_name, suite, model, release, source, created_at, "
            "callgate_version, judge_fingerprint, status, scores) SELECT suite_name, suite, "
            "model, ?, source, ?, callgate_version, judge_fingerprint, status, scores "
            "FROM runs WHERE id = ?", [release, f"2026-01-01T00:{index // 60:02d}:"
                                                f"{index % 60:02d}+00:00", run_id])
        new = cursor.lastrowid
        for table in ("verdicts", "responses"):
            columns = [c.name for c in db[table].columns if c.name != "run"]
            names = ", ".join(columns)
            db.execute(f"INSERT INTO {table} (run, {names}) SELECT ?, {names} FROM {table} "
                       "WHERE run = ?", [new, run_id])


def timed(fn) -> tuple[float, object]:
    start = time.perf_counter()
    value = fn()
    return time.perf_counter() - start, value


def main() -> None:
    releases = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    cases = int(sys.argv[2]) if len(sys.argv) > 2 else 5_000
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        write_suite(root / "suite", cases)
        write_responses(root / "responses.jsonl", cases)
        db_path = root / "history.db"
        suite = load_suite(root / "suite")
        with Store(db_path) as store:
            first = score_file(suite, root / "responses.jsonl", store, model="bench",
                               release="r000")
            for index in range(1, releases):
                copy_release(store, first.run_id, f"{index:040x}", index)
        size_mb = db_path.stat().st_size / 1e6
        print(f"{releases} releases of {cases} cases, database {size_mb:.0f} MB")

        exe = str(Path(sys.executable).with_name("callgate"))
        # As installed: bytecode cached (this machine sets PYTHONDONTWRITEBYTECODE, which would
        # time compiling callgate and its dependencies on every start); one untimed warm-up run.
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["COLUMNS"] = "80"
        subprocess.run([exe, "history", "-m", "bench", "--db", str(db_path)], env=env,
                       capture_output=True, check=True)
        for args in ((), ("--json",)):
            command = [exe, "history", "-m", "bench", "--db", str(db_path), *args]
            cli, done = timed(lambda command=command: subprocess.run(
                command, capture_output=True, text=True, env=env, check=True))
            print(f"callgate history {' '.join(args)}".rstrip()
                  + f" (CLI, process start included): {cli:.3f} s, {len(done.stdout)} chars")
        startup, _ = timed(lambda: subprocess.run([exe, "--version"], capture_output=True,
                                                  env=env, check=True))
        print(f"  of which `callgate --version` (process start alone): {startup:.3f} s")

        with Store(db_path) as store:
            new, rows = timed(lambda: history_rows(store.stored_runs("bench")))
            old, _ = timed(lambda: [stored_release(store, run)
                                    for run in store.stored_runs("bench")])
        print(f"in process, from stored figures: {new * 1000:.1f} ms for {len(rows)} releases")
        print(f"reference, re-reading every verdict (the old history): {old:.2f} s "
              f"({old / new:.0f}× slower)")


if __name__ == "__main__":
    main()
