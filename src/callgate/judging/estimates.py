"""Estimates of a judged share: raw, Rogan–Gladen corrected, and prediction-powered (PPI++).

Pure functions, fractions in [0, 1] throughout (reports turn them into points).

- **raw**: the judge's pass share over the N judged attempts, with a Wilson interval. Right
  only for a perfect judge.
- **rogan_gladen**: the raw share corrected with the TPR/TNR measured on the calibration set
  (`callgate.judging.judge.rogan_gladen`, delta-method variance). Right only when the judge
  errs on this release's attempts as it erred on the calibration items.
- **ppi++**: a uniform random sample of n judged attempts labelled by a person (an audit) plus
  the judge's verdicts on all N (Angelopoulos et al., Science 2023; PPI++ power tuning,
  Angelopoulos, Duchi & Zrnic 2024), with λ **cross-fitted** (`crossfit_ppi`): the cases are
  split in two folds, and each fold's share λ_k·mean(f) + mean(Y − λ_k f) uses the λ tuned on
  the other fold's labels, so λ never sees the labels it is applied to. Exactly unbiased
  whatever the judge's error profile; the variance is stated for an estimand (`release`: these
  attempts, finite-population corrected; `agent`: the agent's rate, clustered by case).

  `ppi_share` is the earlier closed form, λ tuned on the same labels (θ̂ = λ·mean_N'(f) +
  mean_n(Y − λf) over the N' unaudited attempts): a few tenths of a point high at 40–60
  labels. It is kept as the reference `benchmarks/ppi_bias.py` measures the cross-fit one
  against; the gate and `judge audit` do not use it.

Closed form rather than the `ppi-python` package: for a mean the estimator is the few lines
below, while ppi-python pulls numpy, pandas, statsmodels, scikit-learn and gdown into a CLI
that has none of them today (and whose `--help` must stay instant).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from statistics import NormalDist
from typing import Literal

from pydantic import BaseModel, ConfigDict

from callgate.judging.judge import add_two_corrected, corrected_share
from callgate.stats import Z95, Groups, design_effect, intraclass_correlation, wilson

# What an audited interval is about: `release`, this release's judged attempts (a finite
# population: the sampling is the only randomness, so a release audited in full has a judged
# part of zero width), or `agent`, the rate of the agent the attempts were drawn from (repeats
# of one case are not independent: the variance is clustered by case).
Estimand = Literal["release", "agent"]
ESTIMANDS: tuple[Estimand, ...] = ("release", "agent")
# The gate tests two figures (right tool, right arguments); each of its audited intervals is a
# 97.5% one, so that both hold together at least 95% of the time (Bonferroni).
Z_PAIR = NormalDist().inv_cdf(1 - 0.05 / 4)



class Clustering(BaseModel):
    """How the repeats of one case widen an interval about the agent's rate: repeats that
    agree with each other are fewer independent draws than attempts. `design_effect` is
    1 + (repeats − 1)·ICC, the factor on the variance a sample of independent attempts
    would have; `repeats` is the size-weighted mean attempts per case and `icc` the
    intraclass correlation estimated from the part's outcomes by case (None: no repeats, or
    an outcome that never varies, read as 0)."""

    model_config = ConfigDict(frozen=True)
    part: Literal["checked", "judged"]
    repeats: float
    icc: float | None
    design_effect: float

    @classmethod
    def of(cls, part: Literal["checked", "judged"], groups: Groups) -> Clustering:
        """From (right or passes, attempts) per case."""
        effect, repeats, icc = design_effect(groups)
        return cls(part=part, repeats=repeats, icc=icc, design_effect=effect)

    def text(self) -> str:
        icc = "not estimable, taken as 0" if self.icc is None else f"{self.icc:.2f}"
        return (f"{self.part} part {self.repeats:.1f} attempts per case, ICC {icc}, design "
                f"effect {self.design_effect:.2f}")


Estimator = Literal["raw", "rogan_gladen", "ppi++", "deterministic", "deterministic+ppi++",
                    "deterministic+rogan_gladen"]


class Estimate(BaseModel):
    """A share (fraction) with its 95% interval and the estimator that produced it."""

    model_config = ConfigDict(frozen=True)
    estimator: Estimator
    value: float
    low: float
    high: float
    se: float | None = None  # standard error, when the interval is a normal one
    n: int  # attempts the estimate is over
    labels: int = 0  # person labels it used (audit sample size for ppi++)
    weight: float | None = None  # PPI++'s λ
    estimand: Estimand | None = None  # for an audited estimate: what its interval is about
    clustering: tuple[Clustering, ...] = ()  # `agent`: the repeats' design effect per part

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2

    def points(self) -> dict[str, float | int | str | None]:
        """As a report shows it: points (0–100), each figure naming its estimator."""
        return {"estimator": self.estimator, "pct": 100 * self.value, "low": 100 * self.low,
                "high": 100 * self.high, "n": self.n, "labels": self.labels,
                "lambda": self.weight, "se": None if self.se is None else 100 * self.se,
                "estimand": self.estimand}


def _clip(value: float) -> float:
    return min(1.0, max(0.0, value))


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def _var(values: Sequence[float]) -> float:
    """Sample variance (n − 1 denominator); 0 for fewer than two values."""
    if len(values) < 2:
        return 0.0
    centre = _mean(values)
    return sum((v - centre) ** 2 for v in values) / (len(values) - 1)


def _cov(xs: Sequence[float], ys: Sequence[float]) -> float:
    if len(xs) < 2:
        return 0.0
    mx, my = _mean(xs), _mean(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / (len(xs) - 1)


# --------------------------------------------------------------------------- raw and RG


# Both are about the agent's judged share, as the figures' intervals are, so `clustering`
# (the judge's verdicts' repeats by case, `verdict_clustering`) widens them: the attempts are
# counted at the effective size n / design effect. Without it, or at a design effect of 1,
# they are the attempt-level intervals to the bit.


def raw_share(passes: int, n: int, clustering: Clustering | None = None) -> Estimate | None:
    """The judge's own pass share, with a Wilson interval; None when nothing was judged."""
    effect = clustering.design_effect if clustering is not None else 1.0
    interval = wilson(passes / effect, n / effect)
    if interval is None:
        return None
    return Estimate(estimator="raw", value=passes / n, low=interval[0], high=interval[1], n=n,
                    clustering=(clustering,) if clustering is not None else ())


