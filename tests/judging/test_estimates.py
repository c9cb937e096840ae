"""The judged-share estimators: hand-computed PPI++ figures, the design's Rogan–Gladen example,
and a seeded simulation of a judge that errs differently on the release than on calibration."""

from __future__ import annotations

import math
import random

import pytest

from callgate.judging.estimates import (
    AuditTable,
    CaseAudit,
    Estimate,
    combined_share,
    crossfit_ppi,
    crossfit_weight,
    judged_clustering,
    ppi_mean,
    ppi_share,
    raw_share,
    residual_variance,
    rogan_gladen_share,
)
from callgate.stats import Z95, design_effect, intraclass_correlation

# Labelled: (Y, f) = (1,1) (1,0) (0,0) (1,1); the judge on 6 others: 1 1 0 1 1 0.
LABELS = [1.0, 1.0, 0.0, 1.0]
LABELLED_F = [1.0, 0.0, 0.0, 1.0]
UNLABELLED_F = [1.0, 1.0, 0.0, 1.0, 1.0, 0.0]


def test_ppi_plus_plus_by_hand() -> None:
    # Var(f) over all 10 verdicts (6 pass): 10·0.6·0.4/9 = 4/15. Var(Y) = 0.75/3 = 0.25.
    # Cov(Y, f) = (0.125 − 0.125 + 0.375 + 0.125)/3 = 1/6.
    # λ = (1/6) / ((1 + 4/6)·4/15) = 0.375.
    # θ̂ = 0.375·4/6 + (0.75 − 0.375·0.5) = 0.25 + 0.5625 = 0.8125.
    # Var(Y − λf) = 0.25 − 2·0.375/6 + 0.375²·4/15 = 0.1625;
    # Var θ̂ = 0.375²·(4/15)/6 + 0.1625/4 = 0.00625 + 0.040625 = 0.046875.
    fit = ppi_mean(LABELS, LABELLED_F, UNLABELLED_F)
    assert fit.var_f == pytest.approx(4 / 15)
    assert fit.var_y == pytest.approx(0.25)
    assert fit.cov_yf == pytest.approx(1 / 6)
    assert fit.weight == pytest.approx(0.375)
    assert fit.value == pytest.approx(0.8125)
    assert fit.se == pytest.approx(math.sqrt(0.046875))


def test_classic_ppi_by_hand() -> None:
    # λ = 1: θ̂ = 4/6 + (0.75 − 0.5) = 11/12; Var = (4/15)/6 + (0.25 − 1/3 + 4/15)/4.
    fit = ppi_mean(LABELS, LABELLED_F, UNLABELLED_F, weight=1.0)
    assert fit.value == pytest.approx(11 / 12)
    assert fit.se ** 2 == pytest.approx((4 / 15) / 6 + (0.25 - 1 / 3 + 4 / 15) / 4)


def test_uninformative_judge_gives_the_labels_alone() -> None:
    # f constant: λ = 0, the estimate is the labels' mean with Var(Y)/n.
    fit = ppi_mean(LABELS, [1.0] * 4, [1.0] * 6)
    assert fit.weight == 0
    assert fit.value == pytest.approx(0.75)
    assert fit.se == pytest.approx(math.sqrt(0.25 / 4))


def test_ppi_share_interval_by_hand() -> None:
    # The same audit as a table: pass_pass 2, pass_fail 1, fail_fail 1; 4 of 6 others pass.
    # Half a pseudo-item per cell: 2.5 1.5 0.5 1.5 (n 6): mean Y 2/3, mean f 1/2,
    # Var Y = 6·(2/9)/5 = 4/15, Cov = 6·(2.5/6 − 1/3)/5 = 0.1; Var f = 4/15 (all 10 verdicts).
    # λ = 0.1 / ((1 + 4/6)·4/15) = 0.225; θ̂ = 0.225·4/6 + 0.75 − 0.225·0.5 = 0.7875.
    # Var = 0.225²·(4/15)/6 + (4/15 − 2·0.225·0.1 + 0.225²·4/15)/6.
    audit = AuditTable(pass_pass=2, pass_fail=1, fail_fail=1)
    estimate = ppi_share(audit, unlabelled_passes=4, unlabelled=6)
    assert estimate is not None
    assert estimate.estimator == "ppi++"
    assert estimate.weight == pytest.approx(0.225)
    assert estimate.value == pytest.approx(0.7875)
    variance = 0.225 ** 2 * (4 / 15) / 6 + (4 / 15 - 0.045 + 0.225 ** 2 * 4 / 15) / 6
    assert estimate.se == pytest.approx(math.sqrt(variance))
    assert estimate.low == pytest.approx(0.7875 - Z95 * math.sqrt(variance))
    assert estimate.high == pytest.approx(min(1.0, 0.7875 + Z95 * math.sqrt(variance)))
    assert (estimate.labels, estimate.n) == (4, 10)


