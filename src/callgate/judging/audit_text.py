"""An audit and the plans as text: the estimates with their estimators, what the intervals are
about, and how many more labels a certificate or a ±width interval needs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from callgate.judging.audit import AuditReport, width_plan
from callgate.judging.calibration import dimension_confusion
from callgate.judging.calibration_set import item_payloads, read_set
from callgate.judging.estimates import (
    Estimate,
)
from callgate.judging.judge import JudgeOutput
from callgate.judging.planning import (
    AuditPlan,
    certificate_plan,
)
from callgate.judging.step import JudgeCache
from callgate.store.db import Store


def set_confusions(judge: Any, set_path: Any, store: Store | None
                   ) -> tuple[dict[str, Any], int, int]:
    """Per dimension, the confusion of the judge's cached verdicts against the labels on the
    test split of a calibration set; also how many test items the judge has not judged yet,
    and how many test items there are. Without a store, the judge has judged nothing."""
    items, _ = read_set(set_path)
    test = [i for i in items if i.split == "test"]
    outputs: dict[str, JudgeOutput] = {}
    if store is not None:
        cache = JudgeCache(store, judge.fingerprint)
        keys = {i.id: cache.key(item_payloads(i)) for i in test}
        stored = cache.get(list(keys.values()))
        outputs = {i: stored[k] for i, k in keys.items() if k in stored}
    out = {dim: dimension_confusion(dim, test, outputs) for dim in judge.spec.dimensions}
    return out, len(test) - len(outputs), len(test)


ESTIMAND_TEXT = {
    "release": "this release's attempts (finite population: an attempt audited is known, so a "
               "full audit leaves no judged uncertainty)",
    "agent": "the agent's rate the attempts are drawn from (repeats of a case clustered)",
}


def _pct(estimate: Estimate | None) -> str:
    if estimate is None:
        return "—"
    return f"{100 * estimate.value:.1f} [{100 * estimate.low:.1f}–{100 * estimate.high:.1f}]"


def audit_lines(report: AuditReport, width: float | None = None) -> list[str]:
    """The audit as text lines: each figure names its estimator."""
    who = ", ".join(report.labellers) or "nobody yet"
    lines = [f"audit of run {report.run}: {report.sample} of {report.population} judged "
             f"attempts drawn (seed {report.seed}), {report.labelled} labelled by {who}"]
    if report.skipped:
        reasons = "; ".join(f"{i.position + 1}: {i.skip_reason}" for i in report.items
                            if i.skip_reason)
        lines.append(f"INCOMPLETE: {report.skipped} item(s) skipped inside the labelled prefix "
                     f"({reasons}); skipped items are not a random sample, so the gate does "
                     "not use this audit until they are labelled")
    if report.labelled > report.counted:
        lines.append(f"{report.labelled - report.counted} label(s) lie past the first "
                     "unlabelled item of the sample's order and count once it is labelled")
    lines.append(f"PPI++ intervals are about {ESTIMAND_TEXT[report.estimand]}")
    lines.extend(clustering_lines(report))
    lines.append("")
    lines.append(f"{'judged share':<14} {'N':>5} {'labels':>6} {'raw (judge)':>20} "
                 f"{'Rogan–Gladen':>20} {'PPI++':>20}")
    for dim, d in report.dimensions.items():
        rg = d.rogan_gladen
        rg_text = (f"{rg.corrected:.1f} [{rg.low:.1f}–{rg.high:.1f}]" if rg else "—")
        lines.append(f"{dim:<14} {d.judged:>5} {d.labels:>6} {_pct(d.raw):>20} "
                     f"{rg_text:>20} {_pct(d.ppi):>20}")
    lines.append("")
    for figure, estimate in report.release.items():
        label = figure.replace("_", " ") + " %"
        name = estimate.estimator if estimate else "—"
        lines.append(f"release {label:<18} {_pct(estimate)}  ({name}, all attempts)")
    for tag, figures in report.by_tag.items():
        shown = ", ".join(f"{figure.replace('_', ' ')} {_pct(estimate)}"
                          for figure, estimate in figures.items())
        lines.append(f"  tag {tag}: {shown}")
    if 0 < report.counted < 100:
        lines.append("")
        lines.append(f"note: with {report.counted} labels the PPI++ 95% interval is a normal "
                     "approximation; it held the true share in 96–97% of simulated audits of 40 "
                     "and about 95% of audits of 100 (benchmarks/ppi_bias.py)")
    if width is not None:
        lines.append("")
        for dim, d in report.dimensions.items():
            plan = width_plan(d.table, d.judged_passes, d.judged, width,
                              estimand=report.estimand, clustering=d.clustering)
            lines.append(f"{dim}: {describe_width_plan(plan, d.labels, width)}")
    return lines


def clustering_lines(report: AuditReport) -> list[str]:
    """What the repeats of a case do to the intervals: nothing about this release's attempts
    (the audit samples attempts); about the agent's rate, each part's design effect."""
    if report.estimand == "release":
        return ["PPI++ needs no correction for repeats of a case about this release's attempts: "
                "the audit is a uniform sample of them and the checked ones are known; the raw "
                "and Rogan–Gladen columns are about the agent's rate, clustered by case"]
    lines = ["repeats clustered by case (a variance times the design effect 1 + (m − 1)·ICC):"]
    for figure, estimate in report.release.items():
        parts = "; ".join(c.text() for c in estimate.clustering) if estimate else ""
        lines.append(f"  {figure.replace('_', ' ')}: {parts or 'nothing to cluster'}")
    return lines


def describe_width_plan(plan: AuditPlan | None, have: int, width: float) -> str:
    if plan is None:
        return "no labels and no calibration rates to plan from"
    basis = ("the judge–person disagreement in the audit" if plan.source == "audit"
             else "the calibration TPR/TNR (no audit labels yet)")
    if plan.design_effect > 1:
        basis += f", repeats' design effect {plan.design_effect:.2f}"
    if plan.labels is None:
        return (f"±{100 * width:g} points is out of reach with {plan.judged} judged attempts "
                f"(±{100 * plan.best_width:.1f} with every one labelled), from {basis}")
    more = max(0, plan.labels - have)
    return (f"{plan.labels} audit labels give ±{100 * width:g} points ({more} more than the "
            f"{have} so far), from {basis}")


def describe_class_plan(kind: str, plan: Any) -> str:
    if plan.more is None:
        return f"{kind}: cannot certify: {plan.why}"
    rate = "assuming full agreement (none yet)" if plan.assumed_rate else (
        f"at the observed agreement {plan.agreed}/{plan.items}")
    return f"{kind}: {plan.more} more ({plan.items} so far), {rate}"


def certificate_plan_lines(dimensions: Mapping[str, Any], thresholds: Mapping[str, Any]
                           ) -> list[str]:
    """How many more labels would certify the judge, per dimension and class: under the
    thresholds' rule and, when that is the point rule, under the stricter Wilson rule.
    `dimensions`: a certificate's DimensionReports; `thresholds`: the spec's thresholds."""
    lines = []
    for rule in dict.fromkeys([thresholds.get("rule", "point"), "wilson"]):
        lines.append(f"further labels to certify under the {rule} rule:")
        for dim, report in dimensions.items():
            c = report.confusion
            plan = certificate_plan(c.tp, c.fn, c.tn, c.fp, float(thresholds["tpr"]),
                                    float(thresholds["tnr"]),
                                    int(thresholds["min_items_per_class"]), rule)
            lines.append(f"  {dim}: " + describe_class_plan("pass items (TPR)", plan.pass_items))
            lines.append(f"  {dim}: " + describe_class_plan("fail items (TNR)", plan.fail_items))
    return lines
