"""Calibration sessions: the labelling queue, progress, agreement between people, the review of
where the judge and the person differ, and certificates. Reads and writes go through the store
and `callgate.judging.calibration` (the same code path as `callgate judge label`)."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NotRequired, TypedDict

from callgate.judging.calibration import kappa
from callgate.judging.calibration_set import CalibrationItem, item_payloads, read_journal
from callgate.judging.certificates import Certificate
from callgate.judging.step import JudgeCache
from callgate.store.db import Store

DIMENSIONS = ("tool_choice", "arguments")
Row = Mapping[str, Any]  # a person_labels or adjudications row as the store reads it


# The views are dicts (the pages and /api/ read them as they are), typed by their keys so that
# a key renamed here and not where it is read is a type error.


class QueuePlace(TypedDict):
    """Where an item stands in a labeller's queue (`queue_place`)."""

    position: int
    total: int
    todo: int
    prev_id: str | None
    next_id: str | None
    labeller: str
    mine: Row | None  # this person's latest label on it
    others: list[Row]  # the others' labels, once this person has given theirs


class Tally(TypedDict):
    labelled: int
    total: int


class Agreement(TypedDict):
    """Cohen's kappa between two people per dimension, over the items both labelled."""

    labellers: list[str]
    items: int
    tool_choice: float | None
    arguments: float | None


class ConflictLabel(TypedDict):
    tool_choice: str
    arguments: str
    note: str
    at: str


class Conflict(TypedDict):
    """An item people label differently, not adjudicated yet: each person's label."""

    item_id: str
    labels: dict[str, ConflictLabel]


class AdjudicationShown(TypedDict):
    item_id: str
    labeller: str
    tool_choice: str
    arguments: str
    why: str
    created_at: str


class Disagreement(TypedDict):
    """An item where a certificate's judge and the item's label differ (`disagreements`)."""

    item_id: str
    split: str
    dimensions: list[str]
    person: dict[str, Any]  # the item's label (Labels as JSON)
    note: str
    judge: dict[str, str | None]  # tool_choice, arguments as the judge gave them
    reason: str


class ItemView(TypedDict):
    """What the labelling page shows of an item (`item_view`): the case and the response as
    the conversation's open JSON; category, label and note only once revealed."""

    id: str
    split: str
    messages: list[dict[str, Any]]
    rubric: Any
    turns: list[dict[str, Any]]
    tools: list[Any]
    category: NotRequired[str | None]
    label: NotRequired[dict[str, Any]]
    note: NotRequired[str]


class Progress(TypedDict):
    """A set's progress (`progress`); the progress page adds what the session plan and the
    newest calibration say is still to do."""

    total: int
    labelled: int
    labels: int
    labellers: list[str]
    categories: dict[str, Tally]
    per_dimension: dict[str, dict[str, int]]
    agreement: list[Agreement]
    conflicts: list[Conflict]
    adjudications: list[AdjudicationShown]
    still_to_label: NotRequired[dict[str, list[str]]]
    plan: NotRequired[dict[str, Any] | None]
    labels_needed: NotRequired[dict[str, Any] | None]


def latest_labels(rows: Sequence[Mapping[str, Any]]) -> dict[tuple[str, str], Mapping[str, Any]]:
    """(item_id, labeller) -> that person's latest label row."""
    found: dict[tuple[str, str], Mapping[str, Any]] = {}
    for row in rows:
        found[(row["item_id"], row["labeller"])] = row
    return found


def queue_place(order: Sequence[str], todo: int, current: str,
                rows: Sequence[Mapping[str, Any]], labeller: str) -> QueuePlace:
    """Where `current` stands in a labeller's queue, their own latest label (`mine`), and the
    others' labels, shown only once this person has given theirs (labelling is blind)."""
    position = order.index(current)
    latest = latest_labels(rows)
    mine = latest.get((current, labeller)) if labeller else None
    return {"position": position, "total": len(order), "todo": todo,
            "prev_id": order[position - 1] if position > 0 else None,
            "next_id": order[position + 1] if position + 1 < len(order) else None,
            "labeller": labeller, "mine": mine,
            "others": [r for (i, _), r in sorted(latest.items()) if i == current]
            if mine else []}


def labelled_by(rows: Sequence[Mapping[str, Any]]) -> dict[str, set[str]]:
    """item_id -> the people with a standing label on it."""
    found: dict[str, set[str]] = {}
    for row in rows:
        found.setdefault(row["item_id"], set()).add(row["labeller"])
    return found