def test_an_audit_in_full_agreement_is_not_certain() -> None:
    # 40 labels, judge and person agree on all: the interval still has width.
    estimate = ppi_share(AuditTable(pass_pass=36, fail_fail=4), 860, 960)
    assert estimate is not None
    assert estimate.high - estimate.low > 0.03


def test_rogan_gladen_matches_the_design_example() -> None:
    # design.md: p = 0.88, n = 1000, TPR 0.95, TNR 0.90 → θ ≈ 0.918; ±8 points with 50+50
    # labels, ±3.4 with 400+200.
    small = rogan_gladen_share(880, 1000, 0.95, 0.90, 50, 50)
    large = rogan_gladen_share(880, 1000, 0.95, 0.90, 400, 200)
    assert small is not None and large is not None
    assert small.value == pytest.approx(0.918, abs=5e-4)
    assert Z95 * small.se == pytest.approx(0.08, abs=0.005)
    assert Z95 * large.se == pytest.approx(0.034, abs=0.001)
    assert large.estimator == "rogan_gladen"


def test_raw_share_is_the_judge_share_with_wilson() -> None:
    estimate = raw_share(8, 10)
    assert estimate is not None
    assert (estimate.estimator, estimate.value) == ("raw", 0.8)
    assert estimate.low == pytest.approx(0.4902, abs=1e-4)


def test_combined_share_by_hand() -> None:
    judged = Estimate(estimator="ppi++", value=0.8, low=0.7, high=0.9, se=0.05, n=100,
                      labels=40, weight=0.5)
    combined = combined_share(90, 100, judged, 100)
    assert combined is not None
    assert combined.estimator == "deterministic+ppi++"
    assert combined.value == pytest.approx(0.85)
    # Deterministic part add-two: p = 91/102, variance p(1 − p)/102.
    p = 91 / 102
    se = math.sqrt(0.25 * p * (1 - p) / 102 + 0.25 * 0.05 ** 2)
    assert combined.se == pytest.approx(se)
    assert combined.low == pytest.approx(0.85 - Z95 * se)
    # The judged part's variance widens the interval beyond the deterministic part's alone.
    assert combined.se > math.sqrt(0.25 * p * (1 - p) / 102)


def test_combined_share_without_judged_attempts_is_wilson() -> None:
    combined = combined_share(90, 100, None, 0)
    assert combined is not None
    assert combined.estimator == "deterministic"
    assert combined.value == 0.9


def _simulate(rng: random.Random, share: float, release: tuple[float, float],
              calibration: tuple[float, float], judged: int = 1000, audit: int = 100,
              calibration_items: int = 100) -> tuple[Estimate, Estimate]:
    tpr_c, tnr_c = calibration
    tp = sum(rng.random() < tpr_c for _ in range(calibration_items))
    tn = sum(rng.random() < tnr_c for _ in range(calibration_items))
    tpr_r, tnr_r = release
    truth = [rng.random() < share for _ in range(judged)]
    verdicts = [(rng.random() < tpr_r) if y else (rng.random() >= tnr_r) for y in truth]
    sample = set(rng.sample(range(judged), audit))
    table = AuditTable.of([(truth[i], verdicts[i]) for i in sample])
    others = [verdicts[i] for i in range(judged) if i not in sample]
    ppi = ppi_share(table, sum(others), len(others))
    rg = rogan_gladen_share(sum(verdicts), judged, tp / calibration_items,
                            tn / calibration_items, calibration_items, calibration_items)
    assert ppi is not None and rg is not None
    return ppi, rg


def _coverage(release: tuple[float, float], share: float = 0.8, reps: int = 200
              ) -> tuple[float, float]:
    rng = random.Random(16)
    ppi_hits = rg_hits = 0
    for _ in range(reps):
        ppi, rg = _simulate(rng, share, release, calibration=(0.97, 0.95))
        ppi_hits += ppi.low <= share <= ppi.high
        rg_hits += rg.low <= share <= rg.high
    return ppi_hits / reps, rg_hits / reps


