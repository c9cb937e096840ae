"""BFCL multi-turn: callgate's CPU per test beside BFCL's own `multi_turn_checker` on the same
result lines, and the fixed cost of a `score` call on a large imported suite.

    uv run python benchmarks/multi_turn_speed.py [WHEEL] [--entries N] [--profile]

WHEEL is the bfcl-eval wheel (default: the newest in /tmp/bfcl, fetched there with `pip
download --no-deps bfcl-eval` when there is none). Its four multi-turn categories (800 entries
in bfcl-eval 2026.3.23) are imported as one suite with `callgate import bfcl`. The result lines
are BFCL result files as `bfcl generate` writes them for a function-calling model (per user
turn, per step, `{name: arguments JSON}` then the model's text), made from each entry's ground
truth and its perturbations (tests/fixtures/bfcl/multi_turn_harness.py: a turn left empty, a
call dropped, calls reversed or one a step, an extra call, a missing function, an argument
changed, a call made a turn early): no model is called. They go through `callgate import
bfcl-results`' conversion, and are scored by callgate and by BFCL in the same process:

- BFCL: its runner's decoding of each step (`convert_to_function_call`: the arguments through
  json.loads, a call as `name(k=repr(v))`) and `multi_turn_checker`, loaded from the wheel;
- callgate: parsing each response line and `check_response` (what `score` does per line
  before storing it), and `score_file` over the whole file (parsing, checking, storing);
- the fixed cost: `callgate score` on the suite with ONE response line, in a fresh process
  (CPU seconds of the whole command, and of the same command on a 1-case single-turn suite:
  what is left is loading the 800-case suite and BFCL's classes).

--entries N takes the first N entries of each category (default: all). CPU time throughout
(time.process_time, or the child's rusage), since the machine may be shared.
"""

from __future__ import annotations

import argparse
import cProfile
import importlib.util
import json
import os
import pstats
import resource
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any

from bfcl_import import find_wheel

from callgate.checks.check import check_response
from callgate.importers.bfcl import MULTI_TURN_CATEGORIES
from callgate.importers.bfcl.results import multi_turn_line
from callgate.scoring.pipeline import score_file
from callgate.store.db import Store
from callgate.suites.responses import parse_response
from callgate.suites.suite import Suite, load_suite

ROOT = Path(__file__).resolve().parents[1]
CLI = str(Path(sys.executable).with_name("callgate"))  # the installed CLI
HARNESS = ROOT / "tests/fixtures/bfcl/multi_turn_harness.py"


def load_harness() -> Any:
    spec = importlib.util.spec_from_file_location("bfcl_multi_turn_harness", HARNESS)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bfcl_multi_turn_harness"] = module
    spec.loader.exec_module(module)
    return module