def rogan_gladen_share(passes: int, n: int, tpr: float, tnr: float, m1: int, m0: int,
                       clustering: Clustering | None = None) -> Estimate | None:
    """Rogan–Gladen corrected share (the figure `score` reports today); None when the judge is
    no better than chance or there is nothing to correct."""
    effect = clustering.design_effect if clustering is not None else 1.0
    share = corrected_share(passes, n, tpr, tnr, m1, m0, design_effect=effect)
    if share is None:
        return None
    adjusted = add_two_corrected(passes, n, tpr, tnr, m1, m0, effect)  # its interval's se
    se = adjusted[1] if adjusted is not None else None
    return Estimate(estimator="rogan_gladen", value=share["corrected"] / 100,
                    low=share["low"] / 100, high=share["high"] / 100, se=se, n=n,
                    clustering=(clustering,) if clustering is not None else ())


# --------------------------------------------------------------------------- PPI++


class PPIFit(BaseModel):
    """The pieces of a PPI++ mean estimate, for reports and for the planner."""

    model_config = ConfigDict(frozen=True)
    value: float  # θ̂, not clipped
    se: float
    weight: float  # λ
    n: int  # labelled
    unlabelled: int  # N'
    var_f: float  # Var(f) over all judge verdicts
    var_y: float  # Var_n(Y)
    cov_yf: float  # Cov_n(Y, f)


def power_tuned_weight(cov_yf: float, var_f: float, n: int, unlabelled: int) -> float:
    """PPI++'s λ for a mean: Cov(Y, f) / ((1 + n/N')·Var(f)), clipped to [0, 1]; 0 when the
    judge's verdicts carry no information (no unlabelled attempts, or f constant)."""
    if unlabelled <= 0 or var_f <= 0:
        return 0.0
    return min(1.0, max(0.0, cov_yf / ((1 + n / unlabelled) * var_f)))


