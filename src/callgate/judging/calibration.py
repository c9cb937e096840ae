"""Calibrating a judge against hand-checked labels, and the certificate that results.

A calibration set is JSON Lines: a case (messages, tools, rubric), a response (content and tool
calls; or, for a multi-turn attempt, `turns`: the assistant turns with the `tool` messages
between them, as the judge sees them in runs), a person's label per dimension and a split
(`dev` for writing the prompt, `test` for certifying it). The judge is certified only when, on
the test split, every dimension reaches the spec's TPR and TNR thresholds with enough items of
each class. The certificate is bound to the judge's fingerprint: change one word of the prompt
and it no longer applies.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from callgate.errors import CallgateError, InputError, from_validation_error
from callgate.judging.judge import (
    JUDGE_ERROR,
    Complete,
    Dimension,
    Judge,
    JudgeOutput,
    JudgeOutputError,
    cache_key,
    judge_once,
)
from callgate.reading import json_lines_in, read_bytes, validate
from callgate.stats import wilson
from callgate.store.db import Store

CERT_FORMAT: Final = "callgate.certificate/1"


class CalibrationCase(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    messages: list[dict[str, Any]] = Field(min_length=1)
    tools: list[dict[str, Any]]
    rubric: str = Field(min_length=1)


class CalibrationCall(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str
    arguments: str


class CalibrationAssistantTurn(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    role: Literal["assistant"]
    content: str | None = None
    tool_calls: list[CalibrationCall] = Field(default_factory=list)


class CalibrationToolTurn(BaseModel):
    """The result one call got back: its JSON text, as the model was sent it."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    role: Literal["tool"]
    name: str
    content: str


CalibrationTurn = Annotated[CalibrationAssistantTurn | CalibrationToolTurn,
                            Field(discriminator="role")]


class CalibrationResponse(BaseModel):
    """One turn (`content`, `tool_calls`) or a multi-turn trajectory (`turns`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    content: str | None = None
    tool_calls: list[CalibrationCall] = Field(default_factory=list)
    turns: list[CalibrationTurn] | None = None

    @model_validator(mode="after")
    def _one_shape(self) -> CalibrationResponse:
        if self.turns is None:
            return self
        if self.content is not None or self.tool_calls:
            raise ValueError("a response has content and tool_calls, or turns, not both")
        if not self.turns or self.turns[0].role != "assistant" or (
            self.turns[-1].role != "assistant"
        ):
            raise ValueError("turns must begin and end with an assistant turn")
        return self

    def judged(self) -> dict[str, Any]:
        """What the judge sees, and what its verdict is cached under: the same document a run
        builds (pipeline.judge_payloads), so calibration measures the judge on what it reads."""
        if self.turns is None:
            return self.model_dump(exclude={"turns"})
        return {"turns": [turn.model_dump() for turn in self.turns]}


class Labels(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    tool_choice: Literal["pass", "fail"]
    arguments: Literal["pass", "fail", "n/a"]

    @model_validator(mode="after")
    def _arguments_need_the_tool(self) -> Labels:
        # Arguments are judged only on the right tool (as apply_judgement scores them).
        if self.tool_choice == "fail" and self.arguments == "pass":
            raise ValueError("arguments: cannot pass when tool_choice fails (use n/a or fail)")
        return self


class CalibrationItem(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    id: str = Field(min_length=1)
    split: Literal["dev", "test"]
    category: str = ""
    case: CalibrationCase
    response: CalibrationResponse
    label: Labels
    note: str = ""
    # Who gave the label: a person's name, or "assistant" for a program or model; "" unknown.
    labeller: str = ""
    labelled_at: str = ""  # ISO 8601, when known

    def line(self) -> str:
        """The item as a line of a calibration file (no `turns` key for a one-turn response)."""
        exclude = {"response": {"turns"}} if self.response.turns is None else None
        return json.dumps(self.model_dump(mode="json", exclude=exclude), ensure_ascii=False,
                          separators=(",", ":"))


NOT_A_PERSON: Final = ("", "assistant")  # labellers whose labels a person's label replaces


class JournalRecord(BaseModel):
    """A line a session appends to a set file (a withdrawal or an adjudication)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    def line(self) -> str:
        return json.dumps(self.model_dump(mode="json"), ensure_ascii=False,
                          separators=(",", ":"))