def callgate(*args: str | Path) -> float:
    """Run the CLI in a fresh process; its CPU seconds (user + system)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([CLI, *map(str, args)], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def bfcl_result(answer: Any) -> list[list[Any]]:
    """A harness answer as BFCL records a function-calling model's multi-turn result: per user
    turn, each step's calls as `{name: arguments JSON}`, then the model's text reply."""
    return [[[{name: json.dumps(arguments)} for name, arguments in step] for step in turn]
            + ["Done."] for turn in answer]


def bfcl_decode(result: list[list[Any]]) -> list[list[list[str]]]:
    """BFCL's multi_turn_runner decoding each step (an FC model's `decode_execute`, i.e.
    `convert_to_function_call`); a step that does not decode (the text reply) is left out."""
    decoded = []
    for turn in result:
        steps = []
        for step in turn:
            if not isinstance(step, list):
                continue
            calls = []
            for item in step:
                ((name, arguments),) = item.items()
                values = json.loads(arguments) if isinstance(arguments, str) else arguments
                calls.append(f"{name}({','.join(f'{k}={v!r}' for k, v in values.items())})")
            steps.append(calls)
        decoded.append(steps)
    return decoded


def make_lines(wheel: Path, suite: Suite, harness: Any, entries: int | None
               ) -> list[tuple[dict[str, Any], dict[str, Any], list[list[str]], Any]]:
    """(callgate response line, BFCL entry, ground truth, BFCL result) for every answer."""
    out = []
    with zipfile.ZipFile(wheel) as archive:
        def lines(name: str) -> list[dict[str, Any]]:
            return [json.loads(line) for line in archive.read(name).decode().splitlines()]
        for category in MULTI_TURN_CATEGORIES:
            taken = lines(f"bfcl_eval/data/BFCL_v4_{category}.json")[:entries]
            ground = {a["id"]: a["ground_truth"] for a in lines(
                f"bfcl_eval/data/possible_answer/BFCL_v4_{category}.json")}
            for entry in taken:
                case = suite.cases[entry["id"]]
                assert suite.environment is not None
                env = suite.environment(case.state or {})
                answer = harness.ground_truth_answer(env, ground[entry["id"]])
                for repeat, (_, changed) in enumerate(harness.perturbations(answer)):
                    result = bfcl_result(changed)
                    line = multi_turn_line({"id": entry["id"], "result": result},
                                           1 + len(case.user_turns or ()))
                    out.append(({**line, "repeat": repeat}, entry, ground[entry["id"]], result))
    return out


def time_bfcl(checker: Any, harness: Any, items: list[Any]) -> tuple[float, int]:
    """BFCL's decoding and checker on every line: CPU seconds, answers BFCL passes."""
    utils = sys.modules["bfcl_eval.eval_checker.multi_turn_eval.multi_turn_utils"]
    seconds, right = 0.0, 0
    for index, (_, entry, ground, result) in enumerate(items):
        name = f"bench_{index}"
        category = entry["id"].rsplit("_", 1)[0]
        start = time.process_time()
        decoded = bfcl_decode(result)
        valid = checker.multi_turn_checker(decoded, ground, entry, category, name)["valid"]
        seconds += time.process_time() - start
        right += bool(valid)
        for key in [k for k in vars(utils) if k.startswith(name)]:
            del vars(utils)[key]  # BFCL keeps each model's instances in the module
    return seconds, right


def time_callgate(suite: Suite, items: list[Any], profile: cProfile.Profile | None = None
                  ) -> tuple[float, int]:
    """callgate's parse and check of every line: CPU seconds, answers callgate passes."""
    seconds, right = 0.0, 0
    if profile is not None:
        profile.enable()
    for line, *_ in items:
        start = time.process_time()
        response = parse_response(line)
        verdict = check_response(suite.cases[response.case_id], response,
                                 suite.parameter_schemas, suite.validators, rules=suite.match,
                                 environment=suite.environment)
        seconds += time.process_time() - start
        right += verdict.status == "scored" and bool(verdict.right_arguments)
    if profile is not None:
        profile.disable()
        pstats.Stats(profile).sort_stats("tottime").print_stats(30)
    return seconds, right