def test_ppi_covers_when_the_judge_errs_differently_on_the_release() -> None:
    # Calibration: TPR 0.97 / TNR 0.95; on the release 0.85 / 0.80. Rogan–Gladen corrects with
    # the wrong rates (about 7 points low at a true share of 0.8); PPI does not need them.
    ppi, rg = _coverage(release=(0.85, 0.80))
    assert ppi >= 0.93
    assert rg < 0.5


def test_both_cover_when_the_profiles_agree() -> None:
    ppi, rg = _coverage(release=(0.97, 0.95))
    assert ppi >= 0.93
    assert rg >= 0.93


# --------------------------------------------------------------------------- cross-fit PPI++


def _fold_cases(rng: random.Random, judged: int, audit: int, share: float,
                judge: tuple[float, float]) -> tuple[list[CaseAudit], AuditTable, int, float]:
    """One simulated release, one attempt per case, folded by a coin; returned as the two
    folds' totals (the point estimate depends on nothing else), the audit table, the judge's
    passes outside it, and the attempts' true share."""
    truth = [rng.random() < share for _ in range(judged)]
    verdicts = [(rng.random() < judge[0]) if y else (rng.random() >= judge[1]) for y in truth]
    sample = set(rng.sample(range(judged), audit))
    folds = [int(rng.random() < 0.5) for _ in range(judged)]
    cases = []
    for k in (0, 1):
        members = [i for i in range(judged) if folds[i] == k]
        cases.append(CaseAudit(judged=len(members), passes=sum(verdicts[i] for i in members),
                               fold=k, table=AuditTable.of([(truth[i], verdicts[i])
                                                            for i in members if i in sample])))
    table = AuditTable.of([(truth[i], verdicts[i]) for i in sample])
    others = sum(verdicts[i] for i in range(judged) if i not in sample)
    return cases, table, others, sum(truth) / judged


@pytest.mark.slow
def test_cross_fit_ppi_is_unbiased_where_the_tuned_closed_form_is_not() -> None:
    # 40 labels of 200 judged attempts, judge TPR/TNR 0.85/0.80, true share 0.8: the old closed
    # form (λ tuned on the same labels) is 0.3–0.4 points high (its Monte Carlo error here is
    # about 0.08); cross-fitting λ removes it.
    rng = random.Random(24)
    reps, old, new = 4000, 0.0, 0.0
    for _ in range(reps):
        cases, table, others, truth = _fold_cases(rng, 200, 40, 0.8, (0.85, 0.80))
        tuned = ppi_share(table, others, 200 - 40)
        fitted = crossfit_ppi(cases, "release")
        assert tuned is not None and fitted is not None
        old += tuned.value - truth
        new += fitted.value - truth
    assert abs(100 * new / reps) < 0.2
    assert 100 * old / reps > 0.25


def test_cross_fit_ppi_by_hand() -> None:
    # Fold 0: 10 judged, 6 judge passes, audit (Y, f) = pp 2, pf 1, ff 1; fold 1: 10 judged,
    # 5 passes, audit pp 3, fp 1. λ_0 is tuned on fold 1's labels and λ_1 on fold 0's.
    t0, t1 = AuditTable(pass_pass=2, pass_fail=1, fail_fail=1), AuditTable(pass_pass=3,
                                                                           fail_pass=1)
    cases = [CaseAudit(judged=10, passes=6, table=t0, fold=0),
             CaseAudit(judged=10, passes=5, table=t1, fold=1)]
    lam0, lam1 = crossfit_weight(t1), crossfit_weight(t0)
    # Fold 1 with half an item per cell: 3.5 .5 1.5 .5 (n 6): mean Y 2/3, mean f 5/6,
    # Cov = 6·(3.5/6 − 10/18)/5 = 1/30, Var f = 6·(5/36)/5 = 1/6: λ_0 = 0.2.
    assert lam0 == pytest.approx(0.2)
    value0 = lam0 * 0.6 + (3 - lam0 * 2) / 4
    value1 = lam1 * 0.5 + (3 - lam1 * 4) / 4
    release = crossfit_ppi(cases, "release")
    assert release is not None and release.estimand == "release"
    assert release.value == pytest.approx(0.5 * value0 + 0.5 * value1)
    design = (0.25 * (1 - 4 / 10) * residual_variance(t0, lam0) / 4
              + 0.25 * (1 - 4 / 10) * residual_variance(t1, lam1) / 4)
    assert release.se == pytest.approx(math.sqrt(design))


