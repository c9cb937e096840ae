"""The label-budget planner, checked against brute-force searches."""

from __future__ import annotations

import math

import pytest

from callgate.judging.estimates import AuditTable, CaseAudit, crossfit_ppi
from callgate.judging.planning import (
    AuditMoments,
    audit_labels_for_width,
    certificate_plan,
    moments_from_rates,
    more_items,
    ppi_half_width,
)
from callgate.stats import Z95, wilson

CAP = 1000


def _brute(agreed: int, items: int, threshold: float, min_items: int, rule: str
           ) -> int | None:
    """Smallest k < CAP such that, with k further items agreeing at the observed rate (rounded
    down), the rule holds; straight from the definition."""
    num, den = (1, 1) if items == 0 else (agreed, items)
    for k in range(CAP):
        a, m = agreed + (num * k) // den, items + k
        if m < min_items or m == 0:
            continue
        if rule == "point" and a / m >= threshold:
            return k
        # The Wilson interval holds the observed rate, so its lower bound reaches the
        # threshold only where the rate does: the cheap test first (the six Wilson rows took
        # 2.7 s, now 0.8 s).
        if rule == "wilson" and a / m >= threshold and wilson(a, m)[0] >= threshold:
            return k
    return None


@pytest.mark.parametrize("rule", ["point", "wilson"])
@pytest.mark.parametrize("threshold", [0.8, 0.9, 0.95])
@pytest.mark.parametrize("min_items", [1, 30])
def test_more_items_matches_brute_force(rule: str, threshold: float, min_items: int) -> None:
    checked = 0
    for items in range(0, 61, 6):
        for agreed in range(items + 1):
            plan = more_items(agreed, items, threshold, min_items, rule)  # type: ignore[arg-type]
            brute = _brute(agreed, items, threshold, min_items, rule)
            if plan.more is None:
                assert brute is None, (agreed, items)
            elif plan.more < CAP:
                assert plan.more == brute, (agreed, items, plan)
                checked += 1
            else:
                assert brute is None, (agreed, items)
    assert checked > 10


def test_wilson_rule_needs_more_than_the_point_rule() -> None:
    # 29 of 30 agree (0.967): the point rule at 0.9 is met now; the Wilson bound needs more.
    assert more_items(29, 30, 0.9, 30, "point").more == 0
    wilson_more = more_items(29, 30, 0.9, 30, "wilson").more
    assert wilson_more is not None and wilson_more > 0
    # And exactly then: the bound is met at that count, and not one item before.
    r_num, r_den = 29, 30
    k = wilson_more
    assert wilson(29 + r_num * k // r_den, 30 + k)[0] >= 0.9
    assert wilson(29 + r_num * (k - 1) // r_den, 30 + k - 1)[0] < 0.9


def test_a_rate_at_or_below_the_threshold_cannot_certify() -> None:
    assert more_items(27, 30, 0.9, 30, "wilson").more is None
    plan = more_items(26, 30, 0.9, 30, "point")
    assert plan.more is None and "below 0.9" in plan.why


def test_no_items_yet_plans_for_a_perfect_judge() -> None:
    # m ≥ z²·t/(1 − t) = 3.84·0.9/0.1 ≈ 34.6 items all agreeing.
    plan = more_items(0, 0, 0.9, 30, "wilson")
    assert plan.assumed_rate and plan.more == math.ceil(Z95 ** 2 * 0.9 / 0.1)
    assert more_items(0, 0, 0.9, 30, "point").more == 30


def test_certificate_plan_per_class() -> None:
    plan = certificate_plan(tp=40, fn=0, tn=10, fp=1, tpr_min=0.9, tnr_min=0.9, min_items=30,
                            rule="point")
    assert plan.pass_items.more == 0
    assert plan.fail_items.more == 19  # 11 fail items; 30 needed at 10/11 agreement
    assert plan.reachable


def test_audit_labels_with_an_uninformative_judge_is_the_plain_sample_size() -> None:
    # Cov = 0 → λ = 0. The agent's rate: half-width z·sqrt(Var Y / n), n = ceil(z²·0.25/0.05²)
    # = 385. This release's 5000 attempts: the finite-population correction, n0/(1 + n0/N).
    moments = AuditMoments(var_y=0.25, cov_yf=0.0, var_f=0.25, source="audit")
    plain = Z95 ** 2 * 0.25 / 0.05 ** 2
    assert audit_labels_for_width(0.05, 5000, moments, estimand="agent").labels == (
        math.ceil(plain))
    assert audit_labels_for_width(0.05, 5000, moments).labels == math.ceil(
        plain / (1 + plain / 5000))


def test_audit_labels_with_a_perfect_judge() -> None:
    # Y = f. The agent's rate: the variance is Var/N whatever n, so one label does, or none
    # can. This release's attempts: the judge's verdicts are the truth, one label does.
    moments = AuditMoments(var_y=0.16, cov_yf=0.16, var_f=0.16, source="audit")
    assert audit_labels_for_width(0.03, 1000, moments, estimand="agent").labels == 1
    impossible = audit_labels_for_width(0.02, 1000, moments, estimand="agent")
    assert impossible.labels is None
    assert impossible.best_width == pytest.approx(Z95 * math.sqrt(0.16 / 1000))
    assert audit_labels_for_width(0.02, 1000, moments).labels == 1


def test_the_planned_audit_gives_the_width_the_estimate_then_has() -> None:
    # θ = 0.8, a judge with TPR/TNR 0.85/0.80, 300 judged attempts, ±5 points: the plan's
    # label count, audited at those rates, gives this release's interval of about ±5 points
    # (the old plan, without the finite-population correction, asked for 226 where 106 do).
    moments = moments_from_rates(0.8, 0.85, 0.80)
    plan = audit_labels_for_width(0.05, 300, moments)
    assert plan.labels is not None and plan.labels <= 110
    n = plan.labels
    share_f = 0.8 * 0.85 + 0.2 * 0.2
    cells = {"pass_pass": 0.8 * 0.85, "pass_fail": 0.8 * 0.15, "fail_pass": 0.2 * 0.2,
             "fail_fail": 0.2 * 0.8}
    folds = []
    for k, labels in enumerate((n // 2, n - n // 2)):
        table = AuditTable(**{cell: round(share * labels) for cell, share in cells.items()})
        folds.append(CaseAudit(judged=150, passes=round(150 * share_f), table=table, fold=k))
    estimate = crossfit_ppi(folds, "release")
    assert estimate is not None
    assert estimate.half_width == pytest.approx(0.05, abs=0.006)


def test_audit_labels_match_a_brute_force_over_n() -> None:
    moments = moments_from_rates(0.8, 0.85, 0.80)
    plan = audit_labels_for_width(0.04, 2000, moments)
    assert plan.labels is not None
    assert ppi_half_width(plan.labels, 2000, moments) <= 0.04
    assert all(ppi_half_width(n, 2000, moments) > 0.04 for n in range(1, plan.labels))
    assert plan.source == "calibration"


def test_moments_from_rates() -> None:
    moments = moments_from_rates(0.8, 0.9, 0.9)
    judge_pass = 0.8 * 0.9 + 0.2 * 0.1
    assert moments.var_f == pytest.approx(judge_pass * (1 - judge_pass))
    assert moments.cov_yf == pytest.approx(0.8 * 0.9 - 0.8 * judge_pass)
