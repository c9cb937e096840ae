"""How many more labels: for a judge's certificate, and for an audit of a release.

Pure functions. Two questions a person labelling items asks:

- **Certificate**: per dimension, how many more items a person labels *pass* (they measure the
  TPR) and *fail* (the TNR) before the judge certifies, assuming the judge keeps agreeing with
  the person at the rate observed so far (future agreements rounded down, so the plan does not
  promise more than the rate gives). Two rules:
  `point`: TPR and TNR at least the threshold, with at least `min_items_per_class` items of
  each class (the rule `calibration.dimension_report` applies today);
  `wilson`: the lower bound of the Wilson 95% interval of TPR and of TNR at least the
  threshold, with the same minimum. The Wilson interval inverts the score test, so its lower
  bound clears t exactly when p̂ > t and m·(p̂ − t)² ≥ z²·t(1 − t): at the observed rate r that
  needs m ≥ z²·t(1 − t)/(r − t)² items, which is where the search starts.
- **Audit**: how many audit labels make the PPI++ interval of a judged share ±W points wide,
  from the judge–person disagreement observed (in an audit so far, or, before any, implied by
  the calibration TPR/TNR), with the variance the estimate itself uses for the estimand
  (`release`: finite-population corrected; `agent`: plus the attempts' own variance, times the
  design effect of the repeats of a case, so repeats that agree with each other need more).
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, ConfigDict

from callgate.judging.estimates import Estimand, agent_variance
from callgate.stats import Z95, wilson

Rule = Literal["point", "wilson"]


class ClassPlan(BaseModel):
    """One class (pass items for TPR, fail items for TNR) of one dimension."""

    model_config = ConfigDict(frozen=True)
    items: int  # labelled so far
    agreed: int  # of which the judge agreed with the person
    rate: float | None  # agreed / items; None before any item
    assumed_rate: bool  # no items yet: the plan assumes a judge that always agrees
    more: int | None  # further items needed; None when the observed rate can never reach it
    why: str = ""


def _meets(rule: Rule, agreed: int, items: int, threshold: float, min_items: int,
           z: float) -> bool:
    if items < min_items or items == 0:
        return False
    if rule == "point":
        return agreed / items >= threshold
    low = wilson(agreed, items, z)
    return low is not None and low[0] >= threshold


def more_items(agreed: int, items: int, threshold: float, min_items: int, rule: Rule,
               z: float = Z95) -> ClassPlan:
    """Fewest further items of one class after which the rule holds, if the judge agrees on
    them at the observed rate (agreed/items; 1 when there are none yet), rounded down."""
    if not 0 <= agreed <= items:
        raise ValueError("agreed must lie between 0 and items")
    assumed = items == 0
    num, den = (1, 1) if assumed else (agreed, items)
    rate = None if assumed else agreed / items

    def future(k: int) -> tuple[int, int]:
        return agreed + (num * k) // den, items + k

    if _meets(rule, agreed, items, threshold, min_items, z):
        return ClassPlan(items=items, agreed=agreed, rate=rate, assumed_rate=assumed, more=0)
    observed = num / den
    if observed < threshold or (rule == "wilson" and observed <= threshold):
        if rule == "wilson":
            why = (f"agreement {observed:.3f} is not above {threshold}: the Wilson lower bound "
                   "never reaches it at this rate")
        else:
            why = (f"agreement {observed:.3f} is below {threshold}: more items at this rate "
                   "do not help")
        return ClassPlan(items=items, agreed=agreed, rate=rate, assumed_rate=assumed, more=None,
                         why=why)
    start = max(0, min_items - items)
    if rule == "wilson" and observed < 1:
        # No total below z²·t(1 − t)/(r − t)² can clear the bound (future rates are ≤ r);
        # two items of margin for rounding in the closed form.
        needed_total = z * z * threshold * (1 - threshold) / (observed - threshold) ** 2
        start = max(start, math.floor(needed_total) - items - 2)
    elif rule == "wilson":
        needed_total = z * z * threshold / (1 - threshold) if threshold < 1 else math.inf
        start = max(start, math.floor(needed_total) - items - 2)
    # At every multiple of `den` further items the future rate is exactly r, so a total past
    # the closed-form bound is met within `den` steps (plus rounding slack).
    for k in range(start, start + 2 * den + 8):
        if _meets(rule, *future(k), threshold, min_items, z):
            return ClassPlan(items=items, agreed=agreed, rate=rate, assumed_rate=assumed,
                             more=k)
    raise AssertionError("unreachable: a multiple of the denominator past the bound meets it")


class DimensionPlan(BaseModel):
    model_config = ConfigDict(frozen=True)
    rule: Rule
    pass_items: ClassPlan  # the person said pass: TPR
    fail_items: ClassPlan  # the person said fail: TNR

    @property
    def reachable(self) -> bool:
        return self.pass_items.more is not None and self.fail_items.more is not None


def certificate_plan(tp: int, fn: int, tn: int, fp: int, tpr_min: float, tnr_min: float,
                     min_items: int, rule: Rule, z: float = Z95) -> DimensionPlan:
    """The plan for one dimension from its confusion counts (positive class = pass)."""
    return DimensionPlan(rule=rule,
                         pass_items=more_items(tp, tp + fn, tpr_min, min_items, rule, z),
                         fail_items=more_items(tn, tn + fp, tnr_min, min_items, rule, z))


# --------------------------------------------------------------------------- audits


class AuditMoments(BaseModel):
    """What the audit's variance depends on: Var(Y), Cov(Y, f), Var(f), and where they came
    from (`audit` labels, or `calibration` rates before any audit label exists)."""

    model_config = ConfigDict(frozen=True)
    var_y: float
    cov_yf: float
    var_f: float
    source: Literal["audit", "calibration"]


def moments_from_rates(share: float, tpr: float, tnr: float) -> AuditMoments:
    """The moments implied by a true pass share θ and a judge with the given TPR and TNR:
    P(f = 1) = θ·TPR + (1 − θ)(1 − TNR), E[Yf] = θ·TPR."""
    judge_pass = share * tpr + (1 - share) * (1 - tnr)
    return AuditMoments(var_y=share * (1 - share), cov_yf=share * tpr - share * judge_pass,
                        var_f=judge_pass * (1 - judge_pass), source="calibration")


class AuditPlan(BaseModel):
    model_config = ConfigDict(frozen=True)
    width: float  # the half-width asked for (fraction)
    judged: int  # N: judged attempts in the run
    labels: int | None  # audit size that reaches it; None when no audit of the run can
    best_width: float  # the half-width with every judged attempt labelled
    source: Literal["audit", "calibration"]
    design_effect: float = 1.0  # of the repeats, on the `agent` variance (1: independent)


def judged_variance(labels: int, judged: int, moments: AuditMoments,
                    estimand: Estimand = "release", design_effect: float = 1.0) -> float:
    """The variance of the cross-fit PPI++ estimate (estimates.crossfit_ppi) with `labels` of
    the `judged` attempts audited, λ = Cov(Y, f)/Var(f): `release`: (1 − n/N)·Var(Y − λf)/n,
    zero at n = N (the audit samples attempts, so repeats need no correction); `agent`: that
    plus Var(Y)·deff/N (estimates.agent_variance), deff the repeats' design effect."""
    weight = (min(1.0, max(0.0, moments.cov_yf / moments.var_f)) if moments.var_f > 0
              else 0.0)
    residual = max(0.0, moments.var_y - 2 * weight * moments.cov_yf
                   + weight * weight * moments.var_f)
    design = (1 - labels / judged) * residual / labels
    if estimand == "release":
        return design
    return agent_variance(design, moments.var_y, judged, design_effect)


