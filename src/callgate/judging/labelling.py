"""Labelling: a person's verdicts on calibration items and on a run's judged attempts, kept as
lines appended to the calibration file: labels, withdrawals (undo) and adjudications, replayed
by `read_journal`. After each one the file is reloaded into the store, whose `person_labels`
and `adjudications` rows then say what the file says. Also the sessions of `callgate serve`:
each person's queue and the plan sharing the items among people."""

from __future__ import annotations

import json
import math
import random
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from callgate.errors import CallgateError
from callgate.judging.calibration_set import (
    Adjudication,
    CalibrationCall,
    CalibrationCase,
    CalibrationItem,
    CalibrationResponse,
    Labels,
    SetJournal,
    Withdrawal,
    item_row,
    read_journal,
)
from callgate.judging.payloads import judge_payloads
from callgate.store.db import Store
from callgate.store.rows import StoredRun
from callgate.suites.responses import parse_response
from callgate.suites.suite import Suite, load_suite


def _run_suite(store: Store, run: StoredRun) -> Suite:
    """The suite a run was scored on, loaded from its directory, when it is unchanged."""
    path = store.suite_path(run.suite)
    try:
        suite: Suite | None = load_suite(path)
        why = "it has changed since"
    except CallgateError as exc:
        suite, why = None, f"it cannot be loaded ({exc})"
    if suite is None or suite.fingerprint != run.suite:
        raise CallgateError(
            f"run {run.id} has multi-turn judged attempts; the tool results between their "
            f"turns come from the suite at {path}, but {why}. Restore the suite to label them.")
    return suite


def judged_run(store: Store, run_id: int, *, then: str = ""
               ) -> tuple[StoredRun, list[dict[str, Any]]]:
    """A run and the rows of its attempts a judge decided; a CallgateError naming the run when
    there is no such run, or no attempt of it a judge decided (`then` ends that message)."""
    run = store.stored_run(run_id)
    if run is None:
        raise CallgateError(f"no run {run_id} in {store.path}")
    rows = store.judgements(run_id)
    if not rows:
        raise CallgateError(f"run {run_id} has no attempts decided by a judge{then}")
    return run, rows


def judged_items(store: Store, run_id: int) -> list[tuple[dict[str, Any], CalibrationItem]]:
    """The judged attempts of a run, each as (judgement row, an unlabelled item holding what
    the judge saw: for a multi-turn attempt, the whole trajectory with its tool results)."""
    run, rows = judged_run(store, run_id)
    tools = store.suite_tools(run.suite)
    suite: Suite | None = None  # loaded only for multi-turn attempts: their tool results
    out = []
    for row in rows:
        case = json.loads(store.case_body(run.suite, row["case_id"]))
        body = store.response_body(run_id, row["case_id"], row["repeat"])
        response = parse_response(json.loads(body))
        if len(response.assistant_turns) > 1:
            suite = suite or _run_suite(store, run)
            case_doc, response_doc = judge_payloads(suite, suite.cases[row["case_id"]],
                                                    response)
            calibration_case = CalibrationCase.model_validate(case_doc)
            calibration_response = CalibrationResponse.model_validate(response_doc)
        else:
            message = response.message
            offered = case.get("tools")
            calibration_case = CalibrationCase(
                messages=case["messages"],
                tools=[t for t in tools if offered is None or t["function"]["name"] in offered],
                rubric=case["expect"].get("rubric", ""))
            calibration_response = CalibrationResponse(
                content=message.content if message else None,
                tool_calls=[CalibrationCall(name=c.name, arguments=c.arguments)
                            for c in (message.tool_calls if message else ())])
        item = CalibrationItem(
            id=f"run{run_id}-{row['case_id']}-r{row['repeat']}", split="dev",
            category="labelled_from_run", case=calibration_case,
            response=calibration_response, label=Labels(tool_choice="pass", arguments="n/a"),
        )
        out.append((row, item))
    return out


class LabellingStopped(Exception):
    """The person typed q: stop asking, keep the labels given so far."""


class AnswersEnded(CallgateError):
    """The answers ended (end of input, e.g. a piped file) before every item had one: the
    labels given so far are kept."""


# The keys the terminal accepts, the same as the web pages' (p, f, n) plus the words.
TOOL_ANSWERS = {"p": "pass", "pass": "pass", "f": "fail", "fail": "fail", "s": "skip",
                "skip": "skip", "q": "quit", "quit": "quit"}