def ppi_variance(weight: float, var_f: float, var_y: float, cov_yf: float, n: int,
                 unlabelled: int) -> float:
    """λ²·Var(f)/N' + Var(Y − λf)/n, with Var(Y − λf) = Var Y − 2λ Cov + λ² Var f."""
    rectifier = max(0.0, var_y - 2 * weight * cov_yf + weight * weight * var_f)
    judged = weight * weight * var_f / unlabelled if unlabelled > 0 else 0.0
    return judged + rectifier / n


def ppi_mean(labels: Sequence[float], labelled_f: Sequence[float],
             unlabelled_f: Sequence[float], weight: float | None = None) -> PPIFit:
    """PPI++ estimate of the mean of Y: person labels Y and judge verdicts f on the n audited
    attempts, and the judge's verdicts on the N' others. `weight` fixes λ (1 = classic PPI);
    by default it is power-tuned. Var(f) is over all N' + n verdicts, as in PPI++."""
    n = len(labels)
    if n == 0 or len(labelled_f) != n:
        raise ValueError("PPI needs at least one labelled attempt, with a judge verdict each")
    unlabelled = len(unlabelled_f)
    var_f = _var([*labelled_f, *unlabelled_f])
    var_y = _var(labels)
    cov_yf = _cov(labels, labelled_f)
    lam = power_tuned_weight(cov_yf, var_f, n, unlabelled) if weight is None else weight
    if unlabelled == 0:
        lam = 0.0
    mean_f = _mean(unlabelled_f) if unlabelled else 0.0
    value = lam * mean_f + _mean([y - lam * f for y, f in zip(labels, labelled_f, strict=True)])
    se = math.sqrt(ppi_variance(lam, var_f, var_y, cov_yf, n, unlabelled))
    return PPIFit(value=value, se=se, weight=lam, n=n, unlabelled=unlabelled, var_f=var_f,
                  var_y=var_y, cov_yf=cov_yf)


class AuditTable(BaseModel):
    """Counts of the audited attempts by (person Y, judge f): `pass_pass` = both said pass,
    `pass_fail` = the person said pass and the judge fail, and so on."""

    model_config = ConfigDict(frozen=True)
    pass_pass: int = 0
    pass_fail: int = 0
    fail_pass: int = 0
    fail_fail: int = 0

    @property
    def n(self) -> int:
        return self.pass_pass + self.pass_fail + self.fail_pass + self.fail_fail

    @property
    def disagreements(self) -> int:
        return self.pass_fail + self.fail_pass

    @classmethod
    def of(cls, pairs: Sequence[tuple[bool, bool]]) -> AuditTable:
        """From (person says pass, judge says pass) pairs."""
        return cls(pass_pass=sum(y and f for y, f in pairs),
                   pass_fail=sum(y and not f for y, f in pairs),
                   fail_pass=sum(f and not y for y, f in pairs),
                   fail_fail=sum(not y and not f for y, f in pairs))

    def pairs(self) -> list[tuple[float, float]]:
        return ([(1.0, 1.0)] * self.pass_pass + [(1.0, 0.0)] * self.pass_fail
                + [(0.0, 1.0)] * self.fail_pass + [(0.0, 0.0)] * self.fail_fail)