def test_a_release_audited_in_full_has_a_judged_part_of_zero_width() -> None:
    cases = [CaseAudit(judged=2, passes=1, table=AuditTable(pass_pass=1, pass_fail=1), fold=0),
             CaseAudit(judged=2, passes=2, table=AuditTable(pass_pass=1, fail_pass=1), fold=1)]
    release = crossfit_ppi(cases, "release")
    agent = crossfit_ppi(cases, "agent")
    assert release is not None and agent is not None
    assert release.value == pytest.approx(0.75)  # the labels' own share
    assert release.se == 0 and release.low == release.high == pytest.approx(0.75)
    assert agent.se is not None and agent.se > 0  # the agent's rate is still uncertain


def test_the_agent_variance_is_clustered_by_case() -> None:
    # 30 cases × 4 repeats; every repeat of a case has the same truth and verdict, so a case
    # is one draw, not four. Audited in full: the interval about the agent's rate is the one
    # 30 single attempts have, not half as wide as 120 independent attempts would give.
    rng = random.Random(5)
    cases, single, flat = [], [], []
    for c in range(30):
        y = rng.random() < 0.7
        f = y if rng.random() < 0.85 else not y
        cases.append(CaseAudit(judged=4, passes=4 * f, table=AuditTable.of([(y, f)] * 4),
                               fold=c % 2))
        single.append(CaseAudit(judged=1, passes=int(f), table=AuditTable.of([(y, f)]),
                                fold=c % 2))
        flat.extend(CaseAudit(judged=1, passes=int(f), fold=c % 2,
                              table=AuditTable.of([(y, f)])) for _ in range(4))
    clustered, one, independent = (crossfit_ppi(cases, "agent"), crossfit_ppi(single, "agent"),
                                   crossfit_ppi(flat, "agent"))
    assert clustered is not None and one is not None and independent is not None
    assert clustered.value == pytest.approx(independent.value)
    assert clustered.se is not None and independent.se is not None and one.se is not None
    assert clustered.clustering[0].design_effect == pytest.approx(4.0)
    assert clustered.se == pytest.approx(one.se, rel=0.05)
    assert clustered.se > 1.9 * independent.se


def test_the_judged_design_effect_takes_the_labels_when_the_judge_blurs_the_repeats() -> None:
    # Each case's 3 repeats are all right or all wrong, but the judge errs on single attempts:
    # its verdicts agree across repeats less than the truth does. Cases with several labels
    # show the truth's agreement, and the larger ICC is taken.
    cases = [CaseAudit(judged=3, passes=2, fold=0, table=AuditTable(pass_pass=2, pass_fail=1)),
             CaseAudit(judged=3, passes=1, fold=1, table=AuditTable(fail_pass=1, fail_fail=2)),
             CaseAudit(judged=3, passes=2, fold=0, table=AuditTable(pass_pass=2, pass_fail=1)),
             CaseAudit(judged=3, passes=1, fold=1, table=AuditTable(fail_pass=1, fail_fail=2))]
    clustering = judged_clustering(cases)
    assert clustering.icc == pytest.approx(1.0) and clustering.design_effect == 3.0
    by_verdicts = judged_clustering([c.model_copy(update={"table": AuditTable()})
                                     for c in cases])
    assert by_verdicts.icc is not None and by_verdicts.icc < 0.2


def test_intraclass_correlation_and_design_effect_by_hand() -> None:
    # Three cases of two repeats: both right, both wrong, one of each. p̄ = 0.5;
    # MSB = (2·0.25 + 2·0.25 + 0) / 2 = 0.5, MSW = 0.5 / 3, m0 = 2:
    # ICC = (0.5 − 1/6) / (0.5 + 1/6) = 0.5, deff = 1 + (2 − 1)·0.5.
    groups = [(2, 2), (0, 2), (1, 2)]
    assert intraclass_correlation(groups) == pytest.approx(0.5)
    assert design_effect(groups) == pytest.approx((1.5, 2.0, 0.5))
    # Repeats that disagree more than chance: a negative estimate is read as none.
    assert intraclass_correlation([(1, 2), (1, 2), (1, 2)]) == 0.0
    # No repeats, or an outcome that never varies: not estimable, no widening.
    assert intraclass_correlation([(1, 1), (0, 1)]) is None
    assert intraclass_correlation([(3, 3), (2, 2)]) is None
    assert design_effect([(3, 3), (2, 2)])[0] == 1.0
    # Unequal cases: m is weighted by size, Σm²/Σm.
    assert design_effect([(4, 4), (0, 2)])[1] == pytest.approx(20 / 6)