class Withdrawal(JournalRecord):
    """A line of a set file taking back `labeller`'s latest standing label (or adjudication)
    on item `withdraw`: what undo appends."""

    withdraw: str = Field(min_length=1)
    labeller: str = Field(min_length=1)
    at: str = ""


class Adjudication(JournalRecord):
    """A line of a set file settling item `adjudicate`, on which people disagree: the label
    that counts, who decided and why."""

    adjudicate: str = Field(min_length=1)
    label: Labels
    labeller: str = Field(min_length=1)
    why: str = Field(min_length=1)
    at: str = ""


Record = CalibrationItem | Adjudication


@dataclass(frozen=True)
class SetJournal:
    """A set file replayed: every item (with the label that counts; for an item people
    disagree on and no one adjudicated, its latest line), the people's standing labels and
    the standing adjudications in file order, the items still in conflict, the file's hash."""

    items: list[CalibrationItem]
    # (line number, record): the people's labels not withdrawn (labellers not in NOT_A_PERSON;
    # a relabelled one too, for its withdrawal brings it back) and the standing adjudication
    # of each settled item, in file order
    standing: list[tuple[int, Record]]
    conflicts: list[str]  # items whose people disagree and that no one adjudicated
    digest: str

    @property
    def people(self) -> list[CalibrationItem]:
        return [r for _, r in self.standing if isinstance(r, CalibrationItem)]

    @property
    def adjudications(self) -> list[Adjudication]:
        return [r for _, r in self.standing if isinstance(r, Adjudication)]

    def last_by(self, labeller: str) -> Record | None:
        """A person's standing record written last: what their undo takes back."""
        mine = [r for _, r in self.standing if r.labeller == labeller]
        return mine[-1] if mine else None

    def counted(self) -> list[CalibrationItem]:
        """The items calibration uses: every item but those still in conflict."""
        held = set(self.conflicts)
        return [item for item in self.items if item.id not in held]


def read_journal(path: Path | str) -> SetJournal:
    """Replay a set file, line by line. Item lines are labels: a later line for the same id
    (same case and response) by the same labeller replaces their earlier one. A withdrawal
    takes back that labeller's latest standing label or adjudication of the item (so an
    earlier label of theirs stands again); an adjudication settles it. The label that counts:
    the standing adjudication, else the people's latest labels when they agree (an item people
    disagree on counts for nothing until adjudicated), else the latest standing label of the
    file's own labeller (`assistant` or unnamed)."""
    source = Path(path)
    data = read_bytes(source, missing="calibration set not found")
    first: dict[str, CalibrationItem] = {}  # id -> its first line (its case and response)
    standing: dict[str, list[tuple[int, Record]]] = {}  # id -> (line, record) still standing
    for line_no, raw, _ in json_lines_in(source, data.splitlines(keepends=True)):
        if "withdraw" in raw:
            taken = validate(Withdrawal, raw, source, line=line_no)
            records = standing.get(taken.withdraw, [])
            mine = [pair for pair in records if pair[1].labeller == taken.labeller]
            if not mine:
                raise InputError(source, f"no standing label by {taken.labeller!r} on "
                                 f"{taken.withdraw!r} before this line", line=line_no,
                                 field="withdraw")
            records.remove(mine[-1])
            continue
        record: Record
        if "adjudicate" in raw:
            record = validate(Adjudication, raw, source, line=line_no)
            if record.adjudicate not in first:
                raise InputError(source, f"no item {record.adjudicate!r} before this line",
                                 line=line_no, field="adjudicate")
            standing[record.adjudicate].append((line_no, record))
            continue
        record = validate(CalibrationItem, raw, source, line=line_no)
        earlier = first.setdefault(record.id, record)
        if (earlier.case, earlier.response) != (record.case, record.response):
            raise InputError(source, f"duplicate item id {record.id!r}", line=line_no,
                             field="id")
        standing.setdefault(record.id, []).append((line_no, record))
    items, conflicts = [], []
    people: list[tuple[int, CalibrationItem]] = []
    settled: list[tuple[int, Adjudication]] = []
    for item_id in first:
        records = standing[item_id]
        labels = [(n, r) for n, r in records if isinstance(r, CalibrationItem)]
        decided = [(n, r) for n, r in records if isinstance(r, Adjudication)]
        by_people = [(n, r) for n, r in labels if r.labeller not in NOT_A_PERSON]
        people += by_people
        # each labeller's latest standing label (a relabel replaces their earlier one)
        current = {r.labeller: (n, r) for n, r in by_people}
        by_people = sorted(current.values(), key=_line)
        counted = by_people or labels
        if not counted:
            continue  # every label of the item was withdrawn
        latest = counted[-1][1]
        if decided:
            settled.append(decided[-1])
            verdict = decided[-1][1]
            latest = latest.model_copy(update={
                "label": verdict.label, "note": f"adjudicated by {verdict.labeller}: "
                                                f"{verdict.why}"})
        elif any(r.label != latest.label for _, r in by_people):
            conflicts.append(item_id)
        items.append(latest)
    standing_records: list[tuple[int, Record]] = [*people, *settled]
    return SetJournal(items=items, standing=sorted(standing_records, key=_line),
                      conflicts=conflicts, digest=hashlib.sha256(data).hexdigest())


