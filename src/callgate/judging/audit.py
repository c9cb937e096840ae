"""Per-release audits: a person labels a uniform random sample of a run's judged attempts
(drawn and labelled by `audit_sample`), and the judged shares are estimated three ways (raw,
Rogan–Gladen, PPI++; see estimates.py), with the gate's reading of an audited figure. The
audit's text and plans are in `audit_text`.

Only the answered prefix of the sample's seeded order counts: it is a uniform sample of the
judged attempts for any length.
"""

from __future__ import annotations

import math
from collections.abc import Container, Mapping, Sequence
from statistics import NormalDist
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, computed_field, field_serializer

from callgate.errors import CallgateError
from callgate.judging.estimates import (
    Z_PAIR,
    AuditTable,
    CaseAudit,
    Clustering,
    Estimand,
    Estimate,
    adjusted_moments,
    case_fold,
    checked_variance,
    combined_share,
    crossfit_ppi,
    judged_clustering,
    raw_share,
    verdict_clustering,
)
from callgate.judging.judged_shares import JudgedShare, JudgedShares, judged_shares
from callgate.judging.planning import (
    AuditMoments,
    AuditPlan,
    audit_labels_for_width,
    moments_from_rates,
)
from callgate.stats import Z95
from callgate.store.db import Store

Key = tuple[str, int]  # (case_id, repeat)
DETERMINISTIC_ARGUMENT_FAILURES = ("invalid_json", "schema_violation")

# --------------------------------------------------------------------------- estimates


class DimensionEstimates(BaseModel):
    """One judged share three ways; each figure names its estimator."""

    model_config = ConfigDict(frozen=True)
    judged: int  # N: attempts in this share's population
    judged_passes: int  # of which the judge said pass
    labels: int  # audited ones with a person's label that applies
    disagreements: int
    table: AuditTable  # the audit by (person, judge)
    raw: Estimate | None
    rogan_gladen: JudgedShare | None  # as `score` stored it (points), when corrected
    ppi: Estimate | None
    # The repeats of a case in this population (what an `agent` interval and plan widen by)
    clustering: Clustering | None = None

    @field_serializer("rogan_gladen")
    def _as_stored(self, share: JudgedShare | None) -> dict[str, Any] | None:
        """In `judge audit --json` as `score` stored it (no field added since, at its default)."""
        return share.model_dump(mode="json", exclude_unset=True) if share is not None else None


class ReleasePart(BaseModel):
    """What a release figure's estimate is made of: attempts decided by checks, and the judged
    ones with their audit table (Y = the figure is truly right, f = the verdict says so)."""

    model_config = ConfigDict(frozen=True)
    deterministic_right: int
    deterministic_n: int
    judged: int
    judged_passes: int
    table: AuditTable


class AuditItem(BaseModel):
    """One drawn attempt: where it is in the sample's order, the person's labels or skip (who,
    when), and whether the estimates count it (it lies in the answered prefix)."""

    model_config = ConfigDict(frozen=True)
    position: int
    case_id: str
    repeat: int
    label_tool_choice: str | None = None
    label_arguments: str | None = None
    skip_reason: str | None = None
    labeller: str | None = None
    labelled_at: str | None = None
    counted: bool = False


class AuditReport(BaseModel):
    model_config = ConfigDict(frozen=True)
    run: int
    seed: int
    population: int
    sample: int
    labelled: int  # items with a label, counted or not
    labellers: list[str]
    dimensions: dict[str, DimensionEstimates]
    release: dict[str, Estimate | None]  # right_tool / right_arguments over all attempts
    parts: dict[str, ReleasePart]
    # Only the answered prefix of the seeded order is a uniform sample: `counted` labels in it,
    # `skipped` items in it (then the audit is not complete, and the gate does not use it).
    counted: int = 0
    skipped: int = 0
    estimand: Estimand = "release"
    items: list[AuditItem] = Field(default_factory=list)
    # right_tool / right_arguments over a tag's attempts, for the tags the counted labels cover
    by_tag: dict[str, dict[str, Estimate | None]] = Field(default_factory=dict)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def complete(self) -> bool:
        """Labels in the answered prefix and no skip among them: what the gate may use."""
        return self.skipped == 0 and self.counted > 0


