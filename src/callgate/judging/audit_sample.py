"""Drawing an audit sample and labelling it.

The sample is the first n of a seeded permutation of the run's judged attempts (sorted by case
and repeat), so it is uniform for any n and an audit grows by taking more of the same
permutation: the labels already given stay in the sample.
"""

from __future__ import annotations

import random
import secrets
from collections.abc import Callable, Sequence
from typing import Any

from pydantic import ValidationError

from callgate.errors import CallgateError
from callgate.judging.audit import Key
from callgate.judging.calibration_set import Labels
from callgate.judging.labelling import (
    AnswersEnded,
    LabellingStopped,
    ask_labels,
    ask_text,
    item_text,
    judged_items,
    judged_run,
)
from callgate.store.db import Store


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
                reason = ask_text(ask, "why skip it (kept with the audit; a skip makes it "
                                  "incomplete)", required=True)
                store.save_audit_skip(run_id, key[0], key[1], reason, labeller)
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
        store.save_audit_label(run_id, key[0], key[1], labels.tool_choice, labels.arguments,
                               labeller)
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
    try:
        labels = Labels.model_validate({"tool_choice": tool_choice, "arguments": arguments})
    except ValidationError as exc:
        raise CallgateError(str(exc.errors()[0]["msg"]).removeprefix("Value error, ")) from None
    store.save_audit_label(run_id, case_id, repeat, labels.tool_choice, labels.arguments,
                           labeller)
