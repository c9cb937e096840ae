"""`callgate run` under a provider's rate limit: adaptive concurrency against fixed settings.

A loopback OpenAI-compatible server (its own process) with a token bucket: 40 requests/s with
bursts of 20, 150 ms per answer, 429 with Retry-After (whole seconds) past the bucket, and
OpenAI's x-ratelimit-*-requests headers on every answer. 2,000 attempts each, measured with
callgate adaptive (no --concurrency) and with fixed concurrency 4, 64 and 512; then the same on
a server whose rate halves midway (after 1,000 admitted requests). Ideal wall time = the
attempts at the bucket's rate (plus, for the halving server, the second half at half the rate).
Printed for each: wall time and its ratio to the ideal, the share of requests answered 429,
the attempts that ended as provider errors (retries spent), and the pacer's limit range.

The judge server is the steady one answering a judge's calls (`JudgeStep.judge_all`, as
`score --judge` and `judge calibrate` send them): --judge-attempts distinct attempts judged
once each, adaptive and with fixed concurrency 8 (the old default) and 64; lost counts the
attempts left without a verdict (the judge's retries spent). The server's answer stands for a
verdict (its text is not parsed): what is measured is the pacing and the loop.

    .venv/bin/python benchmarks/rate_limits.py [--attempts 2000] [--rate 40] [--burst 20]
        [--latency 0.15] [--fixed 4,64,512] [--servers steady,halving,judge]
        [--judge-attempts 1000] [--judge-fixed 8,64]
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from rich.console import Console
from run_throughput import KEY_ENV, ROOT, cpu_seconds, write_suite

from callgate.judging.judge import JudgeModel, JudgeOutput, load_judge
from callgate.judging.step import JudgeStep, Outcome, Payloads
from callgate.models.config import Candidate
from callgate.running.run import LiveRunner
from callgate.running.settings import RunSettings
from callgate.store.db import Store
from callgate.suites.suite import load_suite

REPEATS = 20


def start_server(latency: float, rate: float, burst: int, halve_after: int | None
                 ) -> tuple[subprocess.Popen[str], str]:
    command = [sys.executable, str(ROOT / "tests" / "loopback.py"), "--latency", str(latency),
               "--rate", str(rate), "--burst", str(burst)]
    if halve_after is not None:
        command += ["--halve-after", str(halve_after)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line.startswith("READY "):
        process.kill()
        raise RuntimeError(f"the loopback server did not start: {line!r}")
    return process, line.split()[1]


def server_stats(url: str) -> dict[str, int]:
    with urllib.request.urlopen(f"{url}/stats", timeout=10) as answer:
        stats: dict[str, int] = json.load(answer)
        return stats


def measure(url: str, suite_root: Path, concurrency: int | None, db: Path) -> dict[str, Any]:
    suite = load_suite(suite_root)
    candidate = Candidate(name="bench", model="openai/bench-model", api_base=url,
                          api_key_env=KEY_ENV, client="lean")
    settings = RunSettings(repeats=REPEATS, concurrency=concurrency, timeout=60)
    console = Console(file=io.StringIO(), force_terminal=True, width=160)
    with Store(db) as store:
        runner = LiveRunner(suite, candidate, store, "bench", settings=settings,
                            environ={KEY_ENV: "bench-key"}, console=console,
                            keep_verdicts=False)
        cpu, wall = cpu_seconds(), time.perf_counter()
        live = asyncio.run(runner.run())
        wall, cpu = time.perf_counter() - wall, cpu_seconds() - cpu
    stats = server_stats(url)
    requests = stats["admitted"] + stats["refused"]
    return {"wall": wall, "cpu": cpu, "requests": requests, "refused": stats["refused"],
            "lost": live.provider_errors, "pacing": live.pacing or {}}


def judge_spec(work: Path, url: str) -> Path:
    (work / "judge.md").write_text((ROOT / "judges" / "tool_choice.md").read_text())
    spec = work / "judge.toml"
    spec.write_text(f'name = "bench"\nmodel = "openai/bench-judge-2026-01-01"\napi_base = "{url}"\n'
                    f'api_key_env = "{KEY_ENV}"\nprompt = "judge.md"\nretries = 0\n'
                    "[parameters]\ntemperature = 0\nsamples = 1\n"
                    "[thresholds]\ntpr = 0.9\ntnr = 0.9\nmin_items_per_class = 4\n")
    return spec


VERDICT = JudgeOutput(tool_choice="pass", arguments="pass", reason="bench").model_dump_json()


def measure_judge(url: str, work: Path, concurrency: int | None, db: Path, attempts: int
                  ) -> dict[str, Any]:
    judge = load_judge(judge_spec(work, url))
    model = JudgeModel(judge, {KEY_ENV: "bench-key"}, concurrency=concurrency, timeout=60)

    async def complete(messages: list[dict[str, Any]]) -> str | None:
        await model.complete(messages)  # a JudgeCallError when the retries are spent
        return VERDICT

    step = JudgeStep(judge, complete, None, concurrency, model.aclose, model)
    items: dict[int, Payloads | str] = {
        i: ({"tools": [], "messages": [{"role": "user", "content": f"item {i}"}],
             "rubric": "Answer."}, {"content": f"answer {i}", "tool_calls": []})
        for i in range(attempts)}
    done: dict[int, Outcome] = {}
    with Store(db) as store:
        cpu, wall = cpu_seconds(), time.perf_counter()
        asyncio.run(step.judge_all(store, items, done))
        wall, cpu = time.perf_counter() - wall, cpu_seconds() - cpu
    stats = server_stats(url)
    lost = sum(not isinstance(outcome, JudgeOutput) for outcome in done.values())
    return {"wall": wall, "cpu": cpu, "requests": stats["admitted"] + stats["refused"],
            "refused": stats["refused"], "lost": lost, "pacing": model.pacing() or {}}


def run_server(name: str, args: argparse.Namespace, suite_root: Path, work: Path,
               settings: list[int | None]) -> list[tuple[str, dict[str, Any]]]:
    attempts = args.attempts
    halve_after = attempts // 2 if name == "halving" else None
    rows = []
    for concurrency in settings:
        server, url = start_server(args.latency, args.rate, args.burst, halve_after)
        try:
            label = "adaptive" if concurrency is None else f"fixed {concurrency}"
            db = work / f"{name}-{label.replace(' ', '-')}.db"
            if name == "judge":
                row = measure_judge(url, work, concurrency, db, args.judge_attempts)
            else:
                row = measure(url, suite_root, concurrency, db)
            rows.append((label, row))
        finally:
            server.kill()
            server.wait()
    return rows


def ideal_wall(name: str, attempts: int, rate: float) -> float:
    if name == "halving":
        half = attempts // 2
        return half / rate + (attempts - half) / (rate / 2)
    return attempts / rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--attempts", type=int, default=2000)
    parser.add_argument("--rate", type=float, default=40.0)
    parser.add_argument("--burst", type=int, default=20)
    parser.add_argument("--latency", type=float, default=0.15)
    parser.add_argument("--fixed", default="4,64,512")
    parser.add_argument("--servers", default="steady,halving,judge")
    parser.add_argument("--judge-attempts", type=int, default=1000)
    parser.add_argument("--judge-fixed", default="8,64")
    args = parser.parse_args()
    cases = max(1, args.attempts // REPEATS)
    args.attempts = cases * REPEATS
    settings: list[int | None] = [None, *(int(n) for n in args.fixed.split(",") if n)]
    judge_settings: list[int | None] = [None, *(int(n) for n in args.judge_fixed.split(",")
                                                if n)]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        suite_root = write_suite(work / "suite", cases)
        for name in (s.strip() for s in args.servers.split(",") if s.strip()):
            judging = name == "judge"
            attempts = args.judge_attempts if judging else args.attempts
            ideal = ideal_wall(name, attempts, args.rate)
            rows = run_server(name, args, suite_root, work,
                              judge_settings if judging else settings)
            shape = f"{args.rate:g} requests/s, bursts of {args.burst}, " \
                f"{args.latency * 1000:.0f} ms"
            if name == "halving":
                shape += f", the rate halved after {args.attempts // 2} admitted"
            print(f"\n{name} server: {attempts} attempts, {shape}; "
                  f"ideal wall time {ideal:.1f} s")
            print(f"{'setting':<10} {'wall s':>8} {'ratio':>6} {'429 %':>6} {'requests':>9} "
                  f"{'lost':>5} {'CPU ms/att':>10} {'limit':>12} {'backoff s':>10}")
            for label, row in rows:
                pacing = row["pacing"]
                limits = f"{pacing.get('lowest')}..{pacing.get('highest')}→{pacing.get('limit')}"
                print(f"{label:<10} {row['wall']:>8.1f} {row['wall'] / ideal:>6.2f} "
                      f"{100 * row['refused'] / max(1, row['requests']):>6.1f} "
                      f"{row['requests']:>9} {row['lost']:>5} "
                      f"{row['cpu'] * 1000 / attempts:>10.2f} {limits:>12} "
                      f"{pacing.get('backoff_s', 0):>10.1f}", flush=True)


if __name__ == "__main__":
    main()
