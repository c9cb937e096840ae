"""`callgate score` of this checkout beside another commit's, on the same mixed workload, in
the same run: CPU seconds of the whole CLI process, best of ROUNDS, the two run in turn.

    uv run python benchmarks/score_versions.py OTHER_SRC [ATTEMPTS] [--rounds N] [--profile]

OTHER_SRC is the `src` folder of another checkout (e.g. `git worktree add /tmp/old 2352413`,
then /tmp/old/src; remove the worktree after). Both run on this checkout's Python and
packages, the other's `src` first on the import path. The workload is that of
benchmarks/score_throughput.py: the bundled example's two releases (every verdict kind: right,
wrong tool, extra and missing calls, invalid JSON, schema violations, wrong values, truncated
and provider errors) cycled with new repeat indices to ATTEMPTS lines (default 50,000), scored
into a fresh store each time. Also printed: the time to read and json-parse the same file, and
with --profile, where this checkout's CPU goes (cProfile of one in-process score).
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from score_throughput import write_responses

from callgate.cli.demo import example_path

HERE = Path(__file__).resolve().parents[1] / "src"
RUN = ("import sys; sys.path.insert(0, sys.argv.pop(1)); from callgate.cli import entry; "
       "sys.argv[0] = 'callgate'; entry()")


def cli_cpu(src: Path, responses: Path, db: Path) -> float:
    """CPU seconds (user + system) of `callgate score` run from `src`."""
    db.unlink(missing_ok=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-c", RUN, str(src), "score", str(example_path()), "-r",
                    str(responses), "-m", "bench", "--release", "r", "--db", str(db)],
                   check=True, capture_output=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("other", type=Path, help="the other checkout's src folder")
    parser.add_argument("attempts", nargs="?", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    other = args.other.resolve()
    print(f"this: {HERE}; other: {other}; load {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        responses = work / "responses.jsonl"
        write_responses(responses, args.attempts)
        start = time.process_time()
        with responses.open() as handle:
            for text in handle:
                json.loads(text)
        parse = time.process_time() - start
        ours, theirs = [], []
        for _ in range(args.rounds):
            ours.append(cli_cpu(HERE, responses, work / "this.db"))
            theirs.append(cli_cpu(other, responses, work / "other.db"))
        if args.profile:
            from callgate.scoring.pipeline import score_file
            from callgate.store.db import Store
            from callgate.suites.suite import load_suite

            profile = cProfile.Profile()
            with Store(work / "profile.db") as store:
                profile.runcall(score_file, load_suite(example_path()), responses, store,
                                model="bench", release="p", keep_verdicts=False)
            pstats.Stats(profile).sort_stats("tottime").print_stats(30)
    best, other_best = min(ours), min(theirs)
    print(f"{args.attempts:,} attempts through the CLI, CPU seconds (best of {args.rounds}; "
          f"all: this {', '.join(f'{s:.2f}' for s in ours)}; other "
          f"{', '.join(f'{s:.2f}' for s in theirs)})")
    print(f"  this : {best:.2f} s = {args.attempts / best:,.0f} attempts per CPU second")
    print(f"  other: {other_best:.2f} s = {args.attempts / other_best:,.0f} attempts per CPU "
          "second")
    print(f"  this / other CPU: {best / other_best:.3f}x; read + json.loads alone {parse:.2f} s "
          f"(this: {best / parse:.1f}x that, other: {other_best / parse:.1f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