def answered_prefix(items: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The audit items, in the sample's order, before the first one neither labelled nor
    skipped: only they are a uniform sample (labels given further on wait for the gap)."""
    prefix = []
    for item in sorted(items, key=lambda i: i["position"]):
        if item["label_tool_choice"] is None and not item.get("skip_reason"):
            break
        prefix.append(item)
    return prefix


def _figure_truth(figure: str, item: Mapping[str, Any], verdict: Mapping[str, Any]) -> bool:
    """Whether an audited attempt truly has the figure right, by the person's labels: right
    arguments also need every call schema-valid (a deterministic failure stays one)."""
    tool_right: bool = item["label_tool_choice"] == "pass"
    if figure == "right_tool":
        return tool_right
    return tool_right and item["label_arguments"] in ("pass", "n/a") and (
        verdict["arguments"] not in DETERMINISTIC_ARGUMENT_FAILURES)


def case_audits(population: Mapping[Key, bool], truth: Mapping[Key, bool], seed: int
                ) -> list[CaseAudit]:
    """A judged share's attempts (the judge's verdict f) and the audited ones (the person's Y)
    by case, each case in its cross-fit fold."""
    by_case: dict[str, list[Key]] = {}
    for key in population:
        by_case.setdefault(key[0], []).append(key)
    return [CaseAudit(judged=len(keys), passes=sum(population[k] for k in keys),
                      table=AuditTable.of([(truth[k], population[k]) for k in keys if k in truth]),
                      fold=case_fold(case_id, seed))
            for case_id, keys in sorted(by_case.items())]


def _ppi_of(population: Mapping[Key, bool], truth: Mapping[Key, bool], seed: int,
            estimand: Estimand, z: float = Z95) -> Estimate | None:
    if not any(k in truth for k in population):
        return None
    return crossfit_ppi(case_audits(population, truth, seed), estimand, z)


def _dimension(population: dict[Key, bool], labels: dict[Key, bool],
               stored_rg: JudgedShare | None, seed: int, estimand: Estimand
               ) -> DimensionEstimates:
    pairs = [(labels[k], population[k]) for k in population if k in labels]
    cases = case_audits(population, labels, seed)
    return DimensionEstimates(
        judged=len(population), judged_passes=sum(population.values()), labels=len(pairs),
        disagreements=sum(y != f for y, f in pairs), table=AuditTable.of(pairs),
        raw=raw_share(sum(population.values()), len(population),
                      verdict_clustering(cases) if cases else None),
        rogan_gladen=stored_rg if stored_rg and stored_rg.corrected is not None else None,
        ppi=_ppi_of(population, labels, seed, estimand),
        clustering=judged_clustering(cases) if cases else None)


def judged_populations(judgements: Mapping[Key, Mapping[str, Any]],
                       verdicts: Mapping[Key, Mapping[str, Any]]
                       ) -> tuple[dict[Key, bool], dict[Key, bool]]:
    """The judge's verdicts (pass or not) over the attempts each judged share is taken over:
    tool choice over every judgement; arguments over the population the judged arguments
    share and its calibration rates are taken over (calibration.rate_pair): the judge passed
    the tool choice and graded the arguments, and no deterministic check failed them."""
    tool = {k: j["tool_choice"] == "pass" for k, j in judgements.items()}
    arguments = {
        k: j["arguments"] == "pass" for k, j in judgements.items()
        if j["tool_choice"] == "pass" and j["arguments"] in ("pass", "fail")
        and verdicts.get(k, {}).get("arguments") not in DETERMINISTIC_ARGUMENT_FAILURES}
    return tool, arguments


def judged_design_effects(store: Store, run_id: int) -> dict[str, Clustering]:
    """Per judged share, the repeats' design effect from the judge's verdicts by case: what a
    plan about the agent's rate widens by before any audit label exists."""
    judgements = {(r["case_id"], r["repeat"]): r for r in store.judgements(run_id)}
    verdicts = {(v["case_id"], v["repeat"]): v for v in store.verdicts(run_id)
                if v["status"] == "scored"}
    populations = dict(zip(("tool_choice", "arguments"),
                           judged_populations(judgements, verdicts), strict=True))
    return {dim: judged_clustering(case_audits(population, {}, 0))
            for dim, population in populations.items() if population}


def audit_report(store: Store, run_id: int, estimand: Estimand = "release") -> AuditReport:
    """Raw, Rogan–Gladen and PPI++ figures for the run's judged shares, and the release's right
    tool % and right arguments % over all attempts with the judged part by PPI++ (cross-fit λ,
    folds by case from the audit's seed), its intervals about `estimand`."""
    audit = store.audit(run_id)
    if audit is None:
        raise CallgateError(f"run {run_id} has no audit; draw one: callgate judge audit {run_id}")
    run = store.stored_run(run_id)
    stored_judged = (judged_shares((run.scores or {}).get("judged"),
                                   f"run {run_id} ({run.release})")
                     if run is not None else None) or JudgedShares(n=0)
    judgements = {(r["case_id"], r["repeat"]): r for r in store.judgements(run_id)}
    verdicts = {(v["case_id"], v["repeat"]): v for v in store.verdicts(run_id)
                if v["status"] == "scored"}
    items = store.audit_items(run_id)
    labelled = [i for i in items if i["label_tool_choice"] is not None]
    prefix = answered_prefix(items)
    counted = {(i["case_id"], i["repeat"]) for i in prefix if i["label_tool_choice"] is not None}
    by_key = {(i["case_id"], i["repeat"]): i for i in labelled
              if (i["case_id"], i["repeat"]) in counted}

    tool_population, args_population = judged_populations(judgements, verdicts)
    tool_labels = {k: i["label_tool_choice"] == "pass" for k, i in by_key.items()}
    # The person's verdict on the judged arguments is pass when they passed tool and
    # arguments, fail when they failed either; their n/a says nothing.
    args_labels = {k: i["label_tool_choice"] == "pass" and i["label_arguments"] == "pass"
                   for k, i in by_key.items()
                   if i["label_tool_choice"] == "fail" or i["label_arguments"] in ("pass", "fail")}
    dimensions = {
        "tool_choice": _dimension(tool_population, tool_labels,
                                  stored_judged.tool_choice, audit["seed"], estimand),
        "arguments": _dimension(args_population, args_labels, stored_judged.arguments,
                                audit["seed"], estimand),
    }

    judged_keys = [k for k in judgements if k in verdicts]
    truths = {figure: {k: _figure_truth(figure, item, verdicts[k]) for k, item in by_key.items()
                       if k in judgements and k in verdicts}
              for figure in ("right_tool", "right_arguments")}

    def figures(keys: Container[Key]) -> tuple[dict[str, Estimate | None],
                                               dict[str, ReleasePart]]:
        release: dict[str, Estimate | None] = {}
        parts: dict[str, ReleasePart] = {}
        for figure, truth in truths.items():
            checked_keys = [k for k in verdicts if k not in judgements and k in keys]
            deterministic = [verdicts[k][figure] for k in checked_keys]
            judged_f = {k: bool(verdicts[k][figure]) for k in judged_keys if k in keys}
            pairs = [(truth[k], judged_f[k]) for k in judged_f if k in truth]
            release[figure] = combined_share(
                sum(deterministic), len(deterministic),
                _ppi_of(judged_f, truth, audit["seed"], estimand), len(judged_f),
                deterministic_known=estimand == "release",
                checked=(checked_clustering(verdicts, checked_keys, figure)
                         if estimand == "agent" and checked_keys else None))
            parts[figure] = ReleasePart(
                deterministic_right=sum(deterministic), deterministic_n=len(deterministic),
                judged=len(judged_f), judged_passes=sum(judged_f.values()),
                table=AuditTable.of(pairs))
        return release, parts

    release, parts = figures(verdicts)
    # Per tag, where the audit has counted labels on the tag's judged attempts: within a tag
    # they are a uniform sample of its judged attempts too.
    tags = store.case_tags_of(run.suite) if run is not None and run.suite else {}
    by_tag: dict[str, dict[str, Estimate | None]] = {}
    for tag in sorted({t for k in by_key for t in tags.get(k[0], [])}):
        tagged = {k for k in verdicts if tag in tags.get(k[0], [])}
        by_tag[tag] = figures(tagged)[0]
    return AuditReport(
        run=run_id, seed=audit["seed"], population=audit["population"], sample=len(items),
        labelled=len(labelled), labellers=sorted({i["labeller"] for i in labelled}),
        dimensions=dimensions, release=release, parts=parts, by_tag=by_tag, counted=len(counted),
        skipped=sum(1 for i in prefix if i.get("skip_reason")), estimand=estimand,
        items=[AuditItem(**{k: v for k, v in i.items() if k in AuditItem.model_fields},
                         counted=(i["case_id"], i["repeat"]) in counted) for i in items])


def checked_clustering(verdicts: Mapping[Key, Mapping[str, Any]], keys: Sequence[Key],
                       figure: str) -> Clustering:
    """The repeats' design effect of the attempts decided by checks, from their verdicts on
    `figure` by case."""
    by_case: dict[str, list[int]] = {}
    for key in keys:
        by_case.setdefault(key[0], []).append(int(bool(verdicts[key][figure])))
    return Clustering.of("checked", [(sum(v), len(v)) for v in by_case.values()])


def width_plan(table: AuditTable | None, judged_passes: int, judged: int, width: float,
               rates: tuple[float, float] | None = None, share: float | None = None,
               z: float = Z95, estimand: Estimand = "release",
               clustering: Clustering | None = None) -> AuditPlan | None:
    """Audit labels for a ±width PPI++ interval over `judged` attempts: from the audit's
    disagreements when it has labels, else from the calibration rates at `share`; about
    `estimand` (`agent`: widened by the repeats' design effect in `clustering`)."""
    if judged == 0:
        return None
    if table is not None and table.n:
        var_y, cov_yf, var_f = adjusted_moments(table, max(0, judged_passes - table.pass_pass
                                                           - table.fail_pass),
                                                judged - table.n)
        moments = AuditMoments(var_y=var_y, cov_yf=cov_yf, var_f=var_f, source="audit")
    elif rates is not None:
        moments = moments_from_rates(share if share is not None else 0.5, *rates)
    else:
        return None
    effect = clustering.design_effect if clustering is not None else 1.0
    return audit_labels_for_width(width, judged, moments, z, estimand, effect)


# --------------------------------------------------------------------------- the gate


class JudgedCheck(BaseModel):
    """The gate's reading of one release figure estimated with its audit."""

    model_config = ConfigDict(frozen=True)
    figure: str
    outcome: Literal["pass", "regression", "undecided"]
    message: str
    labels_needed: int | None = None  # audit labels in all that would decide it


def judged_check(report: AuditReport, figure: str, baseline_pct: float, max_drop: float,
                 z: float = Z_PAIR, baseline_se: float | None = None) -> JudgedCheck | None:
    """Compare a figure's PPI++ estimate (all attempts, judged part from the audit) with the
    2-point rule. With the baseline's own audited estimate (`baseline_se`, points) the change
    now − then has the interval ±z·√(se_now² + se_then²); without, the baseline is a fixed
    line. A regression when the whole interval lies below −max_drop, a pass when none of it
    does, otherwise undecided, with the audit size that would decide it at the estimate's
    current value (the baseline's uncertainty kept). z defaults to the 97.5% one, so the two
    figures' checks hold together at least 95% of the time."""
    estimate = report.release.get(figure)
    part = report.parts.get(figure)
    if estimate is None or part is None or estimate.se is None or part.judged == 0:
        return None
    then_se = (baseline_se or 0.0) / 100
    name = figure.replace("_", " ")
    change = 100 * estimate.value - baseline_pct
    spread = 100 * z * math.sqrt(estimate.se ** 2 + then_se ** 2)
    low, high = change - spread, change + spread
    against = (f"the baseline's audited {baseline_pct:.1f} ± {100 * z * then_se:.1f}"
               if baseline_se is not None else f"{baseline_pct:.1f}")
    level = f"{100 * (2 * NormalDist().cdf(z) - 1):g}%"
    shown = (f"{name} {100 * estimate.value:.1f} [{100 * estimate.low:.1f}–"
             f"{100 * estimate.high:.1f}] ({estimate.estimator}, {part.judged} judged attempts, "
             f"{part.table.n} audited) against {against}: change {change:+.1f} "
             f"[{low:+.1f} to {high:+.1f}] ({level}), allowed drop {max_drop:g}")
    if high < -max_drop:
        return JudgedCheck(figure=figure, outcome="regression",
                           message=f"{shown}: the whole interval is below — REGRESSION")
    if low >= -max_drop:
        return JudgedCheck(figure=figure, outcome="pass", message=f"{shown}: no drop beyond it")
    margin = abs(change + max_drop) / 100
    total = part.deterministic_n + part.judged
    w_d, w_j = part.deterministic_n / total, part.judged / total
    parts = {c.part: c for c in estimate.clustering}
    var_d = checked_variance(part.deterministic_right, part.deterministic_n,
                             report.estimand == "release", parts.get("checked"))
    room = (margin / z) ** 2 - w_d * w_d * var_d - then_se ** 2
    plan = (width_plan(part.table, part.judged_passes, part.judged, z * math.sqrt(room) / w_j,
                       z=z, estimand=report.estimand, clustering=parts.get("judged"))
            if room > 0 and margin > 0 else None)
    if plan is None or plan.labels is None:
        advice = ("no audit of this run can decide it (the estimate sits on the line, or the "
                  "judged attempts are too few); add cases or repeats")
        needed = None
    else:
        needed = plan.labels
        advice = (f"about {max(0, needed - part.table.n)} more audit labels ({needed} in all) "
                  f"would decide it if the estimate holds: callgate judge audit {report.run} "
                  f"--n {needed}")
    return JudgedCheck(figure=figure, outcome="undecided", labels_needed=needed,
                       message=f"{shown}: the interval straddles it; {advice}")


def estimates_document(report: AuditReport) -> dict[str, Any]:
    """What a scores file keeps of an audit: points, every figure with its estimator."""
    judged: dict[str, Any] = {}
    for dim, d in report.dimensions.items():
        rg = d.rogan_gladen
        judged[dim] = {
            "raw": d.raw.points() if d.raw else None,
            "rogan_gladen": ({"estimator": "rogan_gladen", "pct": rg.corrected,
                              "low": rg.low, "high": rg.high, "n": d.judged}
                             if rg else None),
            "ppi++": d.ppi.points() if d.ppi else None,
        }
    return {
        "audit": {"run": report.run, "seed": report.seed, "sample": report.sample,
                  "labelled": report.labelled, "labellers": report.labellers,
                  "counted": report.counted, "skipped": report.skipped,
                  "complete": report.complete, "estimand": report.estimand},
        "right_tool": e.points() if (e := report.release.get("right_tool")) else None,
        "right_arguments": e.points() if (e := report.release.get("right_arguments")) else None,
        "judged": judged,
        "by_tag": {tag: {figure: e.points() if e else None for figure, e in figures.items()}
                   for tag, figures in report.by_tag.items()},
    }
