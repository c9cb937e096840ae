"""Bias, coverage and width of the judged-share estimators, by seeded simulation: the old
closed-form PPI++ (λ tuned on the audit's own labels, independent attempts) beside the
cross-fit PPI++ `judge audit` and the gate use, for both estimands, in the same run; and the
raw and Rogan–Gladen shares as `score` reports them, clustered by case, beside the same
intervals counting attempts as independent.

Usage: uv run python benchmarks/judged_estimates.py [REPS] [SEED]

Each repetition: 250 cases of m repeats (N = 250·m judged attempts). A case has its own true
rate, θ + 0.3 or θ − 0.3 with equal chance (θ = 0.6), so with m > 1 the repeats of a case are
correlated (ICC 0.375); each attempt is truly right with its case's rate. A judge errs on the
release's attempts independently with (TPR, TNR); a calibration set of 100 + 100 items on which
it erred with 0.97 / 0.95 gives Rogan–Gladen its rates; an audit labels n attempts drawn
uniformly, folds by case as `judge audit` draws them (audit.case_audits).

Per row, for each estimator: bias in points against the share of the N attempts (whose
expectation is θ, so it is the bias for θ too, with less Monte Carlo noise), how often its 95%
interval holds its target (θ, the agent's rate, for all but `release`, whose target is the N
attempts' share), and its mean half-width in points. `MC se`: the Monte Carlo standard error
of the cross-fit estimators' bias in that row (points); a bias within about twice it is noise.
"""

from __future__ import annotations

import random
import sys
import time

from callgate.judging.audit import case_audits
from callgate.judging.estimates import (
    AuditTable,
    Estimate,
    crossfit_ppi,
    ppi_share,
    raw_share,
    rogan_gladen_share,
    verdict_clustering,
)

CALIBRATION = (0.97, 0.95)
CALIBRATION_ITEMS = 100
CASES = 250
SHARE, SPREAD = 0.6, 0.3
NAMES = ("raw", "Rogan–Gladen", "old PPI++", "cross-fit agent", "cross-fit release",
         "raw clustered", "RG clustered")
Key = tuple[str, int]


def one(rng: random.Random, judge: tuple[float, float], repeats: int, audit: int
        ) -> tuple[list[Estimate], float]:
    tp = sum(rng.random() < CALIBRATION[0] for _ in range(CALIBRATION_ITEMS))
    tn = sum(rng.random() < CALIBRATION[1] for _ in range(CALIBRATION_ITEMS))
    truth: dict[Key, bool] = {}
    for c in range(CASES):
        rate = SHARE + (SPREAD if rng.random() < 0.5 else -SPREAD)
        for r in range(repeats):
            truth[(f"c{c:03d}", r)] = rng.random() < rate
    verdicts = {k: (rng.random() < judge[0]) if y else (rng.random() >= judge[1])
                for k, y in truth.items()}
    keys = sorted(truth)
    sample = set(rng.sample(keys, audit))
    table = AuditTable.of([(truth[k], verdicts[k]) for k in sample])
    others = [verdicts[k] for k in keys if k not in sample]
    passes = sum(verdicts.values())
    cases = case_audits(verdicts, {k: truth[k] for k in sample}, rng.randrange(2**31))
    rates = (tp / CALIBRATION_ITEMS, tn / CALIBRATION_ITEMS, CALIBRATION_ITEMS,
             CALIBRATION_ITEMS)
    clustering = verdict_clustering(cases)
    estimates = [raw_share(passes, len(keys)), rogan_gladen_share(passes, len(keys), *rates),
                 ppi_share(table, sum(others), len(others)),
                 crossfit_ppi(cases, "agent"), crossfit_ppi(cases, "release"),
                 raw_share(passes, len(keys), clustering),
                 rogan_gladen_share(passes, len(keys), *rates, clustering)]
    assert all(e is not None for e in estimates)
    return [e for e in estimates if e is not None], sum(truth.values()) / len(keys)


def row(reps: int, seed: int, judge: tuple[float, float], repeats: int, audit: int
        ) -> list[str]:
    rng = random.Random(seed)
    results = [one(rng, judge, repeats, audit) for _ in range(reps)]
    errors = [r[0][3].value - r[1] for r in results]
    mean = sum(errors) / reps
    spread = (sum((e - mean) ** 2 for e in errors) / (reps - 1) / reps) ** 0.5
    cells = [f"{100 * spread:4.2f}"]
    for k in range(len(NAMES)):
        bias = 100 * sum(r[0][k].value - r[1] for r in results) / reps
        hits = sum(r[0][k].low <= (r[1] if k == 4 else SHARE) <= r[0][k].high
                   for r in results) / reps
        width = 100 * sum(r[0][k].half_width for r in results) / reps
        cells.append(f"{bias:+5.2f} {hits:6.1%} ±{width:4.1f}")
    return cells


def main() -> None:
    reps = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    seed = int(sys.argv[2]) if len(sys.argv) > 2 else 16
    print(f"{reps} repetitions per row, {CASES} cases, θ = {SHARE} (case rates θ ± {SPREAD}), "
          f"calibration TPR/TNR {CALIBRATION[0]}/{CALIBRATION[1]} on {CALIBRATION_ITEMS}+"
          f"{CALIBRATION_ITEMS} items; per estimator: bias (points), coverage of the 95% "
          "interval, mean half-width (points)\n")
    print(f"{'judge TPR/TNR':>13} {'m':>2} {'labels':>6} {'MC se':>5}  "
          + " ".join(f"{name:>20}" for name in NAMES))
    started = time.perf_counter()
    for judge in ((0.85, 0.80), (0.97, 0.95)):
        for repeats in (1, 4):
            for audit in (40, 100, 200):
                cells = row(reps, seed, judge, repeats, audit)
                print(f"{judge[0]:>7}/{judge[1]:<5} {repeats:>2} {audit:>6} {cells[0]:>5}  "
                      + " ".join(f"{c:>20}" for c in cells[1:]))
    print(f"\n{time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
