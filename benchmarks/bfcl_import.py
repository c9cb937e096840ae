"""Import BFCL categories and score them with responses built from their possible answers.

    .venv/bin/python benchmarks/bfcl_import.py [WHEEL] [--category NAME ...] [--crosscheck]

WHEEL is the bfcl-eval wheel (or a BFCL data folder); without it, the newest wheel in
/tmp/bfcl is used, or one is fetched there with `pip download --no-deps bfcl-eval`.
Prints, per category, import and scoring speed in cases per second and the share of cases
judged right (every response is built to be right, so anything below 100% is a finding).
With --crosscheck, every category is also scored with perturbed responses (wrong function,
wrong count, missing, unknown and unlisted parameters, wrong types, values outside the lists,
optional parameters left out ...) and each verdict compared with BFCL's own AST checker,
loaded from the same wheel. With --multi-turn, the four multi-turn categories are imported
from the wheel and every entry's ground truth and its perturbations (a turn left empty, a call
dropped, calls reversed or one a step, an extra call, a call to a missing function, an argument
changed, a call made a turn early) are
scored and compared with BFCL's own multi_turn_checker, loaded from the wheel; BFCL's MathAPI
needs mpmath, which callgate installs (`uv run python benchmarks/bfcl_import.py WHEEL
--multi-turn`).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from callgate.importers.bfcl import CATEGORIES, answer_lines, import_category, read_category
from callgate.scoring.pipeline import score_file
from callgate.store.db import Store
from callgate.suites.suite import load_suite

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the BFCL fixture
from bfcl_fixture import load_harness

DOWNLOADS = Path("/tmp/bfcl")


def find_wheel(given: Path | None) -> Path:
    if given is not None:
        return given
    wheels = sorted(DOWNLOADS.glob("bfcl_eval-*.whl"))
    if not wheels:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "bfcl-eval", "-d", DOWNLOADS],
            check=True,
        )
        wheels = sorted(DOWNLOADS.glob("bfcl_eval-*.whl"))
    return wheels[-1]



def bench(source: Path, category: str, work: Path, repeat: int) -> None:
    import_times, score_times = [], []
    verdicts: list[Any] = []
    for attempt in range(repeat):
        out = work / f"{category}-{attempt}"
        start = time.perf_counter()
        result = import_category(source, category, out)
        import_times.append(time.perf_counter() - start)
        suite = load_suite(out)
        responses = out / "answers.jsonl"
        responses.write_text("".join(line + "\n" for line in answer_lines(suite)))
        with Store(work / f"{category}-{attempt}.db") as store:
            start = time.perf_counter()
            run = score_file(suite, responses, store, model="possible-answers", release="bench")
            score_times.append(time.perf_counter() - start)
        verdicts = run.verdicts
    cases = result.cases
    right_tool = sum(v.right_tool for v in verdicts)
    right_args = sum(v.right_arguments for v in verdicts)
    imp, sco = statistics.median(import_times), statistics.median(score_times)
    entries = cases
    print(f"{category}: {entries} BFCL entries, {cases} cases, {result.tools} tools")
    print(
        f"  import (read, convert, write, load back): {imp:.3f} s = {entries / imp:,.0f} "
        f"entries/s; score (check, store): {sco:.3f} s = {cases / sco:,.0f} cases/s "
        f"(median of {repeat})"
    )
    print(f"  end to end: {cases / (imp + sco):,.0f} cases/s")
    print(
        f"  right tool {100 * right_tool / cases:.1f}% ({right_tool}/{cases}), "
        f"right arguments {100 * right_args / cases:.1f}% ({right_args}/{cases})"
    )
    for verdict in verdicts:
        if not verdict.right_arguments:
            print(f"  NOT RIGHT {verdict.case_id}: {verdict.reason}")
    if result.renamed:
        print(f"  {result.renamed} docs kept under a _vN key, sent under BFCL's name")
    for never in result.never_right:
        print(f"  never right {never.id}: BFCL's checker never passes it: {never.reason}")


def crosscheck(source: Path, category: str, work: Path, harness: Any) -> bool:
    reference = harness.Reference(harness.load_ast_checker(source))
    out = work / f"x-{category}"
    import_category(source, category, out)
    suite = load_suite(out)
    data = read_category(source, category)
    entries = {e.id: e for e in data.entries}
    expected: dict[tuple[str, int], tuple[str, bool]] = {}
    with (out / "perturbed.jsonl").open("w") as handle:
        for case in suite.cases.values():
            entry = entries[case.id]
            names = harness.bfcl_names(case, entry)
            for repeat, (label, message) in enumerate(harness.perturbations(suite, case)):
                handle.write(
                    json.dumps({"case_id": case.id, "repeat": repeat, "response": message}) + "\n"
                )
                valid = reference.valid(category, entry, data.answers.get(case.id), message, names)
                expected[(case.id, repeat)] = (label.split("@")[0].split(":")[0], valid)
    with Store(work / f"x-{category}.db") as store:
        start = time.perf_counter()
        run = score_file(suite, out / "perturbed.jsonl", store, model="perturbed", release="x")
        seconds = time.perf_counter() - start
    known = harness.KNOWN_DIFFERENCES[CATEGORIES[category]]
    agree, documented = 0, Counter[str]()
    other: list[tuple[str, str, bool, str]] = []
    for verdict in run.verdicts:
        label, valid = expected[(verdict.case_id, verdict.repeat)]
        if verdict.right_arguments == valid:
            agree += 1
        elif label in known:
            documented[label] += 1
        else:
            other.append((verdict.case_id, label, valid, verdict.reason))
    total = len(run.verdicts)
    bfcl_right = sum(valid for _, valid in expected.values())
    print(
        f"{category}: {total} responses ({bfcl_right} right for BFCL), scored at "
        f"{total / seconds:,.0f}/s; same verdict as BFCL's checker: {agree}; documented "
        f"differences: {dict(documented) or 0}; other differences: {len(other)}"
    )
    for case_id, label, valid, reason in other[:20]:
        print(f"  DIFFERS {case_id} {label}: BFCL {'right' if valid else 'wrong'}; {reason}")
    return not other


def multi_turn_crosscheck(wheel: Path, work: Path) -> bool:
    """Every multi-turn entry's generated answers: callgate's verdict against BFCL's."""
    import importlib.util
    import zipfile

    from callgate.checks.check import check_response
    from callgate.importers.bfcl import MULTI_TURN_CATEGORIES
    from callgate.suites.responses import parse_response

    path = Path(__file__).resolve().parents[1] / "tests/fixtures/bfcl/multi_turn_harness.py"
    spec = importlib.util.spec_from_file_location("bfcl_multi_turn_harness", path)
    assert spec is not None and spec.loader is not None
    harness = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(harness)
    suite = load_suite(import_category(wheel, list(MULTI_TURN_CATEGORIES), work / "mt").out)
    checker = harness.load_bfcl_checker(wheel)
    differ = 0
    with zipfile.ZipFile(wheel) as archive:
        for category in MULTI_TURN_CATEGORIES:
            def lines(name: str) -> list[dict[str, Any]]:
                return [json.loads(line) for line in archive.read(name).decode().splitlines()]
            entries = lines(f"bfcl_eval/data/BFCL_v4_{category}.json")
            ground = {a["id"]: a["ground_truth"] for a in lines(
                f"bfcl_eval/data/possible_answer/BFCL_v4_{category}.json")}
            ours = theirs = total = 0
            for entry in entries:
                case = suite.cases[entry["id"]]
                env = suite.environment(case.state)
                for label, answer in harness.perturbations(
                        harness.ground_truth_answer(env, ground[entry["id"]])):
                    verdict = check_response(
                        case, parse_response(harness.recorded_line(entry["id"], answer)),
                        suite.parameter_schemas, suite.validators, rules=suite.match,
                        environment=suite.environment)
                    right = verdict.status == "scored" and bool(verdict.right_arguments)
                    valid = harness.bfcl_valid(checker, entry, ground[entry["id"]], answer)
                    total, ours, theirs = total + 1, ours + right, theirs + valid
                    if right != valid:
                        differ += 1
                        print(f"  DIFFERS {entry['id']} {label}: BFCL {valid}; "
                              f"{verdict.tool_reason} {verdict.arguments_reason}")
            print(f"{category}: {total} answers, right {ours} (callgate) / {theirs} (BFCL)")
    return differ == 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source", nargs="?", type=Path, help="bfcl-eval wheel or data folder")
    parser.add_argument("--category", action="append", choices=list(CATEGORIES))
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per category")
    parser.add_argument(
        "--crosscheck", action="store_true", help="compare verdicts with BFCL's own checker"
    )
    parser.add_argument("--multi-turn", action="store_true",
                        help="compare multi-turn verdicts with BFCL's multi_turn_checker")
    args = parser.parse_args()
    source = find_wheel(args.source)
    print(f"source: {source}")
    categories = args.category or ["simple_python", "live_multiple"]
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for category in categories:
            bench(source, category, work, args.repeat)
        if args.crosscheck:
            harness = load_harness()
            for category in args.category or list(CATEGORIES):
                ok = crosscheck(source, category, work, harness) and ok
        if args.multi_turn:
            ok = multi_turn_crosscheck(source, work) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
