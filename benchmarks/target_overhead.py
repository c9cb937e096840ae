"""What a Python target costs beyond a model call: `callgate run` on 2,000 attempts at concurrency
64 against a loopback server answering after 50 ms, measured in one process run four ways:

- `lean`: the model called directly with the lean client (run_throughput.py's lean path);
- `target`: an async Python target whose agent makes the same request with the same lean
  client and returns the message; its CPU minus `lean`'s is the target path's overhead
  (request building, the contract's reading of the reply, the target's cache key and record);
- `async-canned` and `sync-canned`: targets that answer at once without a model; their
  difference is what running a sync function on callgate's threads adds.

The server runs in its own process, so getrusage of this one is callgate's and the agent's.
The four are measured in turn, `--rounds` times, and each one's median is reported: on a shared
machine one round's figures move by a few tenths of a millisecond. The issue's bound: the
target path's overhead is at most 0.5 ms CPU per attempt.

    .venv/bin/python benchmarks/target_overhead.py [--attempts 2000] [--concurrency 64]
        [--latency 0.05] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import io
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from run_throughput import KEY_ENV, cpu_seconds, start_server, write_suite

from callgate.models.config import Candidate
from callgate.models.lean import LeanClient
from callgate.models.replies import Reply
from callgate.models.routes import route_for
from callgate.running.run import LiveRunner
from callgate.running.settings import RunSettings
from callgate.store.db import Store
from callgate.suites.suite import load_suite

MODULE = "target_overhead_bench"  # this file, as the Python targets import it
BOUND_MS = 0.5
MODEL = "openrouter/bench/model"
CANNED = {"role": "assistant", "content": None, "tool_calls": [{
    "id": "call_1", "type": "function",
    "function": {"name": "lookup_order", "arguments": '{"order_id": "ord_1"}'}}]}
agent: dict[str, Any] = {}  # the agent's own route and client (one per event loop): set by main


async def model_agent(messages: list[dict[str, Any]], tools: list[dict[str, Any]],
                      metadata: dict[str, Any]) -> dict[str, Any]:
    route = agent["route"]
    if "client" not in agent:  # made on the target's own event loop, as a real agent's is
        agent["client"] = LeanClient(route, "bench-key", agent["concurrency"])
        agent["loop"] = asyncio.get_running_loop()
    sent = await agent["client"].send(route.body(messages, tools), 60)
    assert isinstance(sent, Reply), sent
    return {"message": sent.body["choices"][0]["message"], "usage": sent.body.get("usage")}


async def async_canned(messages: list[dict[str, Any]], tools: list[dict[str, Any]],
                       metadata: dict[str, Any]) -> dict[str, Any]:
    return CANNED


def sync_canned(messages: list[dict[str, Any]], tools: list[dict[str, Any]],
                metadata: dict[str, Any]) -> dict[str, Any]:
    return CANNED


for _function in (model_agent, async_canned, sync_canned):
    _function.callgate_version = "bench"  # type: ignore[attr-defined]


def measure(name: str, candidate: Candidate, suite_root: Path, repeats: int, concurrency: int,
            work: Path) -> tuple[float, float]:
    suite = load_suite(suite_root)
    settings = RunSettings(repeats=repeats, concurrency=concurrency, timeout=60)
    console = Console(file=io.StringIO(), force_terminal=True, width=120)
    with Store(work / f"{name}.db") as store:
        runner = LiveRunner(suite, candidate, store, "bench", settings=settings,
                            environ={KEY_ENV: "bench-key"}, console=console,
                            keep_verdicts=False)

        agent["concurrency"] = concurrency
        cpu, wall = cpu_seconds(), time.perf_counter()
        live = asyncio.run(runner.run())
        wall, cpu = time.perf_counter() - wall, cpu_seconds() - cpu
        _close_agent_client()
    assert live.called == repeats * len(suite.cases), live.summary()
    assert live.provider_errors == 0, live.summary()
    return wall, cpu


def _close_agent_client() -> None:
    """Close the agent's client on its loop, once the run has stopped that loop."""
    client, loop = agent.pop("client", None), agent.pop("loop", None)
    if client is None or loop is None or loop.is_closed():
        return
    while loop.is_running():
        time.sleep(0.01)
    loop.run_until_complete(client.aclose())
    loop.close()


def candidates(url: str) -> dict[str, Candidate]:
    return {
        "lean": Candidate(name="bench-lean", model=MODEL, api_base=url, api_key_env=KEY_ENV,
                          client="lean"),
        "target": Candidate(target=f"python:{MODULE}:model_agent", model=MODEL),
        "async-canned": Candidate(target=f"python:{MODULE}:async_canned"),
        "sync-canned": Candidate(target=f"python:{MODULE}:sync_canned"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--attempts", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    sys.modules[MODULE] = sys.modules[__name__]
    repeats = 20
    cases = max(1, args.attempts // repeats)
    attempts = cases * repeats
    server, url = start_server(args.latency)
    lean = Candidate(name="agent", model=MODEL, api_base=url, api_key_env=KEY_ENV)
    agent["route"] = route_for(lean)
    rounds: dict[str, list[float]] = {}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            warm_root = write_suite(work / "warm", 4)
            for name, candidate in candidates(url).items():
                # Warm up: sessions, lazy imports and the target's import are not overhead.
                measure(name, candidate, warm_root, 1, 4, work / "warm")
            for round_ in range(args.rounds):
                suite_root = write_suite(work / f"suite-{round_}", cases)
                for name, candidate in candidates(url).items():
                    wall, cpu = measure(name, candidate, suite_root, repeats,
                                                args.concurrency, work / f"suite-{round_}")
                    rounds.setdefault(name, []).append(cpu * 1000 / attempts)
                    print(f"round {round_ + 1} {name:<13} wall {wall:6.2f} s  CPU "
                          f"{rounds[name][-1]:5.3f} ms/attempt", flush=True)
    finally:
        server.kill()
        server.wait()
    cpu_ms = {name: statistics.median(values) for name, values in rounds.items()}
    for name, value in cpu_ms.items():
        print(f"{name:<13} median CPU {value:5.3f} ms/attempt")
    overhead = cpu_ms["target"] - cpu_ms["lean"]
    hop = cpu_ms["sync-canned"] - cpu_ms["async-canned"]
    print(f"{attempts} attempts, concurrency {args.concurrency}, server latency "
          f"{args.latency * 1000:.0f} ms")
    print(f"Python target overhead (target - lean): {overhead:.3f} ms CPU per attempt "
          f"(bound {BOUND_MS} ms: {'met' if overhead <= BOUND_MS else 'NOT met'}); a sync "
          f"function's thread adds {hop:.3f} ms")


if __name__ == "__main__":
    main()