def ppi_share(audit: AuditTable, unlabelled_passes: int, unlabelled: int,
              z: float = Z95) -> Estimate | None:
    """PPI++ estimate of a judged share, from an audit of n attempts and the judge's verdicts on
    the N' attempts outside it, with a normal 95% interval clipped to [0, 1]. λ is tuned on the
    same labels, which biases it (see the module docstring): the reference form, superseded by
    crossfit_ppi.

    Small audits: in a sample where judge and person never disagree, Var(Y − f) is 0 and the
    plain plug-in would claim a precision 40 labels cannot give; and λ tuned on the same few
    labels makes the interval optimistic. So λ and the interval's variance are computed with
    half a pseudo-observation added to each of the four audit cells (as Agresti and Min do for
    paired proportions); the point estimate uses the data as they are, with that λ. Simulated
    coverage (benchmarks/judged_estimates.py) is near 95% from about 100 labels and a few points
    below it at 40.
    """
    if audit.n == 0:
        return None
    if not 0 <= unlabelled_passes <= unlabelled:
        raise ValueError("unlabelled passes must lie between 0 and the unlabelled attempts")
    var_y, cov_yf, var_f = adjusted_moments(audit, unlabelled_passes, unlabelled)
    weight = power_tuned_weight(cov_yf, var_f, audit.n, unlabelled)
    pairs = audit.pairs()
    unlabelled_f = [1.0] * unlabelled_passes + [0.0] * (unlabelled - unlabelled_passes)
    fit = ppi_mean([y for y, _ in pairs], [f for _, f in pairs], unlabelled_f, weight=weight)
    se = math.sqrt(ppi_variance(fit.weight, var_f, var_y, cov_yf, audit.n + 2, unlabelled))
    return Estimate(estimator="ppi++", value=_clip(fit.value), low=_clip(fit.value - z * se),
                    high=_clip(fit.value + z * se), se=se, n=audit.n + unlabelled,
                    labels=audit.n, weight=fit.weight)


def adjusted_moments(audit: AuditTable, unlabelled_passes: int, unlabelled: int
                     ) -> tuple[float, float, float]:
    """Var(Y) and Cov(Y, f) of the audit with half a pseudo-observation in each cell (n + 2
    items, n + 1 denominators), and Var(f) over all N' + n judge verdicts."""
    pp, pf, fp, ff = (audit.pass_pass + 0.5, audit.pass_fail + 0.5, audit.fail_pass + 0.5,
                      audit.fail_fail + 0.5)
    n = pp + pf + fp + ff
    mean_y, mean_f = (pp + pf) / n, (pp + fp) / n
    var_y = n * mean_y * (1 - mean_y) / (n - 1)
    cov_yf = n * (pp / n - mean_y * mean_f) / (n - 1)
    total = audit.n + unlabelled
    share_f = (audit.pass_pass + audit.fail_pass + unlabelled_passes) / total
    var_f = total * share_f * (1 - share_f) / (total - 1) if total > 1 else 0.0
    return var_y, cov_yf, var_f


# --------------------------------------------------------------------------- cross-fit PPI++


class CaseAudit(BaseModel):
    """One case's part of a judged share: its judged attempts, the judge's passes among them,
    its audited ones by (person, judge), and its cross-fit fold (0 or 1). The folds split
    cases, not attempts, so the repeats of a case stay together."""

    model_config = ConfigDict(frozen=True)
    judged: int
    passes: int
    table: AuditTable = AuditTable()
    fold: int = 0


def case_fold(case_id: str, seed: int) -> int:
    """A case's cross-fit fold: a seeded hash of its id, so it does not depend on any label."""
    digest = hashlib.blake2b(f"{seed}:{case_id}".encode(), digest_size=8).digest()
    return digest[0] & 1


def residual_variance(table: AuditTable, weight: float) -> float:
    """Var(Y − λf) over an audit table with half a pseudo-observation added to each cell (so
    an audit with no disagreement is not certain; see ppi_share)."""
    cells = [(table.pass_pass + 0.5, 1 - weight), (table.pass_fail + 0.5, 1.0),
             (table.fail_pass + 0.5, -weight), (table.fail_fail + 0.5, 0.0)]
    total = sum(count for count, _ in cells)
    centre = sum(count * r for count, r in cells) / total
    return sum(count * (r - centre) ** 2 for count, r in cells) / (total - 1)


def crossfit_weight(table: AuditTable) -> float:
    """λ = Cov(Y, f) / Var(f) on one fold's labels (half a pseudo-observation per cell),
    clipped to [0, 1]: the weight that minimises Var(Y − λf); 0 for a fold without labels."""
    if table.n == 0:
        return 0.0
    _, cov_yf, _ = adjusted_moments(table, 0, 0)
    pp, fp = table.pass_pass + 0.5, table.fail_pass + 0.5
    total = table.n + 2
    share_f = (pp + fp) / total
    var_f = total * share_f * (1 - share_f) / (total - 1)
    return min(1.0, max(0.0, cov_yf / var_f)) if var_f > 0 else 0.0


