"""Throughput of `callgate run`: 2,000 attempts at concurrency 64 against a loopback server
that answers every request after 50 ms.

The server runs in its own process, so the CPU measured here (getrusage of this process) is the
client's alone: scheduling, the HTTP client, parsing, checks, the store and the progress bar,
i.e. the whole live-run stage as `callgate run` executes it. Both client paths are measured:
the lean aiohttp path and litellm. Ideal wall time = attempts / concurrency × latency.
`--concurrency 0` runs with callgate's adaptive default instead (the ideal stays the one at 64:
an unlimited server should see adaptive runs as fast as a well-chosen fixed setting).

    .venv/bin/python benchmarks/run_throughput.py [--attempts 2000] [--concurrency 64]
        [--latency 0.05] [--paths lean,litellm]
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console

from callgate.models.config import Candidate
from callgate.models.litellm_client import import_litellm
from callgate.running.run import LiveRunner
from callgate.running.settings import RunSettings
from callgate.store.db import Store
from callgate.suites.suite import load_suite

ROOT = Path(__file__).resolve().parent.parent
KEY_ENV = "BENCH_KEY"
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "lookup_order",
            "description": "Look up an order by its id.",
            "parameters": {
                "type": "object",
                "properties": {"order_id": {"type": "string", "pattern": "^ord_[0-9]+$"}},
                "required": ["order_id"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "track_shipment",
            "description": "Where is the parcel?",
            "parameters": {
                "type": "object",
                "properties": {"order_id": {"type": "string"}},
                "required": ["order_id"],
            },
        },
    },
]


def write_suite(root: Path, cases: int) -> Path:
    root.mkdir(parents=True)
    (root / "tools.json").write_text(json.dumps(TOOLS))
    lines = []
    for index in range(cases):
        lines.append(
            json.dumps(
                {
                    "id": f"case-{index:04d}",
                    "messages": [{"role": "user", "content": f"Where is order ord_{index}?"}],
                    "expect": {
                        "type": "calls",
                        "calls": [{"tool": "lookup_order", "args": {"order_id": f"ord_{index}"}}],
                    },
                }
            )
        )
    (root / "cases.jsonl").write_text("\n".join(lines) + "\n")
    return root


def start_server(latency: float) -> tuple[subprocess.Popen, str]:
    process = subprocess.Popen(
        [sys.executable, str(ROOT / "tests" / "loopback.py"), "--latency", str(latency)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line.startswith("READY "):
        process.kill()
        raise RuntimeError(f"the loopback server did not start: {line!r}")
    return process, line.split()[1]


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def measure(path: str, url: str, suite_root: Path, repeats: int, concurrency: int | None,
            work: Path):
    suite = load_suite(suite_root)
    candidate = Candidate(
        name=f"bench-{path}",
        model="openrouter/bench/model",
        api_base=url,
        api_key_env=KEY_ENV,
        client=path,
    )
    settings = RunSettings(repeats=repeats, concurrency=concurrency, timeout=60)
    # A rendered progress bar, as on a terminal, into a buffer.
    console = Console(file=io.StringIO(), force_terminal=True, width=120)
    with Store(work / f"{path}.db") as store:
        runner = LiveRunner(
            suite,
            candidate,
            store,
            "bench",
            settings=settings,
            environ={KEY_ENV: "bench-key"},
            console=console,
            keep_verdicts=False,
        )
        cpu, wall = cpu_seconds(), time.perf_counter()
        live = asyncio.run(runner.run())
        wall, cpu = time.perf_counter() - wall, cpu_seconds() - cpu
    assert live.called == repeats * len(suite.cases), live.summary()
    assert live.provider_errors == 0, live.summary()
    return wall, cpu, live


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--attempts", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--paths", default="lean,litellm")
    args = parser.parse_args()
    repeats = 20
    cases = max(1, args.attempts // repeats)
    attempts = cases * repeats
    ideal = attempts / (args.concurrency or 64) * args.latency
    paths = [p.strip() for p in args.paths.split(",") if p.strip()]
    if "litellm" in paths:
        import_litellm()  # seconds of import, not part of any run
    server, url = start_server(args.latency)
    rows = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            suite_root = write_suite(work / "suite", cases)
            warm_root = write_suite(work / "warm", 4)
            for path in paths:
                # Warm up: first-call set-up (sessions, lazy imports) is not throughput.
                measure(path, url, warm_root, 1, 4, work / "warm")
                wall, cpu, live = measure(path, url, suite_root, repeats,
                                          args.concurrency or None, work)
                rows.append((path, wall, cpu, live.requests, live.pacing))
    finally:
        server.kill()
        server.wait()
    print(
        f"{attempts} attempts, concurrency {args.concurrency or 'adaptive'}, server latency "
        f"{args.latency * 1000:.0f} ms; ideal wall time {ideal:.2f} s"
    )
    print(f"{'path':<8} {'wall s':>8} {'ratio':>7} {'CPU ms/attempt':>15} {'requests':>9} "
          "pacing")
    for path, wall, cpu, requests, pacing in rows:
        print(
            f"{path:<8} {wall:>8.2f} {wall / ideal:>7.2f} {cpu * 1000 / attempts:>15.2f} "
            f"{requests:>9} {pacing}"
        )


if __name__ == "__main__":
    main()
