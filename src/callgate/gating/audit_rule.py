"""One release audited, the other not: when the audit shows the judge erred in the release's
favour, the judge's word cannot pass it (docs/audit-gate.md).

Two readings of the unaudited side's judge error are put beside the audited figure:

- *as given*: the unaudited side's judge-as-given figure is right (its judge made no error);
- *most favourable*: the unaudited side's judge erred as far as it can in the release's favour
  (the baseline's judged passes all wrong; the release's judged fails all right).

With only the release audited, the rule fires for a figure when its audit says the judge was
lenient on it (the judge-as-given share of the same attempts lies above the audited interval)
and the audited figure against the baseline's as-given figure is not a sure pass, or when that
change is beyond the margin with the test sure. Then the gate is inconclusive (and names the
baseline audit that would decide it), or a regression when even the most favourable reading
leaves the drop beyond the margin. The mirror: only the baseline audited, its audit saying the
judge was strict on it. The readings only add to a decision: they never turn a failure into a
pass. Intervals are the gate's 97.5% ones (Z_PAIR), as for two audited releases.
"""

from __future__ import annotations

import math

from pydantic import BaseModel, ConfigDict

from callgate.gating.scores_file import ReleaseScores
from callgate.judging.audit import (
    AuditReport,
    ReleasePart,
    audit_report,
    width_plan,
)
from callgate.judging.estimates import Z_PAIR, AuditTable
from callgate.judging.kept_estimates import KeptEstimates
from callgate.store.db import Store

FIGURES = ("right_tool", "right_arguments")
Reading = tuple[str, str]  # (outcome, message) as decide() takes them
# Below this TPR + TNR − 1 the audited judge's verdicts say too little about the truth to
# plan the other side's audit from them (Rogan–Gladen's inversion is unstable near 0).
MIN_YOUDEN = 0.1


class Side(BaseModel):
    """One figure of one release: its judge-as-given share (points), its judged part, and, when
    audited, its audited estimate and standard error (points)."""

    model_config = ConfigDict(frozen=True)
    release: str
    run: int | None  # its run in this store, when it is there
    given: float
    part: ReleasePart | None = None
    audited: float | None = None
    se: float | None = None
    audited_text: str = ""


def judged_parts(store: Store, run_id: int) -> dict[str, ReleasePart]:
    """A run's attempts decided by checks and by the judge, per figure, without an audit (the
    attempts audit_report counts: scored ones; judged ones with the figure as the judge set
    it)."""
    judged = {(r["case_id"], r["repeat"]) for r in store.judgements(run_id)}
    verdicts = [v for v in store.verdicts(run_id) if v["status"] == "scored"]
    parts = {}
    for figure in FIGURES:
        checked = [bool(v[figure]) for v in verdicts if (v["case_id"], v["repeat"]) not in judged]
        by_judge = [bool(v[figure]) for v in verdicts if (v["case_id"], v["repeat"]) in judged]
        parts[figure] = ReleasePart(deterministic_right=sum(checked), deterministic_n=len(checked),
                                    judged=len(by_judge), judged_passes=sum(by_judge),
                                    table=AuditTable())
    return parts


def _pct(right: float, part: ReleasePart) -> float:
    return 100 * right / (part.deterministic_n + part.judged)


def _error_rates(table: AuditTable) -> tuple[float, float] | None:
    """The judge's TPR and TNR on an audit (half a pseudo-count in each cell), for planning the
    other side's audit as if the judge erred there as it did here; None if no better than
    chance."""
    tpr = (table.pass_pass + 0.5) / (table.pass_pass + table.pass_fail + 1)
    tnr = (table.fail_fail + 0.5) / (table.fail_fail + table.fail_pass + 1)
    return (tpr, tnr) if tpr + tnr > 1 else None


class _Plan(BaseModel):
    labels: int | None
    text: str