def crossfit_ppi(cases: Sequence[CaseAudit], estimand: Estimand = "agent", z: float = Z95
                 ) -> Estimate | None:
    """PPI++ with a cross-fit λ: unbiased whatever the judge's errors and the audit's size.

    The cases are split in two folds (`CaseAudit.fold`). Within fold k the audited attempts are
    a uniform sample of its judged attempts, so with λ_k tuned on the *other* fold's labels

        θ̂_k = λ_k·mean_Nk(f) + mean_nk(Y − λ_k f)

    is exactly unbiased for the share of fold k's attempts, and θ̂ = Σ (N_k/N)·θ̂_k for the
    share of all N. mean_Nk(f) is over all of the fold's judged attempts (the audited ones too),
    so an audit of every attempt gives the labels' own share.

    Variance, by estimand: `release` (the share of these N attempts; the sample is the only
    randomness): Σ (N_k/N)²·(1 − n_k/N_k)·Var_k(Y − λ_k f)/n_k, zero for a full audit; the
    audit samples attempts, so the repeats need no correction here. `agent` (the rate the
    attempts are drawn from): that plus Var(Y)·deff/N, deff = 1 + (m − 1)·ICC the design effect
    of m repeats per case (`judged_clustering`), so k identical repeats count as one draw.
    Var(Y) and Var(Y − λf) carry half a pseudo-observation per audit cell.
    A fold with judged attempts and no label: λ = 0 on all labels (the labels alone)."""
    judged = sum(c.judged for c in cases)
    total = _table_sum([c.table for c in cases])
    if judged == 0 or total.n == 0:
        return None
    if any(c.table.n > c.judged or not 0 <= c.passes <= c.judged for c in cases):
        raise ValueError("a case has more audited attempts or judge passes than judged ones")
    folds = {k: [c for c in cases if c.fold == k] for k in (0, 1)}
    tables = {k: _table_sum([c.table for c in folds[k]]) for k in folds}
    sizes = {k: sum(c.judged for c in folds[k]) for k in folds}
    if any(sizes[k] and not tables[k].n for k in folds):
        folds, tables, sizes = {0: list(cases)}, {0: total}, {0: judged}
        weights = {0: 0.0}
    else:
        weights = {k: crossfit_weight(tables[1 - k]) for k in folds}
    value = design = 0.0
    residual_means: dict[int, float] = {}
    for k, table in tables.items():
        if not sizes[k]:
            continue
        lam, share = weights[k], sizes[k] / judged
        residual_means[k] = (table.pass_pass + table.pass_fail
                             - lam * (table.pass_pass + table.fail_pass)) / table.n
        passes = sum(c.passes for c in folds[k])
        value += share * (lam * passes / sizes[k] + residual_means[k])
        design += (share * share * (1 - table.n / sizes[k])
                   * residual_variance(table, lam) / table.n)
    clustering: tuple[Clustering, ...] = ()
    variance = design
    if estimand == "agent":
        clustering = (judged_clustering(cases),)
        variance = agent_variance(design, adjusted_moments(total, 0, 0)[0], judged,
                                  clustering[0].design_effect)
    se = math.sqrt(variance)
    return Estimate(estimator="ppi++", value=_clip(value), low=_clip(value - z * se),
                    high=_clip(value + z * se), se=se, n=judged, labels=total.n,
                    weight=sum(weights[k] * sizes[k] for k in sizes) / judged,
                    estimand=estimand, clustering=clustering)


def agent_variance(design: float, var_y: float, judged: int, effect: float) -> float:
    """The variance about the agent's rate: the audit's own (`design`, about these attempts)
    plus the attempts' share's variance as a draw from the agent, Var(Y)·deff/N, with deff the
    repeats' design effect (1 for independent attempts). The planner uses the same sum."""
    return design + var_y * effect / judged


