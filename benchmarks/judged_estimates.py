"""Coverage and width of the three judged-share estimators, by seeded simulation.

Usage: uv run python benchmarks/judged_estimates.py [REPS] [SEED]

Each repetition: N = 1000 judged attempts, each truly right with probability θ; a judge that
errs on the release with (TPR, TNR)_release; a calibration set of 100 + 100 items on which it
erred with (TPR, TNR)_calibration = 0.97 / 0.95; an audit of n attempts drawn uniformly.
Printed per setting: how often each estimator's 95% interval holds θ, and its mean half-width
(points). raw = judge share with Wilson; RG = Rogan–Gladen with the calibration rates;
PPI = PPI++ with the audit (src/callgate/estimates.py).
"""

from __future__ import annotations

import random
import sys
import time

from callgate.judging.estimates import (
    AuditTable,
    Estimate,
    ppi_share,
    raw_share,
    rogan_gladen_share,
)

CALIBRATION = (0.97, 0.95)
CALIBRATION_ITEMS = 100
JUDGED = 1000


def one(rng: random.Random, share: float, release: tuple[float, float], audit: int
        ) -> tuple[Estimate, Estimate, Estimate]:
    tp = sum(rng.random() < CALIBRATION[0] for _ in range(CALIBRATION_ITEMS))
    tn = sum(rng.random() < CALIBRATION[1] for _ in range(CALIBRATION_ITEMS))
    truth = [rng.random() < share for _ in range(JUDGED)]
    verdicts = [(rng.random() < release[0]) if y else (rng.random() >= release[1])
                for y in truth]
    sample = set(rng.sample(range(JUDGED), audit))
    table = AuditTable.of([(truth[i], verdicts[i]) for i in sample])
    others = [verdicts[i] for i in range(JUDGED) if i not in sample]
    raw = raw_share(sum(verdicts), JUDGED)
    rg = rogan_gladen_share(sum(verdicts), JUDGED, tp / CALIBRATION_ITEMS,
                            tn / CALIBRATION_ITEMS, CALIBRATION_ITEMS, CALIBRATION_ITEMS)
    ppi = ppi_share(table, sum(others), len(others))
    assert raw is not None and rg is not None and ppi is not None
    return raw, rg, ppi


def main() -> None:
    reps = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    seed = int(sys.argv[2]) if len(sys.argv) > 2 else 16
    print(f"{reps} repetitions per row, N = {JUDGED} judged attempts, calibration "
          f"TPR/TNR {CALIBRATION[0]}/{CALIBRATION[1]} on {CALIBRATION_ITEMS}+{CALIBRATION_ITEMS}"
          " items; coverage of the 95% interval and mean half-width (points)\n")
    print(f"{'θ':>5} {'release TPR/TNR':>16} {'audit n':>8}   "
          f"{'raw':>14} {'Rogan–Gladen':>14} {'PPI++':>14}")
    started = time.perf_counter()
    for share in (0.5, 0.8, 0.95):
        for release in ((0.85, 0.80), (0.97, 0.95)):
            for audit in (40, 100, 200):
                rng = random.Random(seed)
                results = [one(rng, share, release, audit) for _ in range(reps)]
                cells = []
                for k in range(3):
                    hits = sum(r[k].low <= share <= r[k].high for r in results) / reps
                    width = 100 * sum(r[k].half_width for r in results) / reps
                    cells.append(f"{hits:6.1%} ±{width:4.1f}")
                print(f"{share:5.2f} {release[0]:>9}/{release[1]:<6} {audit:>8}   "
                      + " ".join(f"{c:>14}" for c in cells))
    print(f"\n{time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