def _plan(unaudited: Side, other: Side, table: AuditTable | None, max_drop: float,
          z: float, now_is_audited: bool) -> _Plan:
    """Audit labels on the unaudited side that would decide the comparison of two audited
    figures, if its judge errs as the audited side's did and the audited estimate holds."""
    part = unaudited.part
    if part is None or part.judged == 0:
        return _Plan(labels=None, text="")
    rates = _error_rates(table) if table is not None and table.n else None
    assert other.audited is not None and other.se is not None
    if rates is None or rates[0] + rates[1] - 1 < MIN_YOUDEN:
        # The judge tells (almost) nothing: plan for the labels alone at the hardest point,
        # the unaudited side where the audited one is (no change).
        rates, share, expected = (0.5, 0.5), 0.5, other.audited
    else:
        passes = part.judged_passes / part.judged
        youden = rates[0] + rates[1] - 1
        edge = 0.5 / (part.judged + 1)  # never a share whose labels cannot vary
        share = min(1 - edge, max(edge, (passes + rates[1] - 1) / youden))
        expected = _pct(part.deterministic_right + share * part.judged, part)
    change = (other.audited - expected) if now_is_audited else (expected - other.audited)
    distance = abs(change + max_drop) / 100
    room = (distance / z) ** 2 - (other.se / 100) ** 2
    w_j = part.judged / (part.deterministic_n + part.judged)
    plan = (width_plan(None, part.judged_passes, part.judged, z * math.sqrt(room) / w_j,
                       rates=rates, share=share, z=z) if room > 0 and distance > 0 else None)
    if plan is None or plan.labels is None:
        return _Plan(labels=part.judged, text=(
            f"all {part.judged} judged attempts (if its judge errs as this audit found, even a "
            "full audit may leave it undecided: audit more of the other release too)"))
    return _Plan(labels=plan.labels, text=f"about {plan.labels} labels of its "
                                          f"{part.judged} judged attempts")


def _way_on(side: Side, plan: _Plan, role: str) -> str:
    if side.run is None:
        return (f"audit the {role} {side.release} where it was scored (its run is not in this "
                "store): callgate judge audit RUN --n 40, then callgate judge label --audit RUN")
    n = plan.labels or 40
    return (f"audit the {role} {side.release}: {plan.text}: callgate judge audit {side.run} "
            f"--n {n}, then callgate judge label --audit {side.run}")


def _reading(figure: str, now: Side, then: Side, max_drop: float, z: float,
             table: AuditTable | None) -> Reading:
    """The rule for one figure, one side audited (`now` when now.audited is set, else `then`)."""
    now_audited = now.audited is not None
    audited, unaudited = (now, then) if now_audited else (then, now)
    assert audited.audited is not None and audited.se is not None
    name = figure.replace("_", " ")
    spread = z * audited.se
    low, high = audited.audited - spread, audited.audited + spread
    # In the release's favour: lenient on the release, strict on the baseline.
    favoured = audited.given > high if now_audited else audited.given < low
    sign = 1 if now_audited else -1
    change = sign * (audited.audited - unaudited.given)
    c_low, c_high = change - spread, change + spread
    shown = (f"{name}: {audited.release} as the judge gave it {audited.given:.1f}, audited "
             f"{audited.audited:.1f} [{low:.1f}–{high:.1f}] ({audited.audited_text}, 97.5%); "
             f"{unaudited.release} as the judge gave it {unaudited.given:.1f} (not audited)")
    if not (favoured and c_low < -max_drop) and not c_high < -max_drop:
        what = ("the judge-as-given share lies in the audited interval"
                if not favoured else f"read against {unaudited.release}'s judge-as-given "
                f"figure the change is {change:+.1f} [{c_low:+.1f} to {c_high:+.1f}], no drop "
                f"beyond {max_drop:g}")
        return ("pass", f"{shown}: {what}; the judge-as-given comparison stands")
    how = "lenient on this release" if now_audited else f"strict on the baseline {then.release}"
    shown += (f": the audit says the judge was {how}; against {unaudited.release}'s "
              f"judge-as-given figure the change is {change:+.1f} [{c_low:+.1f} to "
              f"{c_high:+.1f}], allowed drop {max_drop:g}")
    best = _most_favourable(unaudited, now_audited)
    if best is not None:
        best_change = sign * (audited.audited - best)
        best_high = best_change + spread
        reading = (f"; with the most favourable reading of {unaudited.release}'s judge error "
                   f"({unaudited.release} {best:.1f}: "
                   + ("every judged pass of it wrong" if now_audited
                      else "every judged fail of it right")
                   + f") the change is {best_change:+.1f} [to {best_high:+.1f}]")
        if best_high < -max_drop:
            return ("regression", f"{shown}{reading}: beyond the allowed drop whatever its "
                                  "judge did — REGRESSION")
        shown += reading
    plan = _plan(unaudited, audited, table, max_drop, z, now_audited)
    role = "baseline" if now_audited else "release"
    return ("undecided", f"{shown}: the judge's word cannot pass this release; "
                         + _way_on(unaudited, plan, role))


