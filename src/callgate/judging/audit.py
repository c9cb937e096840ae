"""Per-release audits: a person labels a uniform random sample of a run's judged attempts, and
the judged shares are estimated three ways (raw, Rogan–Gladen, PPI++; see estimates.py).

The sample is the first n of a seeded permutation of the run's judged attempts (sorted by case
and repeat), so it is uniform for any n and an audit grows by taking more of the same
permutation: the labels already given stay in the sample.
"""

from __future__ import annotations

import json
import math
import random
import secrets
from collections.abc import Callable, Container, Mapping, Sequence
from statistics import NormalDist
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, computed_field

from callgate.errors import CallgateError
from callgate.judging.calibration import dimension_confusion, item_payloads, read_set
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
)
from callgate.judging.judge import JudgeOutput, cache_key
from callgate.judging.labelling import (
    AnswersEnded,
    LabellingStopped,
    ask_labels,
    item_text,
    judged_items,
    judged_run,
)
from callgate.judging.planning import (
    AuditMoments,
    AuditPlan,
    audit_labels_for_width,
    certificate_plan,
    moments_from_rates,
)
from callgate.stats import Z95
from callgate.store.db import Store

Key = tuple[str, int]  # (case_id, repeat)
DETERMINISTIC_ARGUMENT_FAILURES = ("invalid_json", "schema_violation")


def sample_order(keys: Sequence[Key], seed: int) -> list[Key]:
    """A seeded uniform permutation of the attempts; an audit of n is its first n."""
    order = sorted(keys)
    random.Random(seed).shuffle(order)
    return order


def draw_audit(store: Store, run_id: int, n: int, seed: int | None = None
               ) -> tuple[int, list[dict[str, Any]]]:
    """Draw (or grow to n) the audit of a run. Returns the seed and the audit's items."""
    if n < 1:
        raise CallgateError("--n must be at least 1")
    _, rows = judged_run(store, run_id, then=": nothing to audit")
    keys = [(row["case_id"], row["repeat"]) for row in rows]
    existing = store.audit(run_id)
    if existing is not None:
        if seed is not None and seed != existing["seed"]:
            raise CallgateError(
                f"run {run_id} already has an audit drawn with seed {existing['seed']}; its "
                "labels belong to that sample. Leave out --seed to grow it.")
        seed = existing["seed"]
    elif seed is None:
        seed = secrets.randbelow(2**31)
    order = sample_order(keys, seed)[:n]
    store.save_audit(run_id, seed, len(keys),
                     [(position, case_id, repeat)
                      for position, (case_id, repeat) in enumerate(order)])
    return seed, store.audit_items(run_id)


def label_audit(store: Store, run_id: int, labeller: str, ask: Callable[..., str],
                show: Callable[[str], Any]) -> int:
    """Ask a person for a verdict on each audit item of the run not labelled yet (skipped ones
    again), in the sample's order; each label, or skip with its reason, is stored at once with
    the labeller and the time. Returns how many were labelled. The answers ending early raise
    AnswersEnded, the labels given so far kept."""
    items = store.audit_items(run_id)
    if not items:
        raise CallgateError(f"run {run_id} has no audit; draw one: callgate judge audit {run_id}")
    if not labeller.strip():
        raise CallgateError("--labeller must name who gives the labels")
    waiting = {(i["case_id"], i["repeat"]) for i in items if i["label_tool_choice"] is None}
    shown = {(row["case_id"], row["repeat"]): (row, item)
             for row, item in judged_items(store, run_id)
             if (row["case_id"], row["repeat"]) in waiting}
    labelled = 0
    for audit_item in items:
        key = (audit_item["case_id"], audit_item["repeat"])
        if key not in shown:
            continue
        _, item = shown[key]
        before = (f"\n(skipped before by {audit_item['labeller']}: "
                  f"{audit_item['skip_reason']})" if audit_item.get("skip_reason") else "")
        # The judge's verdict is not shown: the person's label must not lean on it.
        show(f"\n── audit item {audit_item['position'] + 1} of {len(items)}: {key[0]} "
             f"(repeat {key[1]}) ──\n{item_text(item)}{before}")
        try:
            labels = ask_labels(ask)
            if labels is None:
                reason = ask("why skip it (kept with the audit; a skip makes it incomplete)")
                store.save_audit_skip(run_id, key[0], key[1], reason.strip(), labeller)
                show(f"skipped audit item {audit_item['position'] + 1}: the audit is "
                     "incomplete until it is labelled")
                continue
        except LabellingStopped:
            break
        except AnswersEnded:
            raise AnswersEnded(
                f"the answers ended at audit item {audit_item['position'] + 1} of run {run_id}; "
                f"the {labelled} label(s) given are kept: callgate judge label --audit "
                f"{run_id} to go on") from None
        store.save_audit_label(run_id, key[0], key[1], *labels, labeller)
        labelled += 1
    return labelled


