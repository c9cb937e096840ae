"""Labelling: a person's verdicts on calibration items and on a run's judged attempts, kept as
lines appended to the calibration file (reloaded into the store) plus, for `judge label` and the
web pages, a `person_labels` row saying who labelled what and when."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from callgate.errors import CallgateError
from callgate.judging.calibration import (
    CalibrationCall,
    CalibrationCase,
    CalibrationItem,
    CalibrationResponse,
    Labels,
    read_set,
)
from callgate.judging.payloads import judge_payloads
from callgate.store.db import Store
from callgate.suites.responses import parse_response
from callgate.suites.suite import Suite, load_suite


def _run_suite(store: Store, run: Mapping[str, Any]) -> Suite:
    """The suite a run was scored on, loaded from its directory, when it is unchanged."""
    path = store.suite_path(run["suite"])
    try:
        suite: Suite | None = load_suite(path)
        why = "it has changed since"
    except CallgateError as exc:
        suite, why = None, f"it cannot be loaded ({exc})"
    if suite is None or suite.fingerprint != run["suite"]:
        raise CallgateError(
            f"run {run['id']} has multi-turn judged attempts; the tool results between their "
            f"turns come from the suite at {path}, but {why}. Restore the suite to label them.")
    return suite


def judged_run(store: Store, run_id: int, *, then: str = ""
               ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A run and the rows of its attempts a judge decided; a CallgateError naming the run when
    there is no such run, or no attempt of it a judge decided (`then` ends that message)."""
    run = store.run(run_id)
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
    tools = store.suite_tools(run["suite"])
    suite: Suite | None = None  # loaded only for multi-turn attempts: their tool results
    out = []
    for row in rows:
        case = json.loads(store.case_body(run["suite"], row["case_id"]))
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


def ask_labels(ask: Callable[..., str]) -> tuple[str, str] | None:
    """A person's (tool_choice, arguments) labels from the terminal: p/pass, f/fail and, for
    the arguments, n/n/a; None when the person skips the item (s). Anything else is asked
    again. Raises LabellingStopped on q."""
    tool = _answer(ask, "tool_choice [p pass, f fail, s skip, q quit]", TOOL_ANSWERS)
    if tool == "quit":
        raise LabellingStopped
    if tool == "skip":
        return None
    arguments = _answer(ask, "arguments [p pass, f fail, n n/a]", ARGUMENT_ANSWERS)
    return tool, arguments


def label_judged_attempts(store: Store, run_id: int, set_path: Path, split: str,
                          ask: Callable[..., str], show: Callable[[str], Any],
                          labeller: str = "") -> int:
    """Ask a person for a verdict on each judged attempt of a run; append each labelled item
    to the calibration file and reload the file into the store. Returns how many were added."""
    existing: set[str] = set()
    if set_path.exists():
        existing = {item.id for item in read_set(set_path)[0]}
    added = 0
    for row, item in judged_items(store, run_id):
        if item.id in existing:
            continue
        show(f"\n── {item.id} ──\n{item_text(item)}\n"
             f"judge: tool_choice {row['tool_choice']}, arguments {row['arguments']}: "
             f"{row['reason']}")
        try:
            labels = ask_labels(ask)
        except LabellingStopped:
            break
        if labels is None:
            continue
        tool, arguments = labels
        note = ask("note (why)", default="").strip()
        labelled = with_person_labels(
            item, labeller, tool, arguments,
            note or f"labelled by hand from run {run_id}; the judge said "
                    f"{row['tool_choice']}/{row['arguments']}", split=split)
        append_item(set_path, labelled)
        added += 1
    if added:
        reload_set(store, set_path)
    return added


def append_item(set_path: Path, item: CalibrationItem) -> str:
    """Append a labelled item to a calibration file; returns the line written."""
    line = item.line()
    with set_path.open("a", encoding="utf-8") as handle:
        handle.write(line + "\n")
    return line


def reload_set(store: Store, set_path: Path) -> list[CalibrationItem]:
    """Load a calibration file into the store (replacing what the store held for it)."""
    items, _ = read_set(set_path)
    store.save_calibration_items(set_path.name, [
        (i.id, i.split, i.label.tool_choice, i.label.arguments, i.line())
        for i in items
    ])
    return items


def label_item(store: Store, set_path: Path, item: CalibrationItem, labeller: str,
               tool_choice: str, arguments: str, note: str = "") -> dict[str, Any]:
    """A person's label on an item of a set, as `judge label` keeps one: the item with the
    label appended to the file, the file reloaded into the store; plus a person_labels row
    with who labelled it and when (returned)."""
    return _keep_person_label(store, set_path, with_person_labels(
        item, labeller, tool_choice, arguments, note or f"labelled by hand by {labeller}"))


def undo_label(store: Store, set_path: Path, labeller: str) -> dict[str, Any] | None:
    """Take back a person's last label: its row, and its line when it is still the file's
    last line (otherwise the line stays and an earlier label must be given again)."""
    row = store.last_person_label(set_path.name, labeller)
    if row is None:
        return None
    data = set_path.read_bytes()
    tail = (row["line"] + "\n").encode("utf-8")
    if data.endswith(tail):
        with set_path.open("r+b") as handle:
            handle.truncate(len(data) - len(tail))
        if data[:len(data) - len(tail)].strip():
            reload_set(store, set_path)
        else:  # the label was the file's only item
            store.save_calibration_items(set_path.name, [])
    store.delete_person_label(row["id"])
    return row


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
        "label": Labels(tool_choice=tool_choice, arguments=arguments),  # type: ignore[arg-type]
        "note": note,
        "labeller": labeller,
        "labelled_at": datetime.now(UTC).isoformat(timespec="seconds"),
    })


def _keep_person_label(store: Store, set_path: Path, labelled: CalibrationItem
                       ) -> dict[str, Any]:
    """A labelled item appended to its file, the file reloaded into the store, and the
    person_labels row saying who labelled it and when (returned)."""
    line = append_item(set_path, labelled)
    reload_set(store, set_path)
    return store.add_person_label(set_path.name, labelled.id, labelled.labeller,
                                  labelled.label.tool_choice, labelled.label.arguments,
                                  labelled.note, line)