ARGUMENT_ANSWERS = {"p": "pass", "pass": "pass", "f": "fail", "fail": "fail", "n": "n/a",
                    "n/a": "n/a"}


def item_text(item: CalibrationItem) -> str:
    """What a person reads before labelling an item in the terminal."""
    return (f"rubric: {item.case.rubric}\n"
            f"last message: {item.case.messages[-1].get('content')}\n"
            f"response: {json.dumps(item.response.judged(), ensure_ascii=False)}")


def _answer(ask: Callable[..., str], question: str, answers: Mapping[str, str]) -> str:
    """Ask until the answer is one of `answers`; anything else is asked again, saying so."""
    prompt = question
    while True:
        typed = ask(prompt).strip().lower()
        if typed in answers:
            return answers[typed]
        keys = ", ".join(k for k in answers if len(k) == 1)
        prompt = f"{typed!r} is not an answer ({keys}); {question}"


def ask_labels(ask: Callable[..., str]) -> Labels | None:
    """A person's labels on one item from the terminal: the questions every terminal labeller
    asks (`judge label RUN --set` and `judge label --audit`), in one order: tool_choice
    (p/pass, f/fail, s skip, q quit), then arguments (p/pass, f/fail, n/n/a). Anything else is
    asked again; so is an arguments answer that cannot go with the tool choice (pass after a
    failed tool choice: the rule of Labels, which the web form enforces too), saying why,
    before anything is kept. None when the person skips the item; LabellingStopped on q."""
    tool = _answer(ask, "tool_choice [p pass, f fail, s skip, q quit]", TOOL_ANSWERS)
    if tool == "quit":
        raise LabellingStopped
    if tool == "skip":
        return None
    question = ("arguments [p pass, f fail, n n/a]" if tool == "pass" else
                "arguments [f fail, n n/a] (the tool choice failed)")
    while True:
        arguments = _answer(ask, question, ARGUMENT_ANSWERS)
        try:
            return Labels.model_validate({"tool_choice": tool, "arguments": arguments})
        except ValidationError as exc:
            why = str(exc.errors()[0]["msg"]).removeprefix("Value error, ")
            question = f"{why}; arguments [f fail, n n/a]"


def ask_text(ask: Callable[..., str], question: str, required: bool = False) -> str:
    """A line of free text (a note; with `required`, a reason to skip, asked until given),
    asked again when it cannot be kept as UTF-8 (bytes that are not UTF-8 reach Python as
    lone surrogates)."""
    prompt = question
    while True:
        typed = str(ask(prompt) if required else ask(prompt, default="")).strip()
        if is_text(typed) and (typed or not required):
            return typed
        prompt = f"that is not UTF-8 text; {question}" if typed else question


