"""A loaded suite worded another way (suites/perturb.py): the same cases, expectations and
checks, with the tool objects and messages of a variant. A distractor joins the catalogue (its
schema is the copied tool's), so a call to it is schema-checked and counted a wrong tool."""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path
from typing import Any

from callgate.suites.cases import Case, Message, OfferedAs, UserTurn
from callgate.suites.perturb import Spec, Variant, perturb
from callgate.suites.suite import Suite


def perturbed_suite(suite: Suite, spec: Spec, base: Path | None = None) -> tuple[Suite, Variant]:
    """The suite as `spec` words it, and the variant it was made from (`base`: where a file
    argument is read from, default the working directory)."""
    raw_cases = {case_id: suite.raw_cases[case_id] for case_id in suite.cases}
    variant = perturb(spec, suite.raw_tools, raw_cases, base)
    return with_variant(suite, variant), variant


def with_variant(suite: Suite, variant: Variant) -> Suite:
    tools = dict(suite.tools)
    validators = dict(suite.validators)
    for name, copied in variant.distractors.items():
        tools[name] = suite.tools[copied].model_copy(
            update={"function": suite.tools[copied].function.model_copy(update={"name": name})})
        validators[name] = suite.validators[copied]
    cases: dict[str, Case] = {}
    for case_id, raw in variant.cases.items():
        before = suite.cases[case_id]
        if raw is suite.raw_cases.get(case_id) or raw == suite.raw_cases[case_id]:
            cases[case_id] = before
            continue
        cases[case_id] = before.model_copy(update=_case_fields(raw, before))
    digest = hashlib.sha256(f"{suite.fingerprint}:{variant.fingerprint}".encode()).hexdigest()
    return dataclasses.replace(suite, fingerprint=digest, tools=tools, validators=validators,
                               raw_tools=variant.tools, raw_cases=variant.cases, cases=cases)


def _entry(entry: Any) -> str | OfferedAs:
    return entry if isinstance(entry, str) else OfferedAs(tool=entry["tool"], name=entry["name"])


def _case_fields(raw: dict[str, Any], before: Case) -> dict[str, Any]:
    """What a variant changes in a case's model: its messages, its tools, its user turns (the
    expectation, tags and the rest are the case's own, unchanged)."""
    fields: dict[str, Any] = {
        "messages": [Message.model_validate(m) for m in raw["messages"]],
        "tools": None if raw.get("tools") is None else [_entry(e) for e in raw["tools"]],
    }
    if before.user_turns is not None:
        fields["user_turns"] = [
            UserTurn(messages=turn.messages,
                     add_tools=[_entry(e) for e in raw_turn.get("add_tools", ())])
            for turn, raw_turn in zip(before.user_turns, raw["user_turns"], strict=True)]
    return fields