def record_audit_label(store: Store, run_id: int, case_id: str, repeat: int, tool_choice: str,
                       arguments: str, labeller: str) -> None:
    """One audit label given outside the terminal (`callgate serve`'s audit queue): stored as
    `label_audit` stores it. A CallgateError when the attempt is not in the run's audit."""
    if not labeller.strip():
        raise CallgateError("a labeller name is required")
    if not any((i["case_id"], i["repeat"]) == (case_id, repeat)
               for i in store.audit_items(run_id)):
        raise CallgateError(f"{case_id} (repeat {repeat}) is not in the audit of run {run_id}")
    store.save_audit_label(run_id, case_id, repeat, tool_choice, arguments, labeller)


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
    rogan_gladen: dict[str, Any] | None  # as `score` stored it (points)
    ppi: Estimate | None
    # The repeats of a case in this population (what an `agent` interval and plan widen by)
    clustering: Clustering | None = None


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
    tool_right = item["label_tool_choice"] == "pass"
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
               stored_rg: dict[str, Any] | None, seed: int, estimand: Estimand
               ) -> DimensionEstimates:
    pairs = [(labels[k], population[k]) for k in population if k in labels]
    cases = case_audits(population, labels, seed)
    return DimensionEstimates(
        judged=len(population), judged_passes=sum(population.values()), labels=len(pairs),
        disagreements=sum(y != f for y, f in pairs), table=AuditTable.of(pairs),
        raw=raw_share(sum(population.values()), len(population)),
        rogan_gladen=stored_rg if stored_rg and stored_rg.get("corrected") is not None else None,
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
    run = store.run(run_id) or {}
    stored_judged = (json.loads(run["scores"]).get("judged") or {}) if run.get("scores") else {}
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
                                  stored_judged.get("tool_choice"), audit["seed"], estimand),
        "arguments": _dimension(args_population, args_labels, stored_judged.get("arguments"),
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
    tags = store.case_tags_of(run["suite"]) if run.get("suite") else {}
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


# --------------------------------------------------------------------------- plans and text


def set_confusions(judge: Any, set_path: Any, store: Store | None
                   ) -> tuple[dict[str, Any], int, int]:
    """Per dimension, the confusion of the judge's cached verdicts against the labels on the
    test split of a calibration set; also how many test items the judge has not judged yet,
    and how many test items there are. Without a store, the judge has judged nothing."""
    items, _ = read_set(set_path)
    test = [i for i in items if i.split == "test"]
    keys = {i.id: cache_key(judge.fingerprint, *item_payloads(i)) for i in test}
    stored = store.judge_outputs(list(keys.values())) if store is not None else {}
    outputs = {i: JudgeOutput.model_validate_json(stored[k]) for i, k in keys.items()
               if k in stored}
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
        rg_text = (f"{rg['corrected']:.1f} [{rg['low']:.1f}–{rg['high']:.1f}]" if rg else "—")
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
        return ["repeats of a case need no correction for this release's attempts: the audit "
                "is a uniform sample of them and the checked ones are known"]
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
            "rogan_gladen": ({"estimator": "rogan_gladen", "pct": rg["corrected"],
                              "low": rg["low"], "high": rg["high"], "n": d.judged}
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
