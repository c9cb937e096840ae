"""Correcting a judged share for an imperfect judge (Rogan–Gladen, with add-two adjustments):
the calibration's TPR and TNR applied to what the judge passed in a run."""

from __future__ import annotations

from callgate.stats import Z95


def rogan_gladen(p: float, n: float, tpr: float, tnr: float, m1: float, m0: float
                 ) -> tuple[float, float] | None:
    """Correct an observed pass rate p (over n judged attempts) for the judge's errors.

    θ = (p + q0 − 1) / (q0 + q1 − 1), clipped to [0, 1], with q1 = TPR and q0 = TNR from
    calibration on m1 items labelled pass and m0 labelled fail. Returns (θ, standard error by
    the delta method), or None when the judge is no better than chance (q0 + q1 ≤ 1). n may
    be an effective size (attempts / the repeats' design effect).
    """
    youden = tpr + tnr - 1
    if youden <= 0 or n <= 0 or m1 <= 0 or m0 <= 0:
        return None
    theta = min(1.0, max(0.0, (p + tnr - 1) / youden))
    variance = (p * (1 - p) / n + (1 - theta) ** 2 * tnr * (1 - tnr) / m0
                + theta ** 2 * tpr * (1 - tpr) / m1) / youden ** 2
    return theta, variance ** 0.5


def add_two_corrected(passes: int, n: int, tpr: float, tnr: float, m1: int, m0: int,
                      design_effect: float = 1.0) -> tuple[float, float] | None:
    """rogan_gladen on add-two adjusted rates (p at the effective size n / design_effect, and
    the calibration's TPR and TNR): the centre and standard error of corrected_share's
    interval."""
    eff_passes, eff_n = passes / design_effect, n / design_effect
    return rogan_gladen((eff_passes + 1) / (eff_n + 2), eff_n + 2, (tpr * m1 + 1) / (m1 + 2),
                        (tnr * m0 + 1) / (m0 + 2), m1 + 2, m0 + 2)


def corrected_share(passes: int, n: int, tpr: float, tnr: float, m1: int, m0: int,
                    z: float = Z95, design_effect: float = 1.0) -> dict[str, float] | None:
    """Raw and corrected share (points) with a 95% interval, using add-two adjustments of p
    and of the calibration rates for the interval (better coverage at small m).

    `design_effect`: of the judged attempts' repeats by case (`callgate.stats.design_effect`);
    the interval counts them at the effective size n / design_effect, as a figure's Wilson
    interval does, so k identical repeats get the one-repeat interval. The calibration items
    are distinct items, counted as they are. 1 (one attempt per case) changes no bit."""
    if n <= 0:
        return None
    point = rogan_gladen(passes / n, n / design_effect, tpr, tnr, m1, m0)
    if point is None:
        return None
    adjusted = add_two_corrected(passes, n, tpr, tnr, m1, m0, design_effect)
    centre, se = adjusted if adjusted is not None else point
    return {
        "raw": 100 * passes / n,
        "corrected": 100 * point[0],
        "low": 100 * max(0.0, centre - z * se),
        "high": 100 * min(1.0, centre + z * se),
        "n": n,
    }
