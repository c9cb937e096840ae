"""The adaptive gate (`run --until-decided`) against fixed repeats, on a simulated model whose
answers are right with a per-case probability (seeded): how often each declares a regression
under no change and at a drop of exactly the margin (with peeking at every round: the
false-regression rate, which must stay at or under alpha), and under a true 5-point drop
(power), and how many attempts each makes. "points": the playbook's rule on the same data, as
the reference.

    uv run python benchmarks/adaptive_gate.py [--runs 1000] [--cases 400]
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Sequence

from callgate.gating.adaptive import until_decided
from callgate.gating.sequential import drop_of, read

FIGURES = ("right_arguments",)
DESIGNS = ("points k=1", "points k=3", "fixed k=1", "fixed k=2", "fixed k=3", "fixed k=4",
           "adaptive k=1, 3 rounds", "adaptive k=1, 6 rounds", "adaptive k=2, 4 rounds",
           "adaptive k=1, 6 rounds, peeking")


def population(rng: random.Random, cases: int, flaky: float = 0.3) -> list[float]:
    """Per-case probabilities of a right answer: most cases stable (almost always right or
    wrong, 9 to 5), a share `flaky` right with a probability between 20% and 80%."""
    out = []
    right = (1 - flaky) * 9 / 14
    for _ in range(cases):
        u = rng.random()
        out.append(0.97 if u < right else 0.03 if u < 1 - flaky else rng.uniform(0.2, 0.8))
    return out


def worse(p: Sequence[float], points: float) -> list[float]:
    """The same cases with the mean rate `points` lower (each case scaled down)."""
    scale = 1 - points / 100 / (sum(p) / len(p))
    return [q * scale for q in p]


def tallies(rng: random.Random, p: Sequence[float], k: int) -> dict[str, tuple[int, int, int]]:
    out = {}
    for i, q in enumerate(p):
        right = sum(rng.random() < q for _ in range(k))
        out[f"c{i}"] = (k, right, right)
    return out


def adaptive(rng: random.Random, base: dict, theta: Sequence[float], k: int, rounds: int,
             per_round: int, stop_on_pass: bool) -> tuple[str, int]:
    first = tallies(rng, theta, k)

    def ask(ids: Sequence[str]):
        for case_id in ids:
            right = rng.random() < theta[int(case_id[1:])]
            yield case_id, right, right

    out = until_decided(base, first, ask, figures=FIGURES, max_rounds=rounds,
                        per_round=per_round, stop_on_pass=stop_on_pass)
    return out.tier, k * len(theta) + out.extra_attempts


def fixed(rng: random.Random, base: dict, theta: Sequence[float], k: int,
          points: bool = False) -> tuple[str, int]:
    """k repeats of every case and one look: the statistical rule, or the playbook's point
    rule (a regression whenever the drop is over the margin)."""
    from callgate.gating.adaptive import pairs_of

    now = tallies(rng, theta, k)
    drop = drop_of(pairs_of(base, now), "right_arguments")
    assert drop is not None
    if points:
        return ("regression" if drop.drop > 2.0 + 1e-9 else "pass"), k * len(theta)
    return read("right_arguments", drop, 2.0).tier, k * len(theta)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--cases", type=int, default=400)
    parser.add_argument("--baseline-repeats", type=int, default=5)
    parser.add_argument("--flaky", type=float, default=0.3, help="share of flaky cases")
    parser.add_argument("--scenarios", default="0,2,5",
                        help="true drops in points, comma-separated")
    parser.add_argument("--designs", default=";".join(DESIGNS),
                        help="separated by semicolons, of: " + "; ".join(DESIGNS))
    args = parser.parse_args()
    started = time.perf_counter()
    n = args.cases
    print(f"{args.runs} seeded runs, {n} cases ({args.flaky:.0%} flaky), baseline "
          f"{args.baseline_repeats} repeats, margin 2 points, alpha 0.05 (one-sided)")
    names = {0.0: "no change", 2.0: "drop = margin (2)"}
    for points in [float(x) for x in args.scenarios.split(",")]:
        label = names.get(points, f"true {points:g}-point drop")
        rows = []
        for design in [d.strip() for d in args.designs.split(";") if d.strip()]:
            regressions = attempts = 0
            for seed in range(args.runs):
                rng = random.Random(seed)
                p = population(rng, n, args.flaky)
                theta = worse(p, points) if points else p
                base = tallies(rng, p, args.baseline_repeats)
                if design.startswith(("fixed", "points")):
                    tier, used = fixed(rng, base, theta, int(design[-1]),
                                       points=design.startswith("points"))
                else:  # "adaptive k=K, R rounds[, peeking]": rounds of one attempt a case
                    k = int(design.split("k=")[1].split(",")[0])
                    rounds = int(design.split(", ")[1].split()[0])
                    tier, used = adaptive(rng, base, theta, k, rounds, n,
                                          stop_on_pass="peeking" not in design)
                regressions += tier == "regression"
                attempts += used
            rows.append((design, regressions / args.runs, attempts / args.runs))
        print(f"\n{label}:")
        for design, rate, mean_attempts in rows:
            print(f"  {design:32s} regression {rate:6.1%}   attempts {mean_attempts:7.0f}")
    print(f"\n{time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
