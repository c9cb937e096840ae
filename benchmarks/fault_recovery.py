"""Recovery per fault kind (docs/faults.md) against the probability it should recover: a
loopback model (tests/fault_model.py) retries a faulted lookup with a scripted probability p,
seeded; each case's first lookup fails (a fault plan per kind), and the case expects a retry and
no claim of success. For each p and seed, one live run of `--cases` cases × `--repeats`; printed
beside the figure: the p it was given and the share of faults the model actually retried (the
reference, counted by the model itself in the same run), and whether the Wilson 95% interval
holds p. Also the wall time of the run against the same run without the plan.

    uv run python benchmarks/fault_recovery.py [--cases 30] [--repeats 4] [--seeds 5]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from fault_model import RetryingModel  # noqa: E402
from loopback import Loopback  # noqa: E402

from callgate.models.config import Candidate  # noqa: E402
from callgate.models.retry import RetryPolicy  # noqa: E402
from callgate.running.run import run_live  # noqa: E402
from callgate.running.settings import RunSettings  # noqa: E402
from callgate.scoring.scores import Share  # noqa: E402
from callgate.store.db import Store  # noqa: E402
from callgate.suites.suite import load_suite  # noqa: E402

KEY_ENV = "BENCH_KEY"
KINDS = ("timeout", "rate_limit", "server_error", "validation_error", "empty", "truncated")
ENV_PY = '''
class Shop:
    def __init__(self, state):
        self._state = state

    def state(self):
        return self._state

    def lookup_order(self, order_id):
        return {"order_id": order_id, "status": "pending"}
'''
TOOLS = [{"type": "function", "function": {
    "name": "lookup_order", "description": "Look up one order.",
    "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}},
                   "required": ["order_id"]}}}]


def write_suite(root: Path, cases: int, faulted: bool) -> Path:
    root.mkdir(parents=True)
    (root / "env.py").write_text(ENV_PY)
    (root / "tools.json").write_text(json.dumps(TOOLS))
    (root / "suite.json").write_text(json.dumps({"name": "faults", "environment": "env:Shop"}))
    lines = []
    for i in range(cases):
        case = {"id": f"k{i}", "messages": [{"role": "user", "content": f"[k{i}] ord_1?"}],
                "state": {}, "expect": {"type": "trajectory", "mode": "superset",
                                        "calls": [{"tool": "lookup_order"}]}}
        if faulted:
            case["faults"] = [{"tool": "lookup_order", "kind": KINDS[i % len(KINDS)],
                               "calls": [1]}]
            case["after_fault"] = {"retries": 2, "no_success_claim": True}
        lines.append(json.dumps(case) + "\n")
    (root / "cases.jsonl").write_text("".join(lines))
    return root


def one_run(tmp: Path, name: str, p: float, seed: int, cases: int, repeats: int,
            faulted: bool) -> tuple[dict, RetryingModel, float]:
    model = RetryingModel(p, seed=seed)
    server = Loopback(default=model, record=False).start()
    try:
        suite = load_suite(write_suite(tmp / name, cases, faulted))
        candidate = Candidate(name="m", model="openrouter/test/model",
                              api_base=server.base_url, api_key_env=KEY_ENV)
        settings = RunSettings(repeats=repeats, concurrency=16, timeout=10, progress=False,
                               retry=RetryPolicy(base_delay=0.01))
        started = time.perf_counter()
        with Store(tmp / f"{name}.db") as store:
            live = run_live(suite, candidate, store, release="r1", settings=settings,
                            environ={KEY_ENV: "x"})
        elapsed = time.perf_counter() - started
    finally:
        server.stop()
    return dict(live.result.scores.recovery or {}), model, elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cases", type=int, default=30)
    parser.add_argument("--repeats", type=int, default=4)
    parser.add_argument("--seeds", type=int, default=5)
    args = parser.parse_args()
    covered = total = 0
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        print(f"{args.cases} cases x {args.repeats} repeats per run, the first lookup of each "
              "case faulted (6 kinds in turn)")
        print(f"{'p':>4} {'seed':>4} {'retried (model)':>16} {'recovery (callgate)':>20} "
              f"{'Wilson 95%':>16} {'holds p':>8} {'wall s':>7}")
        for p in (0.2, 0.5, 0.8):
            for seed in range(1, args.seeds + 1):
                recovery, model, wall = one_run(tmp, f"p{p}-s{seed}", p, seed, args.cases,
                                                args.repeats, True)
                successes = sum(s.successes for s in recovery.values())
                n = sum(s.n for s in recovery.values())
                pooled = Share.of(successes, n)
                holds = pooled.low is not None and pooled.high is not None and \
                    pooled.low <= 100 * p <= pooled.high
                covered += holds
                total += 1
                realised = model.retried / max(model.retried + model.gave_up, 1)
                print(f"{p:>4} {seed:>4} {100 * realised:>15.1f}% {pooled.pct:>19.1f}% "
                      f"{f'[{pooled.low:.1f}, {pooled.high:.1f}]':>16} {holds!s:>8} "
                      f"{wall:>7.2f}")
                kinds = ", ".join(f"{k} {s.pct:.0f}% of {s.n}" for k, s in recovery.items())
                print(f"          per kind: {kinds}")
        _, _, clean = one_run(tmp, "clean", 1.0, 1, args.cases, args.repeats, False)
        _, _, faulted = one_run(tmp, "faulted", 1.0, 1, args.cases, args.repeats, True)
    print(f"the interval held p in {covered} of {total} runs (about 95% expected)")
    print(f"wall time of one run: {clean:.2f} s without the plan, {faulted:.2f} s with it "
          "(one more turn per conversation)")


if __name__ == "__main__":
    main()