def _most_favourable(side: Side, baseline: bool) -> float | None:
    """The unaudited side's figure with its judge's errors all in the release's favour."""
    part = side.part
    if part is None:
        return None
    if baseline:
        return _pct(part.deterministic_right, part)
    return _pct(part.deterministic_right + part.judged, part)


def _stored_run(store: Store, release: ReleaseScores) -> int | None:
    row = store.find_stored_run(release.suite_name, release.agent, release.release)
    return row.id if row is not None and row.suite == release.suite_fingerprint else None


def _given(release: ReleaseScores, figure: str) -> float | None:
    pct: float | None = getattr(release.figures, figure).pct
    return pct


def release_audited_alone(store: Store, report: AuditReport, current: str,
                          base: ReleaseScores, max_drop: float, z: float = Z_PAIR
                          ) -> list[Reading]:
    """The rule's readings when only this release (`report`, its complete audit) is audited."""
    base_run = _stored_run(store, base)
    base_parts = judged_parts(store, base_run) if base_run is not None else {}
    out = []
    for figure in FIGURES:
        estimate, part = report.release.get(figure), report.parts.get(figure)
        then_given = _given(base, figure)
        if (estimate is None or estimate.se is None or part is None or part.judged == 0
                or then_given is None):
            continue
        now = Side(release=current, run=report.run,
                   given=_pct(part.deterministic_right + part.judged_passes, part), part=part,
                   audited=100 * estimate.value, se=100 * estimate.se,
                   audited_text=f"{estimate.estimator}, {part.judged} judged attempts, "
                                f"{part.table.n} audited")
        then = Side(release=base.release, run=base_run, given=then_given,
                    part=base_parts.get(figure))
        out.append(_reading(figure, now, then, max_drop, z, part.table))
    return out


def baseline_audited_alone(store: Store, run_id: int, current: str,
                           base: ReleaseScores, estimates: KeptEstimates, max_drop: float,
                           z: float = Z_PAIR) -> list[Reading]:
    """The mirror: only the baseline is audited (`estimates`, its kept audited figures)."""
    parts = judged_parts(store, run_id)
    base_run = _stored_run(store, base)
    tables: dict[str, AuditTable] = {}
    if base_run is not None and store.audit(base_run) is not None:
        tables = {f: p.table for f, p in audit_report(store, base_run).parts.items()}
    out = []
    for figure in FIGURES:
        kept = estimates.figure(figure)
        then_given, part = _given(base, figure), parts[figure]
        if kept is None or kept.pct is None or then_given is None or part.judged == 0:
            continue
        counted = estimates.audit.counted if estimates.audit is not None else None
        labels = counted if counted is not None else kept.labels
        then = Side(release=base.release, run=base_run, given=then_given,
                    audited=kept.pct, se=kept.se_points(),
                    audited_text=f"{kept.estimator}, {labels} audited")
        now = Side(release=current, run=run_id,
                   given=_pct(part.deterministic_right + part.judged_passes, part), part=part)
        out.append(_reading(figure, now, then, max_drop, z, tables.get(figure)))
    return out



def one_sided(store: Store, run_id: int, report: AuditReport | None, base: ReleaseScores,
              then: KeptEstimates | None, max_drop: float) -> list[Reading]:
    """The rule's readings with exactly one side audited: `report` (this release's complete
    audit) or `then` (the baseline's kept audited estimates)."""
    if report is not None:
        return release_audited_alone(store, report, _release_of(store, run_id), base, max_drop)
    assert then is not None
    return baseline_audited_alone(store, run_id, _release_of(store, run_id), base, then,
                                  max_drop)


def _release_of(store: Store, run_id: int) -> str:
    run = store.stored_run(run_id)
    return run.release if run is not None else f"run {run_id}"