def _line(pair: tuple[int, Any]) -> int:
    return pair[0]


def read_set(path: Path | str) -> tuple[list[CalibrationItem], str]:
    """Read a calibration set: the items calibration uses, each with the label that counts
    (`read_journal`; an item people disagree on and no one adjudicated is left out), and the
    SHA-256 of the file."""
    journal = read_journal(path)
    items = journal.counted()
    if not items:
        raise InputError(Path(path), "no items" if not journal.conflicts else
                         "no items that count: people disagree on every one")
    return items, journal.digest


# --------------------------------------------------------------------------- metrics


class Confusion(BaseModel):
    """Positive class = pass. tp: both pass; fn: person pass, judge not; and so on.
    judge_error: items a person graded that the judge answered with no verdict; they are in
    none of the four cells (a non-answer is never agreement, nor a rate's evidence)."""

    model_config = ConfigDict(frozen=True)
    tp: int = 0
    fn: int = 0
    tn: int = 0
    fp: int = 0
    judge_error: int = 0


class DimensionReport(BaseModel):
    model_config = ConfigDict(frozen=True)
    confusion: Confusion
    m1: int  # items a person labelled pass
    m0: int  # items a person labelled fail
    tpr: float | None
    tnr: float | None
    tpr_ci: tuple[float, float] | None
    tnr_ci: tuple[float, float] | None
    accuracy: float | None
    kappa: float | None
    passed: bool
    why_not: str = ""


class NoVerdict(BaseModel):
    """The judge's reply to an item was not a verdict (unreadable, refused, off-schema) even
    after the spec's retries: the outcome `judge_error`."""

    model_config = ConfigDict(frozen=True)
    reason: str


Outcome = JudgeOutput | NoVerdict


def rate_pair(dim: str, label: Labels, outcome: Outcome) -> tuple[str, str] | None:
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
        return person, outcome.tool_choice
    if outcome.tool_choice != "pass" or outcome.arguments == "n/a":
        return None
    return person, outcome.arguments


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


def cohen_kappa(c: Confusion) -> float | None:
    n = c.tp + c.fn + c.tn + c.fp
    if n == 0:
        return None
    observed = (c.tp + c.tn) / n
    expected = ((c.tp + c.fn) * (c.tp + c.fp) + (c.tn + c.fp) * (c.tn + c.fn)) / (n * n)
    # One class only on both sides: agreement beyond chance is undefined, not perfect.
    return None if expected == 1 else (observed - expected) / (1 - expected)


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


class Disagreement(BaseModel):
    model_config = ConfigDict(frozen=True)
    item: str
    split: str
    dimension: Dimension
    person: str
    judge: str
    reason: str