def fixed_cost(suite_dir: Path, line: dict[str, Any], work: Path) -> tuple[float, float]:
    """`callgate score` CPU with one response line: on the big suite, and on a 1-case
    single-turn suite (process start, imports, store); best of three each."""
    one = work / "one.jsonl"
    one.write_text(json.dumps(line) + "\n")
    tiny = work / "tiny"
    tiny.mkdir()
    (tiny / "tools.json").write_text(json.dumps([{"type": "function", "function": {
        "name": "f", "parameters": {"type": "object", "properties": {}}}}]))
    (tiny / "cases.jsonl").write_text(json.dumps({
        "id": "c", "messages": [{"role": "user", "content": "hi"}],
        "expect": {"type": "no_call"}}) + "\n")
    (work / "tiny.jsonl").write_text(json.dumps({"case_id": "c", "response": {
        "role": "assistant", "content": "hello"}}) + "\n")
    big, small = [], []
    for attempt in range(3):
        big.append(callgate("score", suite_dir, "-r", one, "-m", "m", "--release", f"b{attempt}",
                            "--db", work / "big.db"))
        small.append(callgate("score", tiny, "-r", work / "tiny.jsonl", "-m", "m", "--release",
                              f"s{attempt}", "--db", work / "small.db"))
    return min(big), min(small)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("wheel", nargs="?", type=Path)
    parser.add_argument("--entries", type=int, help="the first N entries of each category")
    parser.add_argument("--profile", action="store_true", help="cProfile callgate's checks")
    args = parser.parse_args()
    wheel = find_wheel(args.wheel)
    harness = load_harness()
    print(f"wheel: {wheel}; load {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        suite_dir = work / "suite"
        subprocess.run([CLI, "import", "bfcl", wheel, "--out",
                        suite_dir, *(f"--category={c}" for c in MULTI_TURN_CATEGORIES)],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        start = time.process_time()
        suite = load_suite(suite_dir)
        load_seconds = time.process_time() - start
        items = make_lines(wheel, suite, harness, args.entries)
        checker = harness.load_bfcl_checker(wheel)
        bfcl_seconds, bfcl_right = time_bfcl(checker, harness, items)
        ours_seconds, ours_right = time_callgate(load_suite(suite_dir), items)
        if args.profile:
            time_callgate(load_suite(suite_dir), items, cProfile.Profile())
        responses, first = work / "responses.jsonl", work / "first.jsonl"
        responses.write_text("".join(json.dumps(line) + "\n" for line, *_ in items))
        first.write_text(json.dumps(items[0][0]) + "\n")
        # Loading the suite and storing it (once per store) are paid by a score of one line
        # too: what the other lines add is each test's cost, storing it included.
        one_seconds = score_seconds = float("inf")
        for attempt in range(2):
            for path, kept in ((first, False), (responses, True)):
                with Store(work / f"score-{attempt}-{kept}.db") as store:
                    start = time.process_time()
                    score_file(load_suite(suite_dir), path, store, model="m", release="r",
                               keep_verdicts=kept)
                    took = time.process_time() - start
                if kept:
                    score_seconds = min(score_seconds, took)
                else:
                    one_seconds = min(one_seconds, took)
        if args.profile:
            profile = cProfile.Profile()
            with Store(work / "profile.db") as store:
                profile.runcall(score_file, load_suite(suite_dir), responses, store, model="m",
                                release="r")
            pstats.Stats(profile).sort_stats("cumulative").print_stats(50)
        big, small = fixed_cost(suite_dir, items[0][0], work)
    n = len(items)
    bfcl_ms, ours_ms = 1000 * bfcl_seconds / n, 1000 * ours_seconds / n
    print(f"{n:,} answers to {len(suite.cases)} cases; right: {ours_right:,} (callgate), "
          f"{bfcl_right:,} (BFCL)")
    print(f"per test, CPU: callgate {ours_ms:.2f} ms (parse + check_response), BFCL "
          f"{bfcl_ms:.2f} ms (decode + multi_turn_checker): {ours_ms / bfcl_ms:.2f}x")
    per_test = 1000 * (score_seconds - one_seconds) / (n - 1)
    print(f"score_file into a new store (load, parse, check, store): {score_seconds:.2f} s CPU "
          f"for the {n:,} lines, {one_seconds:.2f} s for the first alone: {per_test:.2f} ms a "
          f"further test, {per_test / bfcl_ms:.2f}x BFCL's")
    print(f"fixed: load_suite of the {len(suite.cases)}-case suite in process {load_seconds:.2f}"
          f" s CPU; `callgate score` of one line {big:.2f} s CPU against {small:.2f} s on a "
          f"1-case suite: {big - small:.2f} s more")
    return 0 if ours_right == bfcl_right else 1


if __name__ == "__main__":
    sys.exit(main())