def progress(items: Sequence[CalibrationItem], rows: Sequence[Mapping[str, Any]],
             adjudications: Sequence[Mapping[str, Any]] = ()) -> Progress:
    """Labelled / total, per category and per dimension; agreement between people; the
    items they disagree on that no one has adjudicated yet, and the adjudications."""
    settled = {row["item_id"] for row in adjudications}
    latest = latest_labels(rows)
    by_item: dict[str, dict[str, Mapping[str, Any]]] = {}
    for (item_id, labeller), row in latest.items():
        by_item.setdefault(item_id, {})[labeller] = row
    labelled = {i.id for i in items if i.id in by_item}
    categories: dict[str, list[int]] = {}
    for item in items:
        tally = categories.setdefault(item.category or "(none)", [0, 0])
        tally[1] += 1
        tally[0] += item.id in labelled
    per_dimension = {dim: dict(Counter(row[dim] for row in latest.values()))
                     for dim in DIMENSIONS}
    labellers = sorted({labeller for _, labeller in latest})
    agreement: list[Agreement] = []
    conflicts: list[Conflict] = []
    for i, first in enumerate(labellers):
        for second in labellers[i + 1:]:
            both = [item_id for item_id, people in by_item.items()
                    if first in people and second in people]
            pairs = {dim: [(by_item[x][first][dim], by_item[x][second][dim]) for x in both]
                     for dim in DIMENSIONS}
            agreement.append({"labellers": [first, second], "items": len(both),
                              "tool_choice": kappa(pairs["tool_choice"]),
                              "arguments": kappa(pairs["arguments"])})
    for item_id, people in sorted(by_item.items()):
        if item_id not in settled and len(people) > 1 and len({(r["tool_choice"], r["arguments"])
                                    for r in people.values()}) > 1:
            conflicts.append({"item_id": item_id, "labels": {
                name: {"tool_choice": r["tool_choice"], "arguments": r["arguments"],
                       "note": r["note"], "at": r["created_at"]}
                for name, r in sorted(people.items())}})
    return {
        "total": len(items), "labelled": len(labelled), "labels": len(rows),
        "labellers": labellers,
        "categories": {k: {"labelled": v[0], "total": v[1]} for k, v in sorted(categories.items())},
        "per_dimension": per_dimension, "agreement": agreement, "conflicts": conflicts,
        "adjudications": [{"item_id": row["item_id"], "labeller": row["labeller"],
                           "tool_choice": row["tool_choice"], "arguments": row["arguments"],
                           "why": row["why"], "created_at": row["created_at"]}
                          for row in adjudications],
    }


def certificates_for_set(store: Store, set_name: str) -> list[Certificate]:
    found = []
    for row in store.certificate_rows():
        certificate = Certificate.model_validate_json(row["body"])
        if Path(certificate.set_path).name == set_name:
            found.append(certificate)
    return found


def disagreements(store: Store, items: Sequence[CalibrationItem], certificate: Certificate
                  ) -> list[Disagreement]:
    """Items where the judge of the certificate and the item's current label differ, with the
    judge's reason beside the person's note. Outputs come from the judge cache (the verdicts
    `judge calibrate` stored), keyed as calibration keys them."""
    cache = JudgeCache(store, certificate.fingerprint)
    keys = {i.id: cache.key(item_payloads(i)) for i in items}
    outputs = cache.get(list(keys.values()))
    out: list[Disagreement] = []
    for item in items:
        judged = outputs.get(keys[item.id])
        if judged is None:
            continue
        differ = [dim for dim in DIMENSIONS
                  if getattr(item.label, dim) != "n/a"
                  and (getattr(item.label, dim) == "pass") != (getattr(judged, dim) == "pass")]
        if differ:
            out.append({"item_id": item.id, "split": item.split, "dimensions": differ,
                        "person": item.label.model_dump(), "note": item.note,
                        "judge": {"tool_choice": judged.tool_choice,
                                  "arguments": judged.arguments},
                        "reason": judged.reason})
    return out


def certificate_status(certificate: Certificate, certified_row: bool,
                       set_path: Path | None) -> tuple[str, list[str]]:
    """("certified" or "void", why) for a stored certificate."""
    why = [f"{dim}: {report.why_not}" for dim, report in certificate.dimensions.items()
           if not report.passed]
    if not certified_row and not why:
        why.append("the calibration did not certify the judge")
    if set_path is not None and set_path.is_file():
        digest = hashlib.sha256(set_path.read_bytes()).hexdigest()
        if digest != certificate.set_sha256:
            why.append(f"the set {set_path.name} has changed since it was certified "
                       f"(sha256 {certificate.set_sha256[:12]} then, {digest[:12]} now): "
                       "calibrate again")
    return ("certified" if certified_row and not why else "void"), why


def item_view(item: CalibrationItem, reveal: bool = False) -> ItemView:
    """What the labelling page shows of an item: the case and the response; its category,
    label and note only when `reveal` (the person has given their label), for those would
    give the answer away."""
    response = item.response
    turns: list[dict[str, Any]] = ([t.model_dump() for t in response.turns]
                                   if response.turns is not None
             else [{"role": "assistant", "content": response.content,
                    "tool_calls": [c.model_dump() for c in response.tool_calls]}])
    for turn in turns:
        for call in turn.get("tool_calls", []):
            try:
                call["pretty"] = json.dumps(json.loads(call["arguments"]), indent=2,
                                            ensure_ascii=False)
            except json.JSONDecodeError:
                call["pretty"] = call["arguments"]
    shown: ItemView = {
        "id": item.id, "split": item.split, "messages": item.case.messages,
        "rubric": item.case.rubric, "turns": turns,
        "tools": [t.get("function", {}).get("name") for t in item.case.tools]}
    if reveal:
        shown["category"] = item.category
        shown["label"] = item.label.model_dump()
        shown["note"] = item.note
    return shown


def load_items(set_path: Path) -> list[CalibrationItem]:
    """Every item of a set file, those people disagree on included (`read_journal`)."""
    return read_journal(set_path).items