class Certificate(BaseModel):
    """The outcome of a calibration; a judge may score only with a certified one."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    format: Literal["callgate.certificate/1"] = CERT_FORMAT
    judge: str
    fingerprint: str
    model: str
    created_at: str
    set_path: str
    set_sha256: str
    items: int
    test_items: int
    thresholds: dict[str, float | str]
    dimensions: dict[str, DimensionReport]
    certified: bool
    judge_errors: int = 0  # items of the whole set the judge answered with no verdict
    why_not: str = ""  # why it is not certified (void), in words
    # The labels it was earned on, id -> "split tool_choice/arguments": what changed, if the
    # set changes (see check_labels).
    labels: dict[str, str] = Field(default_factory=dict)
    # Test items whose labels a person gave or confirmed (labeller not "assistant" or unknown).
    person_confirmed: int | None = None

    def to_json(self) -> str:
        return json.dumps(self.model_dump(mode="json"), indent=2, sort_keys=True) + "\n"


def label_text(item: CalibrationItem) -> str:
    return f"{item.split} {item.label.tool_choice}/{item.label.arguments}"


def evaluate(judge: Judge, items: Sequence[CalibrationItem],
             outputs: Mapping[str, Outcome], set_path: str, set_sha256: str
             ) -> tuple[Certificate, list[Disagreement]]:
    """Pure: compare the judge's outputs with the labels and decide certification."""
    thresholds = judge.spec.thresholds
    test = [item for item in items if item.split == "test"]
    reports: dict[str, DimensionReport] = {}
    for dim in judge.spec.dimensions:
        reports[dim] = dimension_report(dimension_confusion(dim, test, outputs), thresholds.tpr,
                                        thresholds.tnr, thresholds.min_items_per_class,
                                        thresholds.rule)
    confirmed = sum(person_confirmed(i) for i in test)
    provenance_ok = bool(test) and confirmed / len(test) >= thresholds.min_person_confirmed
    disagreements = []
    for item in items:
        out = outputs[item.id]
        for dim in judge.spec.dimensions:
            person = getattr(item.label, dim)
            judged = JUDGE_ERROR if isinstance(out, NoVerdict) else getattr(out, dim)
            if person != "n/a" and (judged == JUDGE_ERROR or (person == "pass") != (
                    judged == "pass")):
                disagreements.append(Disagreement(item=item.id, split=item.split, dimension=dim,
                                                  person=person, judge=judged,
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


def person_confirmed(item: CalibrationItem) -> bool:
    """Whether a person gave or confirmed the item's label (not an assistant, not unknown)."""
    return item.labeller.strip() not in ("", "assistant")


async def run_judge_on_items(
    judge: Judge, items: Sequence[CalibrationItem], complete: Complete, concurrency: int = 8,
    cached: Mapping[str, JudgeOutput] | None = None,
    on_output: Callable[[CalibrationItem, JudgeOutput], None] | None = None,
) -> dict[str, Outcome]:
    """Judge every item not in `cached`, at most `concurrency` at a time; `on_output` sees each
    new verdict as it arrives (to store it at once). A reply that is not a verdict, after the
    spec's retries, is a NoVerdict: not cached (the next calibration asks again), never read
    as a verdict."""
    outputs: dict[str, Outcome] = dict(cached or {})
    gate = asyncio.Semaphore(concurrency)

    async def one(item: CalibrationItem) -> None:
        async with gate:
            try:
                output = await judge_once(
                    judge, complete, tools=item.case.tools, conversation=item.case.messages,
                    rubric=item.case.rubric, response=item.response.judged())
            except JudgeOutputError as exc:
                outputs[item.id] = NoVerdict(reason=f"no verdict: {exc}")
                return
        outputs[item.id] = output
        if on_output is not None:
            on_output(item, output)

    await asyncio.gather(*(one(item) for item in items if item.id not in outputs))
    return outputs


def item_payloads(item: CalibrationItem) -> tuple[dict[str, Any], dict[str, Any]]:
    """The (case, response) documents a judge verdict is cached under."""
    return item.case.model_dump(), item.response.judged()


# --------------------------------------------------------------------------- certificates


def read_certificate(path: Path) -> Certificate | None:
    if not path.is_file():
        return None
    try:
        return Certificate.model_validate_json(path.read_text(encoding="utf-8"))
    except ValidationError as exc:
        raise from_validation_error(path, None, exc) from None


def void_reason(certificate: Certificate) -> str:
    """Why a calibration did not certify, in words (older certificates: from the dimensions)."""
    return certificate.why_not or "; ".join(
        f"{dim}: {report.why_not}" for dim, report in certificate.dimensions.items()
        if not report.passed) or "it did not meet the thresholds"


def _newest(certificates: Iterable[Certificate]) -> Certificate:
    """The newest calibration; on a tie, a failed one (it voids, never the reverse)."""
    return max(certificates, key=lambda c: (datetime.fromisoformat(c.created_at),
                                            not c.certified))


def require_certificate(judge: Judge, store: Store | None = None) -> Certificate:
    """The certificate for this exact judge, or a clear refusal. The newest calibration of the
    fingerprint (in the certificate file or the store) decides: a failed one voids an earlier
    success. The certificate must have been earned under the spec's current thresholds
    (thresholds are not in the fingerprint: they decide certification, not verdicts) and on the
    labels the set holds now (check_labels)."""
    thresholds = judge.spec.thresholds.model_dump()
    # Certificates made before these fields existed were earned under their defaults.
    defaults = {"rule": "point", "min_person_confirmed": 0.0}
    stored_json = store.certificate(judge.fingerprint) if store is not None else None
    stored = Certificate.model_validate_json(stored_json) if stored_json else None
    found = read_certificate(judge.certificate_path)
    mine = [c for c in (found, stored) if c is not None and c.fingerprint == judge.fingerprint]
    again = (f"Calibrate it again: callgate judge calibrate {judge.spec_path} --set FILE (or "
             "pass --uncalibrated to score anyway; the gate will then be inconclusive)")
    name = f"judge {judge.spec.name} (fingerprint {judge.fingerprint[:12]})"
    if mine:
        newest = _newest(mine)
        if not newest.certified:
            raise CallgateError(
                f"{name}: certificate void: its newest calibration ({newest.created_at}, on "
                f"{newest.set_path}) failed: {void_reason(newest)}. {again}")
        if {**defaults, **newest.thresholds} != thresholds:
            raise CallgateError(
                f"{name} has no certificate. Its certificate was earned under other thresholds "
                f"({newest.thresholds}) than the spec sets now ({thresholds}). {again}")
        check_labels(newest, judge, store)
        return newest
    detail = ""
    if found is not None:
        detail = (f" {judge.certificate_path} is for fingerprint {found.fingerprint[:12]}, "
                  "not this one: the prompt, model or parameters changed since it was made.")
    raise CallgateError(
        f"{name} has no certificate.{detail} Calibrate it first: callgate judge calibrate "
        f"{judge.spec_path} --set FILE (or pass --uncalibrated to score anyway; the gate will "
        "then be inconclusive)")


def _set_file(certificate: Certificate, judge: Judge) -> Path | None:
    """The set a certificate was earned on: its path as given (from the working directory),
    else beside the spec or one folder up (judges/ and calibration/ in one project)."""
    recorded = Path(certificate.set_path)
    places = [recorded] if recorded.is_absolute() else [
        recorded, judge.spec_path.parent / recorded, judge.spec_path.parent.parent / recorded]
    return next((place for place in places if place.is_file()), None)


def label_changes(before: Mapping[str, str], now: Mapping[str, str], limit: int = 5) -> str:
    """What changed between two {item id: "split tool/arguments"} maps, in words."""
    changed = [i for i in before if i in now and before[i] != now[i]]
    added = [i for i in now if i not in before]
    removed = [i for i in before if i not in now]
    parts = []
    if changed:
        shown = ", ".join(f"{i} {before[i]} -> {now[i]}" for i in changed[:limit])
        more = f", and {len(changed) - limit} more" if len(changed) > limit else ""
        parts.append(f"{len(changed)} label(s) changed ({shown}{more})")
    if added:
        parts.append(f"{len(added)} item(s) added ({', '.join(added[:limit])}"
                     f"{', ...' if len(added) > limit else ''})")
    if removed:
        parts.append(f"{len(removed)} item(s) removed ({', '.join(removed[:limit])}"
                     f"{', ...' if len(removed) > limit else ''})")
    return "; ".join(parts)


def check_labels(certificate: Certificate, judge: Judge, store: Store | None) -> None:
    """Refuse a certificate whose set no longer holds the labels it was earned on: the set
    file's SHA-256 must match; without the file, the labels stored for the set must."""
    where = f"judge {judge.spec.name}: its certificate was earned on {certificate.set_path}"
    again = (f"Calibrate it again on the set as it is now: callgate judge calibrate "
             f"{judge.spec_path} --set {certificate.set_path} (or pass --uncalibrated)")
    path = _set_file(certificate, judge)
    if path is not None:
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        if digest == certificate.set_sha256:
            return
        try:
            items, _ = read_set(path)
            what = label_changes(certificate.labels,
                                 {item.id: label_text(item) for item in items})
        except CallgateError as exc:
            what = f"and it cannot be read now ({exc})"
        if not certificate.labels:
            what = "(the certificate predates per-item labels, so which ones is unknown)"
        raise CallgateError(
            f"{where} (SHA-256 {certificate.set_sha256[:12]}), which has changed since "
            f"(SHA-256 {digest[:12]} now): "
            f"{what or 'no label changed, but the file did (notes, cases or order)'}. {again}")
    stored = store.calibration_labels(Path(certificate.set_path).name) if store else {}
    if not stored:
        raise CallgateError(
            f"{where}, which is neither at that path nor in the store, so its labels cannot "
            f"be checked. Run from the folder you calibrated in, or {again[0].lower()}"
            f"{again[1:]}")
    if certificate.labels and stored != certificate.labels:
        raise CallgateError(
            f"{where}; the labels stored for it in {store.path if store else 'the store'} have "
            "changed since: "
            f"{label_changes(certificate.labels, stored)}. {again}")


def dimension_rates(certificate: Certificate, dim: str) -> tuple[float, float, int, int] | None:
    report = certificate.dimensions.get(dim)
    if report is None or report.tpr is None or report.tnr is None:
        return None
    return report.tpr, report.tnr, report.m1, report.m0


async def calibrate(judge: Judge, set_path: Path | str, store: Store, complete: Complete,
                    concurrency: int = 8) -> tuple[Certificate, list[Disagreement], int]:
    """Load the set into the store, judge every item (cached by fingerprint + item), evaluate,
    store the certificate, and write it beside the spec when it certifies.

    Args:
        judge: the judge (`load_judge`).
        set_path: the calibration set, JSON Lines of labelled items (`read_set`).
        store: where items, the judge's outputs and the certificate are kept.
        complete: the judge's model call, `JudgeModel(judge, os.environ).complete`.
        concurrency: judge calls at once.

    Returns the certificate, the disagreements and how many items were judged afresh."""
    items, digest = read_set(set_path)
    keys = {i.id: cache_key(judge.fingerprint, *item_payloads(i)) for i in items}
    stored = store.judge_outputs(list(keys.values()))
    cached = {item_id: JudgeOutput.model_validate_json(stored[key])
              for item_id, key in keys.items() if key in stored}

    def save(item: CalibrationItem, output: JudgeOutput) -> None:
        store.save_judge_outputs([(keys[item.id], judge.fingerprint, output.model_dump_json())])

    outputs = await run_judge_on_items(judge, items, complete, concurrency, cached, save)
    certificate, disagreements = evaluate(judge, items, outputs, str(set_path), digest)
    # The items and the certificate they gave, together: a calibration that fails before this
    # (the judge's outputs so far stay cached, so a new run resumes) leaves neither behind.
    with store.atomic():
        store.save_calibration_items(Path(set_path).name, [
            (i.id, i.split, i.label.tool_choice, i.label.arguments, i.line())
            for i in items
        ])
        store.save_certificate(judge.fingerprint, judge.spec.name, certificate.certified,
                               certificate.to_json())
    # The newest calibration decides: a failure replaces a certificate file beside the spec,
    # so a committed certificate cannot outlive the calibration that revoked it.
    if certificate.certified or judge.certificate_path.exists():
        judge.certificate_path.write_text(certificate.to_json(), encoding="utf-8")
    return certificate, disagreements, len(items) - len(cached)
