"""Calibrating a judge against hand-checked labels: the judge's verdicts on a calibration
set's items, their confusion with the person's labels per dimension, and the certificate.

The judge is certified only when, on the test split, every dimension reaches the spec's TPR and
TNR thresholds with enough items of each class. The set file is read by `calibration_set`; the
certificate and the check that a judge may score are in `certificates`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from callgate.errors import InputError
from callgate.judging.calibration_set import (
    BehaviourLabels,
    CalibrationItem,
    Labels,
    item_payloads,
    item_row,
    label_text,
    person_confirmed,
    read_set,
)
from callgate.judging.certificates import (
    Certificate,
    Confusion,
    DimensionReport,
    Disagreement,
)
from callgate.judging.dimensions import ANSWER_KINDS, BEHAVIOUR_DIMENSIONS
from callgate.judging.judge import (
    JUDGE_ERROR,
    Complete,
    Judge,
    JudgeOutput,
    JudgeOutputError,
)
from callgate.judging.step import JudgeStep
from callgate.stats import wilson
from callgate.store.db import Store


class NoVerdict(BaseModel):
    """The judge's reply to an item was not a verdict (unreadable, refused, off-schema) even
    after the spec's retries: the outcome `judge_error`."""

    model_config = ConfigDict(frozen=True)
    reason: str


Outcome = JudgeOutput | NoVerdict


def behaviour_pair(dim: str, label: BehaviourLabels, outcome: Outcome
                   ) -> tuple[str, str] | None:
    """(person, judge) on a dimension of a judge beyond the call: `claim_support` as labelled,
    `answer_kind:KIND` one kind against the others (pass: that kind), so each kind has its own
    TPR (recall) and TNR. None when the item labels another dimension."""
    base, _, kind = dim.partition(":")
    person = getattr(label, base)
    if person is None:
        return None
    judged = JUDGE_ERROR if isinstance(outcome, NoVerdict) else str(getattr(outcome, base))
    if not kind:
        return person, judged
    as_kind = "pass" if person == kind else "fail"
    if judged == JUDGE_ERROR:
        return as_kind, judged
    return as_kind, "pass" if judged == kind else "fail"


def report_dimensions(dimensions: Sequence[str]) -> list[str]:
    """The dimensions a certificate reports: answer_kind once per kind, one against the rest."""
    out: list[str] = []
    for dim in dimensions:
        out += [f"{dim}:{kind}" for kind in ANSWER_KINDS] if dim == "answer_kind" else [dim]
    return out


def rate_pair(dim: str, label: Labels | BehaviourLabels, outcome: Outcome
              ) -> tuple[str, str] | None:
    """(person, judge) for one item in the population a dimension's rates are measured on, or
    None when the item is not in it. The population is the one the rates are applied to in
    scoring, selected by what the judge said (the only thing scoring can see):

    - tool_choice: every item.
    - arguments: the items whose tool choice the judge passed and whose arguments it graded
      pass or fail, as in scoring (pipeline.JudgedTally). There the person's verdict is
      `pass` when they passed both tool and arguments, `fail` when they failed either (the
      arguments of a wrong tool are not right); an item with no arguments to grade (a person's
      n/a on a passed tool choice) says nothing about the rates.

    A judge error is in every population whose person label is defined: it is counted, never
    placed in a cell (the judge did not say pass or fail)."""
    if isinstance(label, BehaviourLabels):
        return behaviour_pair(dim, label, outcome)
    if dim.partition(":")[0] in BEHAVIOUR_DIMENSIONS:
        return None
    person: str
    if dim == "tool_choice":
        person = label.tool_choice
    else:
        person = "fail" if label.tool_choice == "fail" else label.arguments
        if person == "n/a":
            return None
    if isinstance(outcome, NoVerdict):
        return person, JUDGE_ERROR
    if dim == "tool_choice":
        return person, str(outcome.tool_choice)
    if outcome.tool_choice != "pass" or outcome.arguments == "n/a":
        return None
    return person, str(outcome.arguments)


def check_fit(judge: Judge, items: Sequence[CalibrationItem], path: Path) -> None:
    """Every item labels what the judge decides (InputError naming the first that does not):
    a set of another judge's labels says nothing of this one's rates."""
    behaviour = [dim for dim in judge.spec.dimensions if dim in BEHAVIOUR_DIMENSIONS]
    want = behaviour[0] if behaviour else None
    for item in items:
        if item.label.behaviour != want:
            given = item.label.behaviour or "tool_choice/arguments"
            raise InputError(path, f"item {item.id!r} labels {given}, but judge "
                             f"{judge.spec.name} decides {want or 'tool_choice/arguments'}",
                             field="label")


