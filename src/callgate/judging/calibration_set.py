"""Calibration sets: the hand-checked items a judge is calibrated on, read from JSON Lines.

An item is a case (messages, tools, rubric), a response (content and tool calls; or, for a
multi-turn attempt, `turns`: the assistant turns with the `tool` messages between them, as the
judge sees them in runs), a person's label per dimension and a split (`dev` for writing the
prompt, `test` for certifying it). The set file is also a journal: a later line can withdraw a
label or record an adjudication, and `read_journal` reads which labels stand.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, ClassVar, Final, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, model_validator

from callgate.errors import InputError
from callgate.judging.dimensions import AnswerKind
from callgate.reading import json_lines_in, read_bytes, validate
from callgate.store.rows import calibration_item_row


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
    """One turn (`content`, `tool_calls`), a multi-turn trajectory (`turns`), or for the
    user_fidelity judge a scenario conversation (`conversation`, `simulated_user_turns`: the
    document judging.user_fidelity builds)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    content: str | None = None
    tool_calls: list[CalibrationCall] = Field(default_factory=list)
    turns: list[CalibrationTurn] | None = None
    conversation: list[dict[str, str]] | None = None
    simulated_user_turns: list[str] | None = None

    @model_validator(mode="after")
    def _one_shape(self) -> CalibrationResponse:
        if (self.conversation is None) != (self.simulated_user_turns is None):
            raise ValueError("a scenario conversation has conversation and "
                             "simulated_user_turns, both")
        if self.conversation is not None and (self.turns is not None or self.content
                                              is not None or self.tool_calls):
            raise ValueError("a scenario conversation has no content, tool_calls or turns")
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
        if self.conversation is not None:
            return {"conversation": self.conversation,
                    "simulated_user_turns": self.simulated_user_turns}
        if self.turns is None:
            return self.model_dump(exclude={"turns", "conversation", "simulated_user_turns"})
        return {"turns": [turn.model_dump() for turn in self.turns]}




class Labels(BaseModel):
    """A person's verdict on an item of the tool-choice judge's set."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    tool_choice: Literal["pass", "fail"]
    arguments: Literal["pass", "fail", "n/a"]

    @model_validator(mode="after")
    def _arguments_need_the_tool(self) -> Labels:
        # Arguments are judged only on the right tool (as apply_judgement scores them).
        if self.tool_choice == "fail" and self.arguments == "pass":
            raise ValueError("arguments: cannot pass when tool_choice fails (use n/a or fail)")
        return self

    behaviour: ClassVar[str | None] = None

    def columns(self) -> tuple[str, str]:
        """The store's (label_tool_choice, label_arguments) of the label."""
        return self.tool_choice, self.arguments


_BEHAVIOUR_LABELS = ("answer_kind", "claim_support", "user_fidelity")


class BehaviourLabels(BaseModel):
    """A person's verdict on an item of a judge beyond the call, on its one dimension:
    `answer_kind` (the kind of a text answer: ask, cannot, answer) or `claim_support` (pass
    when the trace backs every claim of the final answer, fail otherwise)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    answer_kind: AnswerKind | None = None
    claim_support: Literal["pass", "fail"] | None = None
    # user_fidelity: pass when a scenario's simulated user played its part, fail when it
    # contradicted the scenario or said what it should not (docs/simulated-user.md)
    user_fidelity: Literal["pass", "fail"] | None = None

    @model_validator(mode="after")
    def _one_dimension(self) -> BehaviourLabels:
        given = [dim for dim in _BEHAVIOUR_LABELS if getattr(self, dim) is not None]
        if len(given) != 1:
            raise ValueError(f"give one of {', '.join(_BEHAVIOUR_LABELS)}")
        return self

    @property
    def behaviour(self) -> str:
        return next(dim for dim in _BEHAVIOUR_LABELS if getattr(self, dim) is not None)

    def columns(self) -> tuple[str, str]:
        """Kept in the store's (label_tool_choice, label_arguments) as (its value, its
        dimension's name), so "split value/dimension" is its text."""
        return str(getattr(self, self.behaviour)), self.behaviour


def _label_kind(raw: Any) -> str:
    """Which labels an item holds: a behaviour label names answer_kind or claim_support."""
    keys = raw.keys() if isinstance(raw, dict) else vars(raw) if hasattr(raw, "__dict__") else ()
    return "behaviour" if set(_BEHAVIOUR_LABELS) & set(keys) else "call"


AnyLabels = Annotated[Annotated[Labels, Tag("call")] | Annotated[BehaviourLabels,
                                                                    Tag("behaviour")],
                      Discriminator(_label_kind)]


class CalibrationItem(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    id: str = Field(min_length=1)
    split: Literal["dev", "test"]
    category: str = ""
    case: CalibrationCase
    response: CalibrationResponse
    label: AnyLabels
    note: str = ""
    # Who gave the label: a person's name, or "assistant" for a program or model; "" unknown.
    labeller: str = ""
    labelled_at: str = ""  # ISO 8601, when known

    def line(self) -> str:
        """The item as a line of a calibration file (no `turns` key for a one-turn response)."""
        unset = {"turns", "conversation", "simulated_user_turns"}
        unset -= {key for key in unset if getattr(self.response, key) is not None}
        return json.dumps(self.model_dump(mode="json", exclude={"response": unset}),
                          ensure_ascii=False, separators=(",", ":"))


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
    first_at: dict[str, int] = {}  # id -> the number of that line
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
        first_at.setdefault(record.id, line_no)
        if earlier is not record:
            _check_relabel(source, (line_no, first_at[record.id]), earlier, record,
                           standing[record.id])
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


def _check_relabel(source: Path, lines: tuple[int, int], earlier: CalibrationItem,
                   record: CalibrationItem, before: list[tuple[int, Record]]) -> None:
    """A later line of an item id is a person's (re)label of the same case and response;
    anything else is a second item under one id (InputError naming this line and the
    first): another case or response, or a second line by the file's own labeller
    (`assistant` or unnamed), which no session writes (a copied line, a clash of ids)."""
    if (earlier.case, earlier.response) != (record.case, record.response):
        why = "another case or response"
    elif record.labeller in NOT_A_PERSON and any(
            isinstance(r, CalibrationItem) and r.labeller == record.labeller for _, r in before):
        why = f"a second line by {record.labeller or 'no named labeller'}"
    else:
        return
    line_no, first_line = lines
    raise InputError(source, f"duplicate item id {record.id!r} ({why}; the first is on line "
                     f"{first_line})", line=line_no, field="id")


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


def label_text(item: CalibrationItem) -> str:
    first, second = item.label.columns()
    return f"{item.split} {first}/{second}"


def person_confirmed(item: CalibrationItem) -> bool:
    """Whether a person gave or confirmed the item's label (not an assistant, not unknown)."""
    return item.labeller.strip() not in ("", "assistant")


def item_payloads(item: CalibrationItem) -> tuple[dict[str, Any], dict[str, Any]]:
    """The (case, response) documents a judge verdict is cached under."""
    return item.case.model_dump(), item.response.judged()


def item_row(item: CalibrationItem) -> tuple[Any, ...]:
    """The row the store keeps of an item (Store.save_calibration_items)."""
    first, second = item.label.columns()
    return calibration_item_row(item_id=item.id, split=item.split,
                                label_tool_choice=first, label_arguments=second,
                                body=item.line())
