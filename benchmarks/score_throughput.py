"""Score and store 100,000 recorded attempts; print attempts per second and peak RSS.

Usage: uv run python benchmarks/score_throughput.py [ATTEMPTS]

The responses are the bundled example's two releases, cycled with new repeat indices until
ATTEMPTS lines exist, written to a temporary file first (not timed). The timed part is the
whole `callgate score` path through the Python API: read and parse each line, check it, score
it, and store the response and verdict rows in SQLite. The reference figure is the time to
merely read and json-parse the same file, measured in the same run. The same file then goes
through the installed CLI, as a user runs it (the "mixed workload" of issue 13).

Also, measured in the same run: callgate's in-process check rate beside BFCL's own checker
(vendored in tests/fixtures/bfcl) on the same BFCL responses, and strict trajectory matching
on one turn of 50 same-name calls (more sizes: benchmarks/trajectory_speed.py; peak RSS as
the suite and the attempts grow: benchmarks/score_memory.py). The check rates in CPU time are
noisy on a shared machine: benchmarks/check_instructions.py counts instructions per check on
the same responses instead.
"""

from __future__ import annotations

import copy
import json
import resource
import subprocess
import sys
import tempfile
import time
from itertools import cycle
from pathlib import Path
from typing import Any, NamedTuple

from callgate.checks.check import check_response
from callgate.checks.matching import match_trajectory
from callgate.cli.demo import example_path
from callgate.importers.bfcl import import_category, read_category
from callgate.scoring.pipeline import score_file
from callgate.store.db import Store
from callgate.suites.responses import parse_response
from callgate.suites.suite import load_suite

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the BFCL fixture
from bfcl_fixture import FIXTURES as BFCL
from bfcl_fixture import load_harness


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


BFCL_CATEGORIES = ("simple_python", "live_multiple")



def _bfcl_decode(harness: Any, names: dict[str, str], message: dict[str, Any]) -> Any:
    """What BFCL's runner does before its checker, for an OpenAI-style FC model: each call's
    arguments through json.loads (its handler's decode_ast), the name mapped back, and the
    format check (bfcl_eval/utils.py is_function_calling_format_output). None: rejected."""
    try:
        decoded = [
            {names.get(c["function"]["name"], c["function"]["name"]):
             json.loads(c["function"]["arguments"])}
            for c in message["tool_calls"]
        ]
    except (ValueError, KeyError, TypeError):
        return None
    if not decoded or not harness.is_function_calling_format_output(decoded):
        return None
    return decoded


def bfcl_workload(
    tmp: Path, only_right: bool, harness: Any, ast_checker: Any
) -> tuple[list[tuple[Any, Any, Any]], list[tuple[Any, ...]], int]:
    """The responses of `bfcl_rates` (also benchmarks/check_instructions.py): callgate's
    (case, response, (schemas, validators, rules)), BFCL's (functions, names, message, ground
    truth, category) for those its decoding accepts, and how many verdicts differ."""
    reference = harness.Reference(ast_checker)
    ours: list[tuple[Any, Any, Any]] = []  # (case, response, (schemas, validators, rules))
    theirs: list[tuple[Any, ...]] = []
    differ = 0
    for category in BFCL_CATEGORIES:
        target = tmp / f"{category}-{only_right}"
        suite = load_suite(import_category(BFCL / "data", category, target).out)
        data = read_category(BFCL / "data", category)
        entries = {entry.id: entry for entry in data.entries}
        schemas = suite.parameter_schemas
        for case in suite.cases.values():
            entry, answer = entries[case.id], data.answers.get(case.id)
            names = harness.bfcl_names(case, entry)
            functions = [function.model_dump() for function in entry.function]
            for repeat, (label, message) in enumerate(harness.perturbations(suite, case)):
                if only_right and label != "right":
                    continue
                response = parse_response(
                    {"case_id": case.id, "repeat": repeat, "response": message}
                )
                verdict = check_response(case, response, schemas, suite.validators,
                                         rules=suite.match)
                valid = reference.valid(category, entry, answer, message, names)
                differ += (verdict.status == "scored" and verdict.right_arguments) != valid
                ours.append((case, response, (schemas, suite.validators, suite.match)))
                if _bfcl_decode(harness, names, message) is None:
                    continue  # BFCL rejects it before its checker runs
                theirs.append((functions, names, message, answer.ground_truth, category))

    return ours, theirs, differ