def is_text(value: str) -> bool:
    """Whether a string can be written as UTF-8 (no lone surrogate)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _judge_said(row: Mapping[str, Any]) -> str:
    return f"judge: tool_choice {row['tool_choice']}, arguments {row['arguments']}: {row['reason']}"


def label_judged_attempts(store: Store, run_id: int, set_path: Path, split: str,
                          ask: Callable[..., str], show: Callable[[str], Any],
                          labeller: str = "") -> int:
    """Ask a person for a verdict on each judged attempt of a run; append each labelled item
    to the calibration file and reload the file into the store. Returns how many were added.

    The judge's verdict is shown only once the person has answered: a label that measures
    the judge must not lean on it. The answers ending (AnswersEnded) keep the labels given so
    far."""
    existing: set[str] = set()
    if set_path.exists():
        existing = {item.id for item in read_journal(set_path).items}
    added = 0
    try:
        for row, item in judged_items(store, run_id):
            if item.id in existing:
                continue
            show(f"\n── {item.id} ──\n{item_text(item)}")
            try:
                labels = ask_labels(ask)
                if labels is None:
                    continue
                show(_judge_said(row))  # now that the person has answered
                note = ask_text(ask, "note (why)")
            except LabellingStopped:
                break
            except AnswersEnded:
                raise AnswersEnded(
                    f"the answers ended at {item.id}; the {added} label(s) given are kept in "
                    f"{set_path}: callgate judge label {run_id} --set {set_path} to go on"
                ) from None
            labelled = with_person_labels(
                item, labeller, labels.tool_choice, labels.arguments,
                note or f"labelled by hand from run {run_id}; the judge said "
                        f"{row['tool_choice']}/{row['arguments']}", split=split)
            append_item(set_path, labelled)
            added += 1
    finally:
        if added:
            reload_set(store, set_path)
    return added


def append_item(set_path: Path, item: CalibrationItem | Withdrawal | Adjudication) -> str:
    """Append a record (a labelled item, a withdrawal, an adjudication) to a calibration file;
    returns the line written."""
    line = item.line()
    with set_path.open("a", encoding="utf-8") as handle:
        handle.write(line + "\n")
    return line


def reload_set(store: Store, set_path: Path) -> SetJournal:
    """Load a calibration file into the store, replacing what the store held for it: the
    items calibration uses (`read_set`'s), and the people's standing labels and adjudications,
    so that the store says what the file says after any label, relabel, undo or
    adjudication."""
    journal = read_journal(set_path)
    with store.atomic():
        store.save_calibration_items(set_path.name, [item_row(i) for i in journal.counted()])
        store.replace_set_labels(
            set_path.name,
            [(i.id, i.labeller, *i.label.columns(), i.note, i.labelled_at,
              i.line()) for i in journal.people],
            [(a.adjudicate, a.labeller, a.label.tool_choice, a.label.arguments, a.why, a.at,
              a.line()) for a in journal.adjudications])
    return journal


def label_item(store: Store, set_path: Path, item: CalibrationItem, labeller: str,
               tool_choice: str, arguments: str, note: str = "") -> dict[str, Any]:
    """A person's label on an item of a set, as `judge label` keeps one: the item with the
    label appended to the file, the file reloaded into the store; plus a person_labels row
    with who labelled it and when (returned)."""
    return _keep_person_label(store, set_path, with_person_labels(
        item, labeller, tool_choice, arguments, note or f"labelled by hand by {labeller}"))


class TakenBack(BaseModel):
    """A label (or adjudication) a person took back (`undo_label`)."""

    model_config = ConfigDict(frozen=True)
    item_id: str
    labeller: str
    label: dict[str, Any]  # the labels taken back, as the set's file has them
    adjudication: bool


def undo_label(store: Store, set_path: Path, labeller: str) -> TakenBack | None:
    """Take back a person's last standing label (or adjudication) on a set: a withdrawal
    appended to the file, the file reloaded into the store. Returns the row taken back (its
    item_id, labeller and labels), or None when the person has nothing standing."""
    if not set_path.is_file():
        return None
    last = read_journal(set_path).last_by(labeller)
    if last is None:
        return None
    item_id = last.adjudicate if isinstance(last, Adjudication) else last.id
    append_item(set_path, Withdrawal(withdraw=item_id, labeller=labeller, at=_now()))
    reload_set(store, set_path)
    return TakenBack(item_id=item_id, labeller=labeller, label=last.label.model_dump(),
                     adjudication=isinstance(last, Adjudication))


def adjudicate(store: Store, set_path: Path, item_id: str, labeller: str, tool_choice: str,
               arguments: str, why: str) -> Adjudication:
    """A person settles an item people disagree on: the label that counts, who and why,
    appended to the file, the file reloaded into the store."""
    decided = Adjudication(adjudicate=item_id, labeller=labeller, why=why, at=_now(),
                           label=Labels.model_validate({"tool_choice": tool_choice,
                                                        "arguments": arguments}))
    append_item(set_path, decided)
    reload_set(store, set_path)
    return decided


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def judged_attempt_items(store: Store, run_id: int
                         ) -> list[tuple[dict[str, Any], CalibrationItem]]:
    """A run's judged attempts as unlabelled items, each with its judgement row: what
    `callgate judge label` shows a person."""
    return judged_items(store, run_id)


def label_judged_attempt(store: Store, run_id: int, set_path: Path, item: CalibrationItem,
                         judgement: Mapping[str, Any], labeller: str, tool_choice: str,
                         arguments: str, note: str = "", split: str = "dev") -> dict[str, Any]:
    """One judged attempt labelled by a person, kept as `label_judged_attempts` keeps it (the
    item appended to the file, the file reloaded), plus who labelled it and when."""
    return _keep_person_label(store, set_path, with_person_labels(
        item, labeller, tool_choice, arguments,
        note or f"labelled by hand by {labeller} from run {run_id}; the judge said "
                f"{judgement['tool_choice']}/{judgement['arguments']}", split=split))


def with_person_labels(item: CalibrationItem, labeller: str, tool_choice: str, arguments: str,
                       note: str, **fields: Any) -> CalibrationItem:
    """The item with a person's labels, their note, who gave them and when (and `fields`,
    e.g. its split)."""
    return item.model_copy(update={
        **fields,
        "label": Labels.model_validate({"tool_choice": tool_choice, "arguments": arguments}),
        "note": note,
        "labeller": labeller,
        "labelled_at": _now(),
    })


def _keep_person_label(store: Store, set_path: Path, labelled: CalibrationItem
                       ) -> dict[str, Any]:
    """A labelled item appended to its file, the file reloaded into the store, and the
    person_labels row saying who labelled it and when (returned)."""
    append_item(set_path, labelled)
    reload_set(store, set_path)
    return [row for row in store.person_labels(set_path.name)
            if (row["item_id"], row["labeller"]) == (labelled.id, labelled.labeller)][-1]


# --------------------------------------------------------------------------- sessions


class SessionPlan(BaseModel):
    """Who labels what in a session (`callgate serve --labellers --second-label --seed`):
    every item needs one person's label, a seeded share of them a second person's (for
    kappa). With labellers named, each item is given to one of them (and a doubled item to
    the next one too); without, anyone may give the labels an item still needs."""

    model_config = ConfigDict(frozen=True)
    labellers: tuple[str, ...] = ()
    second_share: float = Field(default=0.0, ge=0.0, le=1.0)
    seed: int = 0

    def doubled(self, item_ids: list[str]) -> set[str]:
        """The items asked for a second label: the first ceil(share × n) of a seeded
        permutation of the ids (sorted first, so file order does not change the choice)."""
        order = self._order(item_ids)
        return set(order[:math.ceil(self.second_share * len(order))])

    def assignments(self, item_ids: list[str]) -> dict[str, tuple[str, ...]]:
        """Item -> the named labellers asked to label it (empty without named labellers)."""
        if not self.labellers:
            return {i: () for i in item_ids}
        doubled = self.doubled(item_ids)
        people = self.labellers
        out: dict[str, tuple[str, ...]] = {}
        for position, item_id in enumerate(self._order(item_ids)):
            first = people[position % len(people)]
            second = people[(position + 1) % len(people)]
            out[item_id] = (first, second) if item_id in doubled and second != first else (
                first,)
        return out

    def needed(self, item_ids: list[str]) -> dict[str, int]:
        """Item -> how many people's labels it needs."""
        doubled = self.doubled(item_ids)
        return {i: 2 if i in doubled else 1 for i in item_ids}

    def _order(self, item_ids: list[str]) -> list[str]:
        order = sorted(item_ids)
        random.Random(self.seed).shuffle(order)
        return order


