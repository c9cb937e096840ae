"""Bias, coverage and width of PPI++ with λ tuned on the audit's own labels (the old closed
form, `ppi_share`) and with λ cross-fitted (`crossfit_ppi`), measured in the same seeded run.

Usage: uv run python benchmarks/ppi_bias.py [REPS] [SEED]

Each repetition: N = 500 judged attempts (one per case), each truly right with probability θ;
a judge with TPR/TNR 0.85/0.80 on them; an audit of n drawn uniformly; each case in a cross-fit
fold by a coin. Bias is in points, measured against the share of the N attempts (whose
expectation is θ, so it is the bias for θ too, with less Monte Carlo noise); coverage is of
the 95% interval, of θ (the agent's rate) for the old form and the `agent` estimand, of the N
attempts' share for the `release` estimand; width is the mean half-width in points.
"""

from __future__ import annotations

import random
import sys
import time

from callgate.judging.estimates import AuditTable, CaseAudit, Estimate, crossfit_ppi, ppi_share

JUDGED = 500
SHARE = 0.8
JUDGE = (0.85, 0.80)


def one(rng: random.Random, audit: int) -> tuple[Estimate, Estimate, Estimate, float]:
    truth = [rng.random() < SHARE for _ in range(JUDGED)]
    verdicts = [(rng.random() < JUDGE[0]) if y else (rng.random() >= JUDGE[1]) for y in truth]
    sample = set(rng.sample(range(JUDGED), audit))
    table = AuditTable.of([(truth[i], verdicts[i]) for i in sample])
    others = [verdicts[i] for i in range(JUDGED) if i not in sample]
    old = ppi_share(table, sum(others), len(others))
    cells = {(True, True): AuditTable(pass_pass=1), (True, False): AuditTable(pass_fail=1),
             (False, True): AuditTable(fail_pass=1), (False, False): AuditTable(fail_fail=1)}
    empty = AuditTable()
    cases = [CaseAudit.model_construct(
        judged=1, passes=int(verdicts[i]), fold=int(rng.random() < 0.5),
        table=cells[truth[i], verdicts[i]] if i in sample else empty) for i in range(JUDGED)]
    agent = crossfit_ppi(cases, "agent")
    release = crossfit_ppi(cases, "release")
    assert old is not None and agent is not None and release is not None
    return old, agent, release, sum(truth) / JUDGED


def main() -> None:
    reps = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    seed = int(sys.argv[2]) if len(sys.argv) > 2 else 24
    print(f"{reps} repetitions per row, N = {JUDGED}, θ = {SHARE}, judge TPR/TNR "
          f"{JUDGE[0]}/{JUDGE[1]}; bias (points, ± its Monte Carlo standard error), coverage "
          "of the 95% interval, mean half-width (points)\n")
    print(f"{'labels':>6}  {'estimator':<28} {'bias':>14} {'coverage':>9} {'±width':>7}")
    started = time.perf_counter()
    names = ("old: λ tuned on the labels", "cross-fit λ, agent", "cross-fit λ, release")
    for audit in (40, 100, 200):
        rng = random.Random(seed)
        results = [one(rng, audit) for _ in range(reps)]
        for k, name in enumerate(names):
            # Bias against the share of the N attempts: the same expectation as against θ for
            # every estimator here, with less noise.
            errors = [r[k].value - r[3] for r in results]
            bias = sum(errors) / reps
            spread = (sum((e - bias) ** 2 for e in errors) / (reps - 1) / reps) ** 0.5
            hits = sum(r[k].low <= (r[3] if k == 2 else SHARE) <= r[k].high
                       for r in results) / reps
            width = sum(r[k].half_width for r in results) / reps
            print(f"{audit:>6}  {name:<28} {100 * bias:+6.2f} ± {100 * spread:4.2f} "
                  f"{hits:>9.1%} {100 * width:>7.2f}")
    print(f"\n{time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