def ppi_half_width(labels: int, judged: int, moments: AuditMoments, z: float = Z95,
                   estimand: Estimand = "release", design_effect: float = 1.0) -> float:
    """z·se of the PPI++ estimate with `labels` of the `judged` attempts audited."""
    return z * math.sqrt(judged_variance(labels, judged, moments, estimand, design_effect))


def audit_labels_for_width(width: float, judged: int, moments: AuditMoments,
                           z: float = Z95, estimand: Estimand = "release",
                           design_effect: float = 1.0) -> AuditPlan:
    """Fewest audit labels n (of the N judged attempts) whose PPI++ interval is ±width, for the
    estimand the interval is about (the same variance the estimate uses; `design_effect` is
    the repeats', used by `agent` only)."""
    if judged <= 0 or width <= 0:
        raise ValueError("need judged attempts and a positive width")
    effect = design_effect if estimand == "agent" else 1.0

    def half_width(labels: int) -> float:
        return ppi_half_width(labels, judged, moments, z, estimand, effect)

    best = half_width(judged)
    found = None
    if best <= width:  # the half-width falls as labels grow: bisect for the fewest
        low, high = 1, judged
        while low < high:
            middle = (low + high) // 2
            if half_width(middle) <= width:
                high = middle
            else:
                low = middle + 1
        found = low
    return AuditPlan(width=width, judged=judged, labels=found, best_width=best,
                     source=moments.source, design_effect=effect)
