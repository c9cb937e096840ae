"""Peak RSS of `callgate score` as the suite and the number of attempts grow.

Usage: uv run python benchmarks/score_memory.py [--quick]

The suite is the bundled order_support example with its cases copied under new ids until it
has N cases; the responses are its two recorded releases, each copy answered like its
original, repeats counted per case (0, 1, 2, ...) as a real run numbers them. Each
configuration runs the installed CLI in its own process; the figure is that process's peak
RSS. Per-case and per-attempt costs are differences between configurations measured in the
same run. Goals (issue 13): < 300 MB at 100,000 attempts of 100,000 cases, < 150 MB at
1,000,000 attempts of 1,000 cases.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
from itertools import cycle
from pathlib import Path

from callgate.cli.demo import example_path

WRAPPER = (
    "import resource, subprocess, sys\n"
    "done = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
    "print(done.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
    "sys.stderr.write(done.stderr[-2000:])\n"
)


def make_suite(root: Path, cases: int) -> list[tuple[str, list[str]]]:
    """Write a suite of `cases` cases; return (case id, recorded answers) per case."""
    source = example_path()
    root.mkdir(parents=True)
    for name in ("tools.json", "suite.json"):
        shutil.copy(source / name, root / name)
    originals = [json.loads(t) for t in (source / "cases.jsonl").read_text().splitlines() if t]
    answers: dict[str, list[str]] = {}
    for release in ("2026.10", "2026.11"):
        for text in (source / f"responses-{release}.jsonl").read_text().splitlines():
            if text.strip():
                item = json.loads(text)
                answers.setdefault(item["case_id"], []).append(text)
    plan = []
    with (root / "cases.jsonl").open("w") as out:
        for index, case in zip(range(cases), cycle(originals), strict=False):
            new_id = f"{case['id']}-{index}"
            out.write(json.dumps({**case, "id": new_id}) + "\n")
            plan.append((new_id, answers.get(case["id"], [])))
    return plan


def write_responses(path: Path, plan: list[tuple[str, list[str]]], attempts: int) -> None:
    answerable = [(case_id, texts) for case_id, texts in plan if texts]
    repeats = dict.fromkeys((case_id for case_id, _ in answerable), 0)
    with path.open("w") as out:
        for _, (case_id, texts) in zip(range(attempts), cycle(answerable), strict=False):
            item = json.loads(texts[repeats[case_id] % len(texts)])
            item["case_id"], item["repeat"] = case_id, repeats[case_id]
            repeats[case_id] += 1
            out.write(json.dumps(item) + "\n")


def measure(tmp: Path, cases: int, attempts: int) -> tuple[float, float]:
    """(peak RSS in MB, wall seconds) of one `callgate score` run."""
    work = tmp / f"{cases}-{attempts}"
    plan = make_suite(work / "suite", cases)
    write_responses(work / "responses.jsonl", plan, attempts)
    cli = Path(sys.executable).with_name("callgate")
    command = [str(cli), "score", str(work / "suite"), "-r", str(work / "responses.jsonl"),
               "-m", "bench", "--release", "r1", "--db", str(work / "bench.db")]
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", WRAPPER, *command],
                          capture_output=True, text=True, check=True)
    wall = time.perf_counter() - start
    code, rss_kb = done.stdout.split()
    if code not in ("0", "1", "3"):
        raise SystemExit(f"callgate score failed ({code}): {done.stderr}")
    shutil.rmtree(work)
    return int(rss_kb) / 1024, wall


def main() -> None:
    quick = "--quick" in sys.argv
    configs = [(1_000, 100_000), (10_000, 100_000), (100_000, 100_000), (1_000, 1_000_000)]
    if quick:
        configs = [(1_000, 10_000), (10_000, 10_000), (1_000, 100_000)]
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for cases, attempts in configs:
            rss, wall = measure(Path(tmp), cases, attempts)
            results[(cases, attempts)] = rss
            print(f"{cases:>9,} cases {attempts:>11,} attempts: peak RSS {rss:6.0f} MB"
                  f"  ({wall:5.1f} s, {attempts / wall:,.0f} attempts/s end to end)", flush=True)
    base = results[configs[0]]
    by_cases = configs[1] if quick else configs[2]
    by_attempts = configs[-1]
    per_case = (results[by_cases] - base) * 1024 / (by_cases[0] - configs[0][0])
    per_attempt = (results[by_attempts] - base) * 1024 * 1024 / (by_attempts[1] - configs[0][1])
    print(f"cost per case    : {per_case:.2f} KB (from {configs[0]} to {by_cases})")
    print(f"cost per attempt : {per_attempt:.0f} B (from {configs[0]} to {by_attempts})")


if __name__ == "__main__":
    main()
