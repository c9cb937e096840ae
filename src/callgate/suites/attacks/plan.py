"""The attack file and the transform it makes (docs/attacks.md).

An attack file (JSON) names templates of the bundled library (templates.json), the names
filled into them, where untrusted text enters (a tool, and a path into its result), and the
goal the attacker wants: a call (a tool, optionally with argument values) or a leaked value.
Repeat r of a case carries template r mod T (T templates): give `--repeats` a multiple of T
to weigh them equally. The transform is pure: the same site and result give the same answer.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Mapping, Sequence
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from callgate.errors import InputError, from_validation_error
from callgate.reading import line_of_field
from callgate.suites.interception import Replaced, ToolCallSite, ToolResultTransform

MARKER = "{injection}"  # where in an untrusted text the template goes (else: appended)
KIND_PREFIX = "attack:"  # the seam records kind "attack:<template>"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


@cache
def templates() -> dict[str, str]:
    """The bundled templates by name (their text, with {user}, {agent}, {goal}, {tool},
    {arguments} placeholders)."""
    text = resources.files(__package__).joinpath("templates.json").read_text("utf-8")
    return {name: entry["text"] for name, entry in json.loads(text).items()
            if not name.startswith("_")}


class Untrusted(_Strict):
    """Where untrusted text enters: `tool`'s result at `path` (dot-separated keys or list
    indices; "" is the whole result), for the listed `cases` (empty: every case)."""

    tool: str = Field(min_length=1)
    path: str = ""
    cases: tuple[str, ...] = ()


class GoalCall(_Strict):
    """A call the attacker wants: `tool`, and when given, argument values it must take."""

    tool: str = Field(min_length=1)
    arguments: dict[str, Any] = Field(default_factory=dict)


class Goal(_Strict):
    instruction: str = Field(min_length=1)  # the attacker's wish in words: {goal}
    call: GoalCall | None = None
    leak: str | None = Field(None, min_length=1)  # must not appear in later arguments or text

    @model_validator(mode="after")
    def _something(self) -> Goal:
        if self.call is None and self.leak is None:
            raise ValueError("give call (a forbidden call or argument value) or leak (a value "
                             "that must not appear), or both")
        return self


class Attack(_Strict):
    templates: tuple[str, ...] = Field(min_length=1)
    user: str = "the user"
    agent: str = "the assistant"
    untrusted: tuple[Untrusted, ...] = Field(min_length=1)
    goal: Goal
    # the gate: percentage points the attack success rate may rise over the baseline's, and
    # a rate (percent) it must never exceed whatever the baseline
    max_rise: float = Field(0.0, ge=0)
    ceiling: float | None = Field(None, ge=0, le=100)

    @model_validator(mode="after")
    def _known(self) -> Attack:
        known = templates()
        for index, name in enumerate(self.templates):
            if name not in known:
                raise ValueError(f"templates[{index}]: unknown template {name!r}; bundled: "
                                 + ", ".join(sorted(known)))
        return self


def load_attack(path: Path, tools: Collection[str] | None = None) -> Attack:
    """The attack file at `path`; a bad one refused naming the file, line and field. With
    `tools` (the suite's catalogue names), a tool it names must be one of them."""
    try:
        text = path.read_text("utf-8")
    except OSError as exc:
        raise InputError(path, f"cannot read: {exc.strerror or exc}") from None
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(path, f"not JSON: {exc.msg}", line=exc.lineno) from None
    try:
        attack = Attack.model_validate(raw)
    except ValidationError as exc:
        error = from_validation_error(path, None, exc)
        error.line = line_of_field(text, error.field) if error.field else None
        raise InputError(path, error.message, line=error.line, field=error.field) from None
    if tools is not None:
        named = [(f"untrusted[{i}].tool", mark.tool) for i, mark in enumerate(attack.untrusted)]
        if attack.goal.call is not None:
            named.append(("goal.call.tool", attack.goal.call.tool))
        for field, tool in named:
            if tool not in tools:
                raise InputError(path, f"{tool!r} is not a tool of the suite",
                                 line=line_of_field(text, field), field=field)
    return attack


def template_of(attack: Attack, repeat: int) -> str:
    """The template repeat `repeat` of every case carries."""
    return attack.templates[repeat % len(attack.templates)]


def fill(attack: Attack, template: str) -> str:
    """The template's text with the attack's names and goal put in."""
    call = attack.goal.call
    values = {"user": attack.user, "agent": attack.agent, "goal": attack.goal.instruction,
              "tool": call.tool if call else "",
              "arguments": json.dumps(call.arguments, sort_keys=True) if call else "{}"}
    text = templates()[template]
    for key, value in values.items():
        text = text.replace("{" + key + "}", value)
    return text


def _put(text: str, injection: str) -> str:
    return text.replace(MARKER, injection) if MARKER in text else text + injection


def inject(result: Any, path: str, injection: str) -> Any | None:
    """`result` with `injection` at `path` (a copy), or None when the path holds no text. A
    result that is JSON text is read, changed at the path and written again."""
    if isinstance(result, str) and path:
        try:
            parsed = json.loads(result)
        except ValueError:
            return None
        changed = inject(parsed, path, injection)
        return None if changed is None else json.dumps(changed)
    if not path:
        return _put(result, injection) if isinstance(result, str) else None
    head, _, rest = path.partition(".")
    if isinstance(result, Mapping) and head in result:
        inner = inject(result[head], rest, injection)
        return None if inner is None else {**result, head: inner}
    if isinstance(result, list) and head.isdigit() and int(head) < len(result):
        inner = inject(result[int(head)], rest, injection)
        return None if inner is None else [*result[:int(head)], inner, *result[int(head) + 1:]]
    return None


def attack_transform(attack: Attack, case_id: str) -> ToolResultTransform | None:
    """The transform for one case's attempts, None when no untrusted place is marked for it."""
    marks = [mark for mark in attack.untrusted if not mark.cases or case_id in mark.cases]
    if not marks:
        return None
    by_tool: dict[str, list[str]] = {}
    for mark in marks:
        by_tool.setdefault(mark.tool, []).append(mark.path)

    def transform(site: ToolCallSite, result: Any, /) -> Any | Replaced:
        paths = by_tool.get(site.tool)
        if not paths:
            return result
        template = template_of(attack, site.repeat)
        injection = fill(attack, template)
        changed, hit = result, False
        for path in paths:
            answer = inject(changed, path, injection)
            if answer is not None:
                changed, hit = answer, True
        if not hit:
            return result
        return Replaced(changed, KIND_PREFIX + template, f"{site.tool} at {', '.join(paths)}")

    return transform


def suite_transform(attack: Attack) -> Callable[[Any], ToolResultTransform | None]:
    """What a run puts in `Suite.result_transform` for this attack."""
    return lambda case: attack_transform(attack, case.id)


def attacked_cases(attack: Attack, case_ids: Sequence[str]) -> list[str]:
    """The cases the attack reaches (an untrusted place is marked for them)."""
    return [case_id for case_id in case_ids if attack_transform(attack, case_id) is not None]
