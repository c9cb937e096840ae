"""Reading traces against reading the same attempts in callgate's own recorded format.

The six conversations of tests/importers/test_traces.py are run once through the real
instrumentation (GenAI or OpenInference, around the openai client and the loopback server),
exported as OTLP JSON, and copied under fresh trace ids into a file of N traces (the repeats of
the six cases). Reported: attempts read a second by `trace_responses` (the OTLP JSON parsed,
spans read, lines built and checked, as `score --traces` does before scoring) beside
`read_response_lines` on the same attempts written in callgate's format (the reference), and
the two files' sizes.

    uv run python benchmarks/traces_read.py [--traces 3000]
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "importers"))

import pytest
from conftest import write_suite
from test_traces import CASES, TOOLS, own_format, record

from callgate.scoring.traces import trace_responses
from callgate.suites.responses import read_response_lines
from callgate.suites.suite import load_suite


def copies(documents: list[dict], count: int) -> list[dict]:
    out = []
    for index in range(count):
        document = copy.deepcopy(documents[index % len(documents)])
        for resource in document["resourceSpans"]:
            for scope in resource["scopeSpans"]:
                for span in scope["spans"]:
                    span["traceId"] = f"{index:032x}"
                    span["startTimeUnixNano"] = str(int(span["startTimeUnixNano"]) + index)
        out.append(document)
    return out


def best_of(runs: int, work) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", type=int, default=3000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        root = Path(work)
        suite = load_suite(write_suite(root / "suite", CASES, TOOLS))
        for instrumentation in ("genai", "openinference"):
            traced = record(instrumentation, pytest.MonkeyPatch())
            ordered = traced.documents  # one a trace, in the order of CASES
            traces = root / f"{instrumentation}.jsonl"
            traces.write_text("".join(json.dumps(d) + "\n"
                                      for d in copies(ordered, args.traces)))
            own = root / f"{instrumentation}-own.jsonl"
            own.write_text("".join(
                json.dumps({**own_format(CASES[i % len(CASES)]), "repeat": i // len(CASES)})
                + "\n" for i in range(args.traces)))
            read = best_of(3, lambda: trace_responses(suite, traces))  # noqa: B023
            reference = best_of(3, lambda: list(read_response_lines(
                own, set(suite.cases),  # noqa: B023
                {c for c, case in suite.cases.items() if suite.loops(case)},
                {c: case for c, case in suite.cases.items() if case.user_turns})))
            print(f"{instrumentation:>13}: {args.traces} traces read in {read:.3f} s "
                  f"({args.traces / read:,.0f} attempts/s, {os.path.getsize(traces) / 1e6:.1f} "
                  f"MB); own format {reference:.3f} s ({args.traces / reference:,.0f} "
                  f"attempts/s, {os.path.getsize(own) / 1e6:.1f} MB); x{read / reference:.1f}")


if __name__ == "__main__":
    main()