def queue_for(item_ids: list[str], labelled_by: Mapping[str, set[str]], labeller: str,
              plan: SessionPlan | None = None) -> tuple[list[str], int]:
    """A person's queue over a set's items (file order within each part) and how many items
    at its head are theirs to label: first what they still have to label (without a plan,
    every item they have not labelled; with one, those given to them, or without named
    labellers those still short of the labels they need), then the other items they have not
    labelled, then those they have."""
    mine = {i for i, people in labelled_by.items() if labeller in people}
    open_ = [i for i in item_ids if i not in mine]
    if plan is None:
        todo = open_
    elif plan.labellers:
        given = plan.assignments(item_ids)
        todo = [i for i in open_ if labeller in given[i]]
    else:
        needed = plan.needed(item_ids)
        todo = [i for i in open_ if len(labelled_by.get(i, ())) < needed[i]]
    held = set(todo)
    return todo + [i for i in open_ if i not in held] + [i for i in item_ids if i in mine], \
        len(todo)


def still_to_label(item_ids: list[str], labelled_by: Mapping[str, set[str]],
                   plan: SessionPlan | None) -> dict[str, list[str]]:
    """Who still has to label what: labeller -> their items still unlabelled (with named
    labellers), or "anyone" -> the items still short of the labels they need."""
    if plan is not None and plan.labellers:
        given = plan.assignments(item_ids)
        return {who: [i for i in item_ids if who in given[i]
                      and who not in labelled_by.get(i, set())]
                for who in plan.labellers}
    needed = (plan or SessionPlan()).needed(item_ids)
    return {"anyone": [i for i in item_ids if len(labelled_by.get(i, ())) < needed[i]]}
