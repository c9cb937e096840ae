"""The slice rule (gating/slices.py) in a seeded simulation: does it hold the family-wise error
rate it states, and does it find a real drop in one slice?

Usage: uv run python benchmarks/slice_gate.py [RUNS] [--seed N]

Each run builds 20 slices of 200 paired cases, one attempt a case, the right tool and the right
arguments decided together (the two figures of a slice are then one test twice: 40 tests,
which is conservative). A case passes in the baseline with probability 0.85; in the
release, 1% (then 2%) of a slice's cases flip from pass to fail and as many from fail to pass
(background noise that keeps the share where it was). Under the null nothing else changes; in
the drop scenario one slice loses 10 more points (10% of its cases flip from pass to fail on
top).
The real functions decide (slice_figures, gate_slices), with the default margin of 2 points and
alpha 0.05, every slice gated.

Printed: how often any slice fails under the null (the family-wise false failure rate, which
the rule states is at most alpha), and how often the dropped slice is found; beside them, the
reference measured in the same runs: the same rule without Holm's correction (each slice's
own McNemar p at alpha), which is what gating 20 slices naively would do.
"""

from __future__ import annotations

import math
import random
import sys
import time
from collections import Counter

from callgate.gating.cases import Tally
from callgate.gating.slices import SliceRule, gate_slices, slice_figures

SLICES, CASES, PASS, DROP = 20, 200, 0.85, 0.10
NOISES = (0.01, 0.02)  # the share of a slice's cases flipping each way with no real change
MARGIN, ALPHA = 2.0, 0.05


def one_slice(rng: random.Random, drop: float, noise: float) -> Counter[tuple[Tally, Tally]]:
    """A slice's paired cases counted by (tally then, tally now)."""
    worse_given_pass = (noise + drop) / PASS
    better_given_fail = noise / (1 - PASS)
    counts: Counter[tuple[Tally, Tally]] = Counter()
    for _ in range(CASES):
        then = rng.random() < PASS
        flip = rng.random() < (worse_given_pass if then else better_given_fail)
        now = then != flip
        counts[(1, int(then), int(then)), (1, int(now), int(now))] += 1
    return counts


def run(rng: random.Random, dropped: bool, noise: float
        ) -> tuple[bool, bool, bool, bool, bool]:
    """(any slice failed, the dropped slice failed, any failed without Holm, the dropped one
    failed without Holm, a slice other than the dropped one failed); slice t00 is the
    dropped one."""
    pairs = {f"tag:t{i:02d}": one_slice(rng, DROP if dropped and i == 0 else 0.0, noise)
             for i in range(SLICES)}
    attempts = {mark: (CASES, CASES, CASES, CASES) for mark in pairs}
    slices, gate = gate_slices(slice_figures(pairs, attempts),
                               SliceRule(per_tag=["all"], alpha=ALPHA), MARGIN)
    naive = {s.name for s in slices
             if any(f.change is not None and -f.change > MARGIN and f.mcnemar_p is not None
                    and f.mcnemar_p <= ALPHA for f in (s.right_tool, s.right_arguments))}
    return (bool(gate.failed), "tag t00" in gate.failed, bool(naive), "t00" in naive,
            bool(set(gate.failed) - {"tag t00"}))


def interval(hits: int, n: int) -> str:
    """The share with its Wilson 95% interval, in percent."""
    p, z = hits / n, 1.96
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return f"{100 * p:5.1f}% [{100 * (centre - half):.1f}–{100 * (centre + half):.1f}]"


def main() -> None:
    args = sys.argv[1:]
    seed = 33
    if "--seed" in args:
        seed = int(args[args.index("--seed") + 1])
        del args[args.index("--seed"):args.index("--seed") + 2]
    numbers = [a for a in args if a.isdigit()]
    runs = int(numbers[0]) if numbers else 1000
    rng = random.Random(seed)
    print(f"slice rule: {SLICES} slices of {CASES} paired cases, baseline pass rate {PASS:.0%}; "
          f"margin {MARGIN:g} points, alpha {ALPHA:g}, {2 * SLICES} tests (Holm over those "
          f"that can reject, Tarone's set); {runs} runs a scenario, seed {seed}")
    for noise in NOISES:
        start = time.perf_counter()
        null = [run(rng, False, noise) for _ in range(runs)]
        drop = [run(rng, True, noise) for _ in range(runs)]
        seconds = time.perf_counter() - start
        print(f"{noise:.0%} of cases flipping each way without a real change ({seconds:.0f} s):")
        print(f"  null (no real change): family-wise false failures "
              f"{interval(sum(r[0] for r in null), runs)}   (stated: at most {ALPHA:.0%})")
        print(f"    reference, no correction (each slice at alpha): "
              f"{interval(sum(r[2] for r in null), runs)}")
        print(f"  one slice {DROP:.0%} down: found {interval(sum(r[1] for r in drop), runs)}   "
              f"(goal: at least 80%); another slice failed too in {sum(r[4] for r in drop)} "
              "runs")
        print(f"    reference, no correction: found {interval(sum(r[3] for r in drop), runs)}")

if __name__ == "__main__":
    main()