def dimension_confusion(dim: str, test: Iterable[CalibrationItem],
                        outputs: Mapping[str, Outcome]) -> Confusion:
    """A dimension's confusion on the test items the judge has an outcome for, over the
    population its rates are measured on (rate_pair): what a certificate reports, and what
    `judge plan SPEC --set` plans from."""
    return confusion(pair for i in test if i.id in outputs
                     and (pair := rate_pair(dim, i.label, outputs[i.id])))


def confusion(pairs: Iterable[tuple[str, str]]) -> Confusion:
    """(person's label, judge's label) pairs; a person's n/a is not counted, a judge's n/a
    counts as not passing, a judge error only as a judge error."""
    counts = {"tp": 0, "fn": 0, "tn": 0, "fp": 0, "judge_error": 0}
    for human, judged in pairs:
        if human == "n/a":
            continue
        if judged == JUDGE_ERROR:
            counts["judge_error"] += 1
        elif human == "pass":
            counts["tp" if judged == "pass" else "fn"] += 1
        else:
            counts["fp" if judged == "pass" else "tn"] += 1
    return Confusion(**counts)


# Below this many items rated by both sides, Cohen's kappa is not given: on 1 item it is 0 or
# undefined, and on a handful its standard error is about as large as the scale.
MIN_KAPPA_ITEMS = 10


def kappa(pairs: Sequence[tuple[str, str]]) -> float | None:
    """Cohen's kappa between two raters over categorical labels (n/a is a category); None
    below MIN_KAPPA_ITEMS pairs, and when both use one category only (agreement beyond chance
    is undefined then, not perfect)."""
    n = len(pairs)
    if n < MIN_KAPPA_ITEMS:
        return None
    observed = sum(a == b for a, b in pairs) / n
    first, second = Counter(a for a, _ in pairs), Counter(b for _, b in pairs)
    expected = sum(first[k] * second[k] for k in first) / (n * n)
    return None if expected == 1 else (observed - expected) / (1 - expected)


def cohen_kappa(c: Confusion) -> float | None:
    """The judge's kappa against the person's labels (pass / fail; judge errors apart)."""
    return kappa([("pass", "pass")] * c.tp + [("pass", "fail")] * c.fn
                 + [("fail", "fail")] * c.tn + [("fail", "pass")] * c.fp)


def kappa_text(value: float | None, items: int, figure: str = "{:.2f}") -> str:
    """How a kappa is shown: the figure, or why there is none."""
    if items < MIN_KAPPA_ITEMS:
        return f"not enough items ({items}; needs {MIN_KAPPA_ITEMS})"
    return "undefined (one label only)" if value is None else figure.format(value)


def dimension_report(c: Confusion, tpr_min: float, tnr_min: float, min_items: int,
                     rule: str = "point") -> DimensionReport:
    m1, m0 = c.tp + c.fn, c.tn + c.fp
    tpr = c.tp / m1 if m1 else None
    tnr = c.tn / m0 if m0 else None
    n = m1 + m0
    problems = []
    if m1 < min_items or m0 < min_items:
        problems.append(f"needs {min_items} items of each class, has {m1} pass and {m0} fail")
    if tpr is None or tpr < tpr_min:
        problems.append(f"TPR {tpr if tpr is None else round(tpr, 3)} below {tpr_min}")
    if tnr is None or tnr < tnr_min:
        problems.append(f"TNR {tnr if tnr is None else round(tnr, 3)} below {tnr_min}")
    if rule == "wilson":
        for name, interval, minimum in (("TPR", wilson(c.tp, m1), tpr_min),
                                        ("TNR", wilson(c.tn, m0), tnr_min)):
            if interval is not None and interval[0] < minimum:
                problems.append(f"{name} Wilson lower bound {interval[0]:.3f} below {minimum}")
    return DimensionReport(
        confusion=c, m1=m1, m0=m0, tpr=tpr, tnr=tnr, tpr_ci=wilson(c.tp, m1),
        tnr_ci=wilson(c.tn, m0), accuracy=(c.tp + c.tn) / n if n else None,
        kappa=cohen_kappa(c), passed=not problems, why_not="; ".join(problems),
    )


