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

With --instructions, CPU time (noise on a shared machine) is replaced by instruction counts,
which the load does not change: valgrind's callgrind count ("Collected") of a child that loads
the suite and then scores the file in process (score_file into a new store) with
instrumentation switched on around the scoring only (callgrind's client requests from a tiny C
helper compiled here: needs valgrind, its headers and a C compiler; PYTHONHASHSEED fixed). Each
version runs three times, to split the figure into phases the same way for both: reading
(score_responses replaced by a loop that only drains the stream of parsed lines), reading +
checks (Recorder._record replaced by a no-op: nothing is stored or scored) and the whole
score; checks = the second less the first, storing and finishing = the third less the second.
Each runs at ATTEMPTS (default 10,000 there) and at a fifth of it: per attempt is the
difference over the attempts between, so the fixed costs (a new store's tables, the suite's
rows and marks) fall out.

With --features (and --instructions), this checkout's whole score is counted again with each
feature that storing or reading pays for switched off in the child, one at a time, and what
each costs an attempt is printed (the same difference of two sizes): the tool marks serve's
tool filter reads (attempt_tools), the per-case and slice tallies the gate and what-to-fix
read, the refusal of a line that gives a deciding field twice, and the policy checks.

The child: score_versions.py --child SRC RESPONSES DB {read,check,score[:FEATURE]} HELPER
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1] / "src"
RUN = ("import sys; sys.path.insert(0, sys.argv.pop(1)); from callgate.cli import entry; "
       "sys.argv[0] = 'callgate'; entry()")


def cli_cpu(src: Path, responses: Path, db: Path) -> float:
    """CPU seconds (user + system) of `callgate score` run from `src`, on that version's own
    example suite (as the instruction counts' child does: a newer suite.json may hold what an
    older version does not read)."""
    db.unlink(missing_ok=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    suite = src / "callgate" / "examples" / "order_support"
    subprocess.run([sys.executable, "-c", RUN, str(src), "score", str(suite), "-r",
                    str(responses), "-m", "bench", "--release", "r", "--db", str(db)],
                   check=True, capture_output=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


HELPER = """#include <valgrind/callgrind.h>
void cg_start(void) { CALLGRIND_ZERO_STATS; CALLGRIND_START_INSTRUMENTATION; }
void cg_stop(void) { CALLGRIND_STOP_INSTRUMENTATION; }
"""
PHASES = ("read", "check", "score")


def child(src: str, responses: str, db: str, phase: str, helper: str) -> None:
    """One phase of one version's in-process score, counted by callgrind (see the top)."""
    import ctypes

    sys.path.insert(0, src)  # before callgate is imported: the child runs that version
    from callgate.cli.demo import example_path
    from callgate.scoring import pipeline
    from callgate.store.db import Store
    from callgate.suites.suite import load_suite

    if phase == "read":
        def drain(suite: object, stream: object, store: object, **_: object) -> None:
            for _ in stream:  # type: ignore[attr-defined]
                pass

        pipeline.score_responses = drain  # type: ignore[assignment]
    elif phase == "check":
        pipeline.Recorder._record = (  # type: ignore[method-assign]
            lambda self, response, body, verdict, *_: verdict)
    elif phase.startswith("score:"):
        switch_off(phase.partition(":")[2])
    counter = ctypes.CDLL(helper)
    suite = load_suite(example_path())
    with Store(db) as store:
        counter.cg_start()
        pipeline.score_file(suite, responses, store, model="bench", release="r",
                            keep_verdicts=False)
        counter.cg_stop()


# What each feature --features switches off costs, by name: what it is for.
FEATURES = {
    "marks": "tool marks (attempt_tools: serve's tool filter)",
    "tallies": "case and slice tallies (the gate, what-to-fix)",
    "twice": "refusing a deciding field given twice",
    "policies": "policy checks",
}


def switch_off(feature: str) -> None:
    """In the child: the feature's work replaced by doing nothing (its rows are not written)."""
    from callgate.checks import check
    from callgate.store import web_rows
    from callgate.store.db import Store
    from callgate.suites import responses

    if feature == "marks":
        web_rows.AttemptMarks.of = lambda *_: []  # type: ignore[method-assign]
    elif feature == "tallies":
        Store.save_case_tallies = Store.save_slice_tallies = (  # type: ignore[method-assign]
            lambda *_: None)
    elif feature == "twice":
        responses.twice_given = lambda *_: None
    elif feature == "policies":
        check._policed = lambda *args: args[-1]
    else:
        raise SystemExit(f"no feature {feature!r}: one of {', '.join(FEATURES)}")


def instructions(src: Path, responses: Path, db: Path, phase: str, helper: Path) -> int:
    db.unlink(missing_ok=True)
    run = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", "--instr-atstart=no",
         sys.executable, __file__, "--child", str(src), str(responses), str(db), phase,
         str(helper)],
        capture_output=True, text=True, check=True, env={**os.environ, "PYTHONHASHSEED": "0"})
    found = re.search(r"Collected : (\d+)", run.stderr)
    assert found, run.stderr[-2000:]
    return int(found.group(1))