def judged_clustering(cases: Sequence[CaseAudit]) -> Clustering:
    """The judged part's design effect. The ICC is the larger of the judge's verdicts' over all
    judged attempts and the person's labels' over the cases with two or more labels (when two
    cases have them): a judge's errors on single attempts make its verdicts agree less across
    repeats than the truth does, and labels alone are usually too few to say."""
    by_verdicts = verdict_clustering(cases)
    repeated = [(t.pass_pass + t.pass_fail, t.n) for c in cases if (t := c.table).n >= 2]
    if len(repeated) < 2:
        return by_verdicts
    by_labels = intraclass_correlation(
        [*repeated, *((t.pass_pass + t.pass_fail, t.n) for c in cases if (t := c.table).n == 1)])
    if by_labels is None or (by_verdicts.icc is not None and by_verdicts.icc >= by_labels):
        return by_verdicts
    return Clustering(part="judged", repeats=by_verdicts.repeats, icc=by_labels,
                      design_effect=1 + (by_verdicts.repeats - 1) * by_labels)


def verdict_clustering(cases: Sequence[CaseAudit]) -> Clustering:
    """The design effect of the judge's verdicts by case: what the raw and Rogan–Gladen
    shares, which read only the verdicts, are clustered by."""
    return Clustering.of("judged", [(c.passes, c.judged) for c in cases])


def _table_sum(tables: Sequence[AuditTable]) -> AuditTable:
    return AuditTable(pass_pass=sum(t.pass_pass for t in tables),
                      pass_fail=sum(t.pass_fail for t in tables),
                      fail_pass=sum(t.fail_pass for t in tables),
                      fail_fail=sum(t.fail_fail for t in tables))


# --------------------------------------------------------------------------- the release


def checked_variance(right: int, n: int, known: bool = False,
                     clustering: Clustering | None = None) -> float:
    """The variance of the share of attempts decided by checks: 0 when it is known (estimand
    `release`: these attempts were all checked); otherwise add-two p(1 − p)/(n + 2), so an
    all-right part is not certain, times the repeats' design effect when clustered."""
    if known or n == 0:
        return 0.0
    p_adj = (right + 1) / (n + 2)
    effect = clustering.design_effect if clustering is not None else 1.0
    return effect * p_adj * (1 - p_adj) / (n + 2)


def combined_share(deterministic_right: int, deterministic_n: int, judged: Estimate | None,
                   judged_n: int, z: float = Z95, deterministic_known: bool = False,
                   checked: Clustering | None = None) -> Estimate | None:
    """A release figure over deterministic and judged attempts together: the attempts decided by
    checks count as they are, the judged part by its estimate (PPI++ when audited). The share is
    w_d·p_d + w_j·θ̂_j with weights by attempt counts; its variance w_d²·Var_d + w_j²·se_j²
    (`checked_variance`), so the interval carries the judged part's uncertainty. Without judged
    attempts it is the plain share with its Wilson interval (at the effective size n/deff when
    `checked` clusters it). `deterministic_known`: the estimate is about this release's
    attempts (estimand `release`), whose checked part is known exactly, so only the judged part
    is uncertain. `checked`: the checked part's repeats, for an estimate about the agent's
    rate (a case's repeats are one draw as far as they agree)."""
    total = deterministic_n + judged_n
    if total == 0:
        return None
    parts = tuple(c for c in (checked, *(judged.clustering if judged else ())) if c is not None)
    if judged_n == 0 or judged is None:
        effect = checked.design_effect if checked is not None else 1.0
        interval = wilson(deterministic_right / effect, deterministic_n / effect)
        if interval is None:
            return None
        return Estimate(estimator="deterministic", value=deterministic_right / deterministic_n,
                        low=interval[0], high=interval[1], n=deterministic_n, clustering=parts)
    if judged.se is None:
        raise ValueError(f"a {judged.estimator} estimate has no standard error to combine")
    w_d, w_j = deterministic_n / total, judged_n / total
    p_d = deterministic_right / deterministic_n if deterministic_n else 0.0
    var_d = checked_variance(deterministic_right, deterministic_n, deterministic_known, checked)
    value = w_d * p_d + w_j * judged.value
    se = math.sqrt(w_d * w_d * var_d + w_j * w_j * judged.se ** 2)
    estimator = f"deterministic+{judged.estimator}"
    return Estimate(estimator=estimator, value=value, low=_clip(value - z * se),  # type: ignore[arg-type]
                    high=_clip(value + z * se), se=se, n=total, labels=judged.labels,
                    weight=judged.weight, estimand=judged.estimand, clustering=parts)