def evaluate(judge: Judge, items: Sequence[CalibrationItem],
             outputs: Mapping[str, Outcome], set_path: str, set_sha256: str
             ) -> tuple[Certificate, list[Disagreement]]:
    """Pure: compare the judge's outputs with the labels and decide certification."""
    thresholds = judge.spec.thresholds
    test = [item for item in items if item.split == "test"]
    reports: dict[str, DimensionReport] = {}
    for dim in report_dimensions(judge.spec.dimensions):
        reports[dim] = dimension_report(dimension_confusion(dim, test, outputs), thresholds.tpr,
                                        thresholds.tnr, thresholds.min_items_per_class,
                                        thresholds.rule)
    confirmed = sum(person_confirmed(i) for i in test)
    provenance_ok = bool(test) and confirmed / len(test) >= thresholds.min_person_confirmed
    disagreements = []
    for item in items:
        out = outputs[item.id]
        for dim in judge.spec.dimensions:
            person = getattr(item.label, dim, None)
            judged = JUDGE_ERROR if isinstance(out, NoVerdict) else getattr(out, dim)
            if dim in BEHAVIOUR_DIMENSIONS:
                wrong = person is not None and person != judged
            else:
                wrong = person != "n/a" and (judged == JUDGE_ERROR or (person == "pass") != (
                    judged == "pass"))
            if wrong:
                disagreements.append(Disagreement(item=item.id, split=item.split, dimension=dim,
                                                  person=str(person), judge=str(judged),
                                                  reason=out.reason))
    errors = sum(isinstance(outputs[item.id], NoVerdict) for item in items)
    problems = [f"{dim}: {r.why_not}" for dim, r in reports.items() if not r.passed]
    if not provenance_ok:
        problems.append(f"{confirmed} of {len(test)} test labels were confirmed by a person, "
                        f"below the {thresholds.min_person_confirmed:.0%} required")
    if errors > thresholds.max_judge_errors * len(items):
        problems.append(f"{errors} of {len(items)} replies were not a verdict (judge errors), "
                        f"above the {thresholds.max_judge_errors:.0%} allowed")
    certificate = Certificate(
        judge=judge.spec.name, fingerprint=judge.fingerprint, model=judge.spec.model,
        created_at=datetime.now(UTC).isoformat(timespec="microseconds"), set_path=set_path,
        set_sha256=set_sha256, items=len(items), test_items=len(test),
        thresholds=thresholds.model_dump(), dimensions=reports,
        certified=bool(reports) and not problems, judge_errors=errors,
        why_not="; ".join(problems) or ("" if reports else "no dimension to certify"),
        labels={item.id: label_text(item) for item in items}, person_confirmed=confirmed,
    )
    return certificate, disagreements


async def run_judge_on_items(step: JudgeStep, store: Store, items: Sequence[CalibrationItem]
                             ) -> dict[str, Outcome]:
    """The judge's outcome on every item, through its cache in the store (`judge_all`: a new
    verdict is kept as it arrives). A reply that is not a verdict, after the spec's retries,
    is a NoVerdict: not cached (the next calibration asks again), never read as a verdict. A
    judge that cannot be reached stops calibration (JudgeCallError)."""
    done: dict[str, JudgeOutput | JudgeOutputError | str] = {}
    await step.judge_all(store, {item.id: item_payloads(item) for item in items}, done,
                         call_errors="raise")
    outputs: dict[str, Outcome] = {}
    for item_id, outcome in done.items():
        assert not isinstance(outcome, str)  # call errors raise
        outputs[item_id] = (NoVerdict(reason=f"no verdict: {outcome}")
                            if isinstance(outcome, JudgeOutputError) else outcome)
    return outputs


async def calibrate(judge: Judge, set_path: Path | str, store: Store, complete: Complete,
                    concurrency: int | None = None) -> tuple[Certificate, list[Disagreement], int]:
    """Load the set into the store, judge every item (cached by fingerprint + item), evaluate,
    store the certificate, and write it beside the spec when it certifies.

    Args:
        judge: the judge (`load_judge`).
        set_path: the calibration set, JSON Lines of labelled items (`read_set`).
        store: where items, the judge's outputs and the certificate are kept.
        complete: the judge's model call, `JudgeModel(judge, os.environ).complete`.
        concurrency: judge calls at once, exactly; None: as many as the pacer of the judge's
            endpoint lets through (`JudgeModel` paces its own calls).

    Returns the certificate, the disagreements and how many items were judged afresh."""
    items, digest = read_set(set_path)
    check_fit(judge, items, Path(set_path))
    step = JudgeStep(judge, complete, certificate=None, concurrency=concurrency)
    outputs = await run_judge_on_items(step, store, items)
    certificate, disagreements = evaluate(judge, items, outputs, str(set_path), digest)
    # The items and the certificate they gave, together: a calibration that fails before this
    # (the judge's outputs so far stay cached, so a new run resumes) leaves neither behind.
    with store.atomic():
        store.save_calibration_items(Path(set_path).name, [item_row(i) for i in items])
        store.save_certificate(judge.fingerprint, judge.spec.name, certificate.certified,
                               certificate.to_json())
    # The newest calibration decides: a failure replaces a certificate file beside the spec,
    # so a committed certificate cannot outlive the calibration that revoked it.
    if certificate.certified or judge.certificate_path.exists():
        judge.certificate_path.write_text(certificate.to_json(), encoding="utf-8")
    return certificate, disagreements, len(items) - step.cache_hits