def by_instructions(this: Path, other: Path, attempts: int, work: Path) -> None:
    """The phases of both versions in instructions, at ATTEMPTS and at a fifth of it: the
    totals at ATTEMPTS, and per attempt the difference of the two sizes over the attempts
    between them (what one more attempt costs, without the fixed costs: the store's tables,
    the suite's rows and marks, a validator built at its first use)."""
    from score_throughput import write_responses

    small = max(1, attempts // 5)
    files = {size: work / f"responses-{size}.jsonl" for size in (attempts, small)}
    for size, path in files.items():
        write_responses(path, size)
    source, helper = work / "cg.c", work / "libcg.so"
    source.write_text(HELPER)
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", str(helper), str(source)],
                   check=True)
    counts = {(label, size): [instructions(src, path, work / f"{label}.db", phase, helper)
                              for phase in PHASES]
              for label, src in (("this", this), ("other", other))
              for size, path in files.items()}
    print(f"scored in process (score_file into a new store), callgrind instructions: totals "
          f"at {attempts:,} attempts; per attempt, the cost of the {attempts - small:,} "
          f"attempts between {small:,} and {attempts:,}")
    print(f"  {'':8}{'this':>15}{'other':>15}{'ratio':>8}   {'per attempt: this':>18}"
          f"{'other':>9}{'ratio':>8}")
    for index, name in enumerate(("reading", "checks", "storing", "total")):
        ours, theirs = (_phase(counts[label, attempts], index) for label in ("this", "other"))
        each = [(_phase(counts[label, attempts], index) - _phase(counts[label, small], index))
                / (attempts - small) for label in ("this", "other")]
        print(f"  {name:8}{ours:>15,}{theirs:>15,}{ours / theirs:>7.3f}x   {each[0]:>18,.0f}"
              f"{each[1]:>9,.0f}{each[0] / each[1]:>7.3f}x")


def by_feature(this: Path, attempts: int, work: Path) -> None:
    """What each feature of FEATURES costs this checkout's score an attempt: the whole score
    less the score with the feature switched off, per attempt between the two sizes."""
    from score_throughput import write_responses

    small = max(1, attempts // 5)
    files = {size: work / f"responses-{size}.jsonl" for size in (attempts, small)}
    for size, path in files.items():
        if not path.exists():
            write_responses(path, size)
    helper = work / "libcg.so"

    def each(phase: str) -> float:
        big, little = (instructions(this, files[size], work / "f.db", phase, helper)
                       for size in (attempts, small))
        return (big - little) / (attempts - small)

    whole = each("score")
    print(f"what each feature costs an attempt of this checkout's score (of {whole:,.0f} "
          "instructions):")
    for feature, label in FEATURES.items():
        cost = whole - each(f"score:{feature}")
        print(f"  {label:50}{cost:>9,.0f}{100 * cost / whole:>7.1f}%")


def _phase(counts: list[int], index: int) -> int:
    """reading, checks, storing (each the difference of two runs) or the total."""
    read, checked, scored = counts
    return (read, checked - read, scored - checked, scored)[index]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("other", type=Path, help="the other checkout's src folder")
    parser.add_argument("attempts", nargs="?", type=int)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--instructions", action="store_true",
                        help="count instructions per phase instead of timing the CLI")
    parser.add_argument("--features", action="store_true",
                        help="with --instructions, also what each feature costs an attempt")
    parser.add_argument("--this", type=Path, default=HERE,
                        help="with --instructions, the src folder counted as this one")
    args = parser.parse_args()
    other = args.other.resolve()
    print(f"this: {HERE}; other: {other}; load {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        if args.instructions:
            by_instructions(args.this.resolve(), other, args.attempts or 10_000, work)
            if args.features:
                by_feature(args.this.resolve(), args.attempts or 10_000, work)
            return 0
        args.attempts = args.attempts or 50_000
        from score_throughput import write_responses

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
            from callgate.cli.demo import example_path
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
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(*sys.argv[2:7])
    else:
        sys.exit(main())
