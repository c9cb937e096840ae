"""Policies: what an agent must never do, whatever the call it was asked for (docs/policies.md).

A suite declares them in suite.json (`"policies": {...}`) and a case may declare its own in its
line (`"policies": {...}`); a field the case gives replaces the suite's. They are checked on
every attempt by `callgate.checks.policies`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator

from callgate.errors import InputError, from_validation_error
from callgate.suites.matchers import (
    Matcher,
    Regex,
    json_equal,
    matcher_kind,
    read_matcher,
    shown,
)

PolicyName = Literal["forbidden_tools", "forbidden_values", "confirm_before_write", "max_calls",
                     "unsupported_claims"]
POLICY_NAMES: tuple[PolicyName, ...] = ("forbidden_tools", "forbidden_values",
                                        "confirm_before_write", "max_calls",
                                        "unsupported_claims")
DEFAULT_MAX_RISE = 0.0  # zero tolerance: a release that adds a violation fails
# suite.json's `"write_tools": "annotated"`: the tools whose MCP annotations in tools.json say
# they write (`readOnlyHint: false` or `destructiveHint: true`, not `readOnlyHint: true`).
ANNOTATED = "annotated"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Forbidden(_Strict):
    """Values an argument must never take: listed values (`one_of`; a literal is a list of
    one) or one matcher (callgate.suites.matchers)."""

    one_of: tuple[Any, ...] = ()
    matcher: Matcher | None = None

    def hit(self, got: Any) -> bool:
        if self.matcher is not None:
            return self.matcher.matches(got)
        return any(json_equal(value, got) for value in self.one_of)

    def describe(self) -> str:
        if self.matcher is not None:
            return self.matcher.describe()
        if len(self.one_of) == 1:
            return shown(self.one_of[0])
        return "one of " + ", ".join(shown(value) for value in self.one_of)


def _forbidden(key: str, raw: Any, context: Any) -> Forbidden:
    if isinstance(raw, dict) and set(raw) == {"one_of"}:
        if not isinstance(raw["one_of"], list) or not raw["one_of"]:
            raise ValueError(f"{key}: one_of must be a non-empty list of forbidden values")
        return Forbidden(one_of=tuple(raw["one_of"]))
    kind = matcher_kind(raw) if isinstance(raw, dict) else None
    if kind is None:
        return Forbidden(one_of=(raw,))
    if "optional" in raw:
        raise ValueError(f"{key}: optional has no meaning for a forbidden value")
    return Forbidden(matcher=read_matcher(kind, raw, key, context))


class Claim(_Strict):
    """How a final answer claims a write tool's success: phrases (any of them, case-insensitive,
    on word boundaries) or a regex (the linear-time engine of the schemas' `pattern`)."""

    phrases: tuple[str, ...] = ()
    regex: Regex | None = None

    def made_in(self, text: str) -> str | None:
        """What in `text` makes the claim (the phrase, or the regex), or None."""
        if self.regex is not None:
            return self.regex.describe() if self.regex.matches(text) else None
        folded = text.casefold()
        return next((phrase for phrase in self.phrases if re.search(
            r"(?<!\w)" + re.escape(phrase.casefold()) + r"(?!\w)", folded)), None)


def _claim(tool: str, raw: Any) -> Claim:
    if isinstance(raw, str):
        raw = [raw]
    if isinstance(raw, list):
        if not raw or not all(isinstance(p, str) and p.strip() for p in raw):
            raise ValueError(f"{tool}: give non-empty phrases, or {{\"regex\": ...}}")
        return Claim(phrases=tuple(raw))
    if isinstance(raw, dict) and set(raw) == {"regex"}:
        try:
            return Claim(regex=Regex.model_validate(raw))
        except ValidationError as exc:
            why = exc.errors()[0]["msg"].removeprefix("Value error, ")
            raise ValueError(f"{tool}: regex: {why}") from None
    raise ValueError(f"{tool}: a success claim is a phrase, a list of phrases or "
                     "{\"regex\": ...}")


class UnwarrantedGate(_Strict):
    """Gate the unwarranted-call rate (attempts of no-call cases that called a tool) on its
    own: fail on a rise of more than `max_rise` points over the baseline (0: zero tolerance)."""

    max_rise: float = Field(0.0, ge=0)


class AfterCall(_Strict):
    """Confirmation by a read call: a write call is allowed only after a call of this tool."""

    after_call: str = Field(min_length=1)


class Policies(_Strict):
    """What must never happen in an attempt. Every field is optional; `None` is "not declared"
    (a case's policies replace the suite's field by field)."""

    forbidden_tools: tuple[str, ...] | None = None
    # tool -> argument -> the values it must never take
    forbidden_values: dict[str, dict[str, Forbidden]] | None = None
    # the tools that write; "annotated": from tools.json's MCP annotations (suite.json only,
    # resolved to the tools' names when the suite loads)
    write_tools: tuple[str, ...] | Literal["annotated"] | None = None
    # true: a write call only in a later user turn than the first (the user has confirmed);
    # {"after_call": tool}: only after a call of that (read) tool; false: not checked
    confirm_before_write: bool | AfterCall | None = None
    max_calls: int | None = Field(None, ge=0)
    # write tool -> how a final answer claims its success: a claim with no successful call of
    # the tool is an unsupported claim (callgate.checks.claims)
    claims: dict[str, Claim] | None = None
    # the claim_support judge reads this case's final answer against its trace (opt in)
    judge_claims: bool | None = None
    # Gate the unwarranted-call rate on its own (suite.json only; absent: not gated).
    unwarranted_calls: UnwarrantedGate | None = None
    # The gate's tolerance: violations per 100 attempts a policy may rise (suite.json only).
    max_rise: float | None = Field(None, ge=0)

    @field_validator("forbidden_values", mode="before")
    @classmethod
    def _values(cls, raw: Any, info: ValidationInfo) -> Any:
        if raw is None:
            return None
        if not isinstance(raw, dict):
            raise ValueError("must be an object: tool -> argument -> forbidden values")
        out: dict[str, dict[str, Forbidden]] = {}
        for tool, args in raw.items():
            if not isinstance(args, dict) or not args:
                raise ValueError(f"{tool}: must be a non-empty object: argument -> forbidden "
                                 "values")
            out[tool] = {key: _forbidden(f"{tool}.{key}", value, info.context)
                         for key, value in args.items()}
        return out

    @field_validator("claims", mode="before")
    @classmethod
    def _claims(cls, raw: Any) -> Any:
        if raw is None:
            return None
        if not isinstance(raw, dict) or not raw:
            raise ValueError("must be a non-empty object: write tool -> its success claim")
        return {tool: _claim(tool, value) for tool, value in raw.items()}

    def merged(self, case: Policies | None) -> Policies:
        """These policies with a case's: the fields the case gives replace these."""
        if case is None:
            return self
        given = {name: getattr(case, name) for name in case.model_fields_set}
        return self.model_copy(update=given) if given else self

    def declared(self) -> list[PolicyName]:
        """The policies these declare, in POLICY_NAMES order."""
        out: list[PolicyName] = []
        if self.forbidden_tools:
            out.append("forbidden_tools")
        if self.forbidden_values:
            out.append("forbidden_values")
        if self.confirm_before_write:
            out.append("confirm_before_write")
        if self.max_calls is not None:
            out.append("max_calls")
        if self.claims:
            out.append("unsupported_claims")
        return out


NO_POLICIES = Policies()


def suite_policies(raw: Any, meta_path: Path, tools: Mapping[str, Any],
                   context: dict[str, Any]) -> Policies:
    """suite.json's `policies`, checked against the catalogue; InputError naming the field."""
    if not isinstance(raw, dict):
        raise InputError(meta_path, "must be an object of policies", field="policies")
    try:
        policies = Policies.model_validate(raw, context=context)
    except ValidationError as exc:
        raise from_validation_error(meta_path, None, exc, prefix="policies.") from None
    if policies.write_tools == ANNOTATED:
        policies = policies.model_copy(update={"write_tools": _annotated_writes(tools, meta_path)})
    check_policies(policies, tools, meta_path, None)
    return policies


def writes_by_hints(hints: Any) -> bool:
    """Whether a tool's MCP annotations (tools.json's `annotations`) say it writes: it gives
    `readOnlyHint: false` or `destructiveHint: true`, and not `readOnlyHint: true`. A tool
    without annotations says nothing, whatever MCP's defaults."""
    if hints is None or getattr(hints, "readOnlyHint", None) is True:
        return False
    return getattr(hints, "readOnlyHint", None) is False or \
        getattr(hints, "destructiveHint", None) is True


def _annotated_writes(tools: Mapping[str, Any], meta_path: Path) -> tuple[str, ...]:
    found = tuple(name for name, tool in tools.items()
                  if writes_by_hints(getattr(tool, "annotations", None)))
    if not found:
        raise InputError(meta_path, 'write_tools "annotated": no tool of tools.json has '
                         "annotations that say it writes (readOnlyHint false or "
                         "destructiveHint true); list the write tools, or snapshot an MCP "
                         "server that gives them with callgate suite tools --mcp",
                         field="policies.write_tools")
    return found


def check_policies(policies: Policies, tools: Mapping[str, Any], path: Path,
                   line: int | None, *, case: bool = False) -> None:
    """The tools the policies name are in the catalogue; what confirmation needs is there."""
    def refuse(message: str, field: str) -> InputError:
        return InputError(path, message, line=line, field=f"policies.{field}")

    for name in ("max_rise", "unwarranted_calls"):
        if case and getattr(policies, name) is not None:
            raise refuse("the gate's tolerance is the suite's (suite.json), not a case's", name)
    if policies.write_tools == ANNOTATED:
        raise refuse(f'"{ANNOTATED}" is for suite.json; a case lists its write tools',
                     "write_tools")
    for name in ("forbidden_tools", "write_tools"):
        for index, tool in enumerate(getattr(policies, name) or ()):
            if tool not in tools:
                raise refuse(f"unknown tool {tool!r}", f"{name}[{index}]")
    for tool in policies.forbidden_values or {}:
        if tool not in tools:
            raise refuse(f"unknown tool {tool!r}", f"forbidden_values.{tool}")
    for tool in policies.claims or {}:
        if tool not in tools:
            raise refuse(f"unknown tool {tool!r}", f"claims.{tool}")
    confirm = policies.confirm_before_write
    if isinstance(confirm, AfterCall) and confirm.after_call not in tools:
        raise refuse(f"unknown tool {confirm.after_call!r}", "confirm_before_write.after_call")


def check_confirmation(policies: Policies, path: Path, line: int | None) -> None:
    """Confirm before write needs write tools to confirm (declared in the suite or the case)."""
    if policies.confirm_before_write and not policies.write_tools:
        raise InputError(path, "confirm_before_write needs write_tools (the tools that write)",
                         line=line, field="policies.confirm_before_write")