def bfcl_rates(tmp: Path, only_right: bool, rounds: int = 3) -> BfclRates:
    """Checks per CPU second of callgate and of BFCL (with and without its decoding).

    The same responses (each BFCL fixture case answered right and perturbed in the ways the
    tests use; with `only_right`, only the right answers) go through callgate's
    `check_response` (JSON, schema + values, no store) and through what BFCL runs on an
    OpenAI-style FC response: its decoding (json.loads of each call's arguments, the format
    check) and its own `ast_checker`. Responses BFCL rejects while decoding never reach its
    checker and are left out of its count. Best of `rounds` for each, alternating, in CPU
    time.
    """
    harness = load_harness()
    ast_checker = harness.load_ast_checker()
    ours, theirs, differ = bfcl_workload(tmp, only_right, harness, ast_checker)
    passes = 20  # each timed run long enough for the CPU clock

    def run_ours() -> None:
        for _ in range(passes):
            for case, response, (schemas, validators, rules) in ours:
                check_response(case, response, schemas, validators, rules=rules)

    def run_theirs(copies: list[list[tuple[Any, ...]]], decode: bool) -> None:
        for batch in copies:
            for functions, names, message, truth, category in batch:
                # Without `decode`, the calls were decoded beforehand (message holds them).
                decoded = _bfcl_decode(harness, names, message) if decode else message
                ast_checker(functions, decoded, truth, harness.Language.PYTHON, category,
                            harness.MODEL)

    # CPU time, not wall time: the machine may be shared, and both sides are one thread.
    best_ours = best_theirs = best_checker = float("inf")
    for _ in range(rounds):
        start = time.process_time()
        run_ours()
        best_ours = min(best_ours, (time.process_time() - start) / passes)
        copies = [copy.deepcopy(theirs) for _ in range(passes)]  # it may change its inputs
        start = time.process_time()
        run_theirs(copies, decode=True)
        best_theirs = min(best_theirs, (time.process_time() - start) / passes)
        decoded = [[(f, n, _bfcl_decode(harness, n, m), t, c) for f, n, m, t, c in theirs]
                   for _ in range(passes)]
        start = time.process_time()
        run_theirs(decoded, decode=False)
        best_checker = min(best_checker, (time.process_time() - start) / passes)
    return BfclRates(len(ours), len(ours) / best_ours, len(theirs) / best_theirs,
                     len(theirs) / best_checker, differ)


class BfclRates(NamedTuple):
    responses: int
    callgate: float  # check_response: JSON, schema and values
    bfcl: float  # BFCL's decoding and ast_checker
    checker_alone: float  # ast_checker alone, given calls decoded beforehand
    differ: int  # verdicts that differ from BFCL's


def trajectory_case(n: int) -> tuple[float, float]:
    """(strict ms, unordered ms) on one turn of n same-name calls (trajectory_speed.py)."""
    from trajectory_speed import best_of, parallel_turn

    actual, expected, rule = parallel_turn(n)
    strict = best_of(3, lambda: match_trajectory(actual, expected, "strict", args=rule))
    plain = best_of(3, lambda: match_trajectory(actual, expected, "unordered", args=rule))
    return strict * 1e3, plain * 1e3


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
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
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
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cli_cpu = (after.ru_utime + after.ru_stime) - (children.ru_utime + children.ru_stime)
        cli_rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024

        bfcl = {only_right: bfcl_rates(Path(tmp), only_right) for only_right in (True, False)}

    strict_ms, unordered_ms = trajectory_case(50)
    fig = result.scores.figures
    for only_right, rates in bfcl.items():
        kind = "right answers" if only_right else "right and perturbed"
        print(f"BFCL {kind:<19}: {rates.responses:,} responses "
              f"({' + '.join(BFCL_CATEGORIES)}); {rates.differ} verdicts differ from BFCL's")
        print(f"  callgate check_response  : {rates.callgate:,.0f} checks per CPU second "
              "(JSON, schema + values)")
        print(f"  BFCL decode + ast_checker: {rates.bfcl:,.0f} checks per CPU second, same run")
        goal = 1.0 if only_right else 0.5
        print(f"  ratio callgate / BFCL    : {rates.callgate / rates.bfcl:.2f}  (goal >= {goal})")
        print(f"  (ast_checker alone, calls decoded beforehand: {rates.checker_alone:,.0f}/s, "
              f"ratio {rates.callgate / rates.checker_alone:.2f})")
    print(f"trajectory, 50 same-name calls in one turn: strict {strict_ms:.1f} ms, unordered "
          f"(one plain matching, same input) {unordered_ms:.1f} ms")
    print(f"attempts scored and stored : {result.scores.attempts:,}")
    print(f"wall time                  : {wall:.2f} s  (CPU {cpu:.2f} s, one core)")
    print(f"attempts per second        : {result.scores.attempts / wall:,.0f} wall, "
          f"{result.scores.attempts / cpu:,.0f} per CPU second (in process)")
    print(
        f"reference: read+json only  : {parse_only:.2f} s  -> full path is "
        f"{wall / parse_only:.1f}x that"
    )
    print(
        f"peak RSS                   : {peak_rss_mb():.0f} MB  (before scoring "
        f"{rss_before:.0f} MB; growth with suite size: benchmarks/score_memory.py)"
    )
    print(
        f"CLI end to end             : {cli_wall:.2f} s = {attempts / cli_wall:,.0f} "
        f"attempts/s wall, {attempts / cli_cpu:,.0f} per CPU second (goal >= 25,000), "
        f"peak RSS {cli_rss:.0f} MB"
    )
    print(f"database size              : {size_mb:.0f} MB")
    print(
        f"right tool / right args    : {fig.right_tool.pct:.1f}% / {fig.right_arguments.pct:.1f}%"
    )


if __name__ == "__main__":
    main()
