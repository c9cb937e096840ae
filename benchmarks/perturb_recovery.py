"""Does `run --perturb mask-names` recover what a model was scripted to lose? A loopback model
(tests/name_model.py) finds the right tool by its name, and with the names masked finds it by
its description with probability p: the true right-tool drop is 100·(1 − p) points and the
true robustness figure 100·p. Over N seeded runs (each its own server seed and perturbation
seed), this prints beside the scripted truth: the mean measured drop, how often the paired 95%
interval held the truth (coverage), and the mean robustness figure.

    uv run python benchmarks/perturb_recovery.py [--runs 10] [--cases 100] [--repeats 2]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rich.console import Console

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from conftest import KEY, KEY_ENV, LOOKUP, write_suite  # noqa: E402
from factories import TRACK_SHIPMENT  # noqa: E402
from live_runs import candidate, settings  # noqa: E402
from loopback import Loopback  # noqa: E402
from name_model import NameModel  # noqa: E402

from callgate.cli.perturbing import run_perturbed, specs_of  # noqa: E402
from callgate.running.run import LiveRun, run_live  # noqa: E402
from callgate.running.settings import RunSettings  # noqa: E402
from callgate.store.db import Store  # noqa: E402
from callgate.suites.suite import Suite, load_suite  # noqa: E402

TOOLS = [LOOKUP, TRACK_SHIPMENT]


def cases(count: int) -> list[dict[str, Any]]:
    out = []
    for index in range(count):
        tool = "lookup_order" if index % 2 == 0 else "track_shipment"
        out.append({"id": f"c{index:03d}", "tags": ["clean"],
                    "messages": [{"role": "user", "content": f"[c{index:03d}] {tool} ord_1"}],
                    "expect": {"type": "calls",
                               "calls": [{"tool": tool, "args": {"order_id": "ord_1"}}]}})
    return out


def one(store: Store, suite: Suite, p: float, seed: int, repeats: int
        ) -> tuple[float, float, float, float]:
    """(drop, interval low, interval high, robustness) of one seeded run."""
    with Loopback(default=NameModel(TOOLS, p=p, seed=seed)) as server:
        def run(on: Suite, with_settings: RunSettings) -> LiveRun:
            return run_live(on, candidate(server), store, release=f"s{seed}",
                            settings=with_settings, environ={KEY_ENV: KEY})

        out = run_perturbed(store, suite, "cand", f"s{seed}",
                            settings(repeats=repeats, concurrency=16),
                            specs_of(["mask-names"], seed), run, max_drop=None,
                            max_excluded=0.2)
    assert out.robustness is not None and out.robustness.figure is not None
    figure = out.robustness.perturbations[0].right_tool
    assert figure is not None
    return figure.drop, figure.low, figure.high, out.robustness.figure


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--cases", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    console = Console(width=120)
    console.print(f"{args.runs} seeded runs a row, {args.cases} cases, {args.repeats} repeats "
                  "(the clean run from the store after the first)")
    console.print(f"{'scripted p':>10}  {'true drop':>9}  {'mean drop':>9}  "
                  f"{'coverage':>8}  {'true robustness':>15}  {'mean robustness':>15}  "
                  f"{'s':>5}")
    with tempfile.TemporaryDirectory() as folder:
        suite = load_suite(write_suite(Path(folder) / "suite", cases(args.cases), TOOLS))
        for p in (0.3, 0.6, 0.9):
            started = time.perf_counter()
            with Store(Path(folder) / f"p{p}.db") as store:
                found = [one(store, suite, p, seed, args.repeats) for seed in range(args.runs)]
            truth = 100 * (1 - p)
            drop = sum(f[0] for f in found) / len(found)
            covered = sum(1 for f in found if f[1] <= truth <= f[2]) / len(found)
            robustness = sum(f[3] for f in found) / len(found)
            console.print(f"{p:>10.1f}  {truth:>9.1f}  {drop:>9.1f}  {covered:>8.0%}  "
                          f"{100 * p:>15.1f}  {robustness:>15.1f}  "
                          f"{time.perf_counter() - started:>5.1f}", highlight=False)


if __name__ == "__main__":
    main()
