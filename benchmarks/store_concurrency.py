"""N `callgate score` processes into one store: one after another, then all at once.

Usage: uv run python benchmarks/store_concurrency.py [PROCESSES] [ATTEMPTS]

Each process scores ATTEMPTS recorded attempts (the bundled example cycled, as in
score_throughput.py) as its own release. Prints the wall time of the sequential and the
parallel pass, their ratio, how many processes failed, and whether both stores hold the same
figures. The parallel pass can only beat the sequential one because writers hold the write
lock for short transactions, not for the whole scoring of their file.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from score_throughput import write_responses

from callgate.cli.demo import example_path
from callgate.store.db import Store

CALLGATE = str(Path(sys.executable).with_name("callgate"))


def commands(tmp: Path, processes: int, attempts: int) -> list[list[str]]:
    responses = tmp / "responses.jsonl"
    write_responses(responses, attempts)
    return [["score", str(example_path()), "-r", str(responses), "-m", "bench",
             "--release", f"r{index}"] for index in range(processes)]


def figures(db: Path) -> dict[str, str]:
    with Store(db) as store:
        return {run["release"]: json.dumps(json.loads(run["scores"])["figures"], sort_keys=True)
                for run in store.runs()}


def main() -> None:
    processes = int(sys.argv[1]) if len(sys.argv) > 1 else 4
    attempts = int(sys.argv[2]) if len(sys.argv) > 2 else 20_000
    env = {k: v for k, v in os.environ.items() if not k.startswith("CALLGATE_")}
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        todo = commands(tmp, processes, attempts)

        sequential_db = tmp / "sequential.db"
        start = time.perf_counter()
        failed = sum(subprocess.run([CALLGATE, *c, "--db", str(sequential_db)], env=env,
                                    capture_output=True).returncode != 0 for c in todo)
        sequential = time.perf_counter() - start

        parallel_db = tmp / "parallel.db"
        start = time.perf_counter()
        running = [subprocess.Popen([CALLGATE, *c, "--db", str(parallel_db)], env=env,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
                   for c in todo]
        failed += sum(process.wait() != 0 for process in running)
        parallel = time.perf_counter() - start
        same = figures(sequential_db) == figures(parallel_db)

    print(f"{processes} score processes x {attempts:,} attempts into one store "
          f"({os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f})")
    print(f"  one after another  {sequential:7.2f} s")
    print(f"  all at once        {parallel:7.2f} s   ({sequential / parallel:.2f}x)")
    print(f"  failed processes   {failed}")
    print(f"  same figures       {same}")


if __name__ == "__main__":
    main()
