"""Score and store 100,000 recorded attempts; print attempts per second and peak RSS.

Usage: uv run python benchmarks/score_throughput.py [ATTEMPTS]

The responses are the bundled example's two releases, cycled with new repeat indices until
ATTEMPTS lines exist, written to a temporary file first (not timed). The timed part is the
whole `callgate score` path through the Python API: read and parse each line, check it, score
it, and store the response and verdict rows in SQLite. The reference figure is the time to
merely read and json-parse the same file, measured in the same run.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import tempfile
import time
from itertools import cycle
from pathlib import Path

from callgate.demo import example_path
from callgate.pipeline import score_file
from callgate.store import Store
from callgate.suite import load_suite


def write_responses(path: Path, attempts: int) -> None:
    root = example_path()
    lines = []
    for release in ("2026.10", "2026.11"):
        with (root / f"responses-{release}.jsonl").open() as handle:
            lines += [json.loads(text) for text in handle if text.strip()]
    with path.open("w") as out:
        for index, item in zip(range(attempts), cycle(lines), strict=False):
            item = {**item, "repeat": index}
            out.write(json.dumps(item) + "\n")


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    attempts = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    suite = load_suite(example_path())
    with tempfile.TemporaryDirectory() as tmp:
        responses = Path(tmp) / "responses.jsonl"
        write_responses(responses, attempts)
        rss_before = peak_rss_mb()

        start = time.perf_counter()
        with responses.open() as handle:
            for text in handle:
                json.loads(text)
        parse_only = time.perf_counter() - start

        cpu_start = time.process_time()
        start = time.perf_counter()
        with Store(Path(tmp) / "bench.db") as store:
            result = score_file(
                suite, responses, store, model="bench", release="r1", keep_verdicts=False
            )
        wall = time.perf_counter() - start
        cpu = time.process_time() - cpu_start
        size_mb = (Path(tmp) / "bench.db").stat().st_size / 1e6

        # The same through the installed CLI, as a user runs it (process start-up included).
        cli = Path(sys.executable).with_name("callgate")
        start = time.perf_counter()
        subprocess.run(
            [
                str(cli),
                "score",
                str(example_path()),
                "-r",
                str(responses),
                "-m",
                "bench",
                "--release",
                "cli",
                "--db",
                str(Path(tmp) / "cli.db"),
            ],
            check=True,
            capture_output=True,
        )
        cli_wall = time.perf_counter() - start
        cli_rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024

    fig = result.scores.figures
    print(f"attempts scored and stored : {result.scores.attempts:,}")
    print(f"wall time                  : {wall:.2f} s  (CPU {cpu:.2f} s, one core)")
    print(f"attempts per second        : {result.scores.attempts / wall:,.0f}  (goal >= 10,000)")
    print(
        f"reference: read+json only  : {parse_only:.2f} s  -> full path is "
        f"{wall / parse_only:.1f}x that"
    )
    print(
        f"peak RSS                   : {peak_rss_mb():.0f} MB  (before scoring "
        f"{rss_before:.0f} MB; goal < 300 MB)"
    )
    print(
        f"CLI end to end             : {cli_wall:.2f} s = {attempts / cli_wall:,.0f} "
        f"attempts/s, peak RSS {cli_rss:.0f} MB"
    )
    print(f"database size              : {size_mb:.0f} MB")
    print(
        f"right tool / right args    : {fig.right_tool.pct:.1f}% / {fig.right_arguments.pct:.1f}%"
    )


if __name__ == "__main__":
    main()
