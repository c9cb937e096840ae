"""Fault plans: chosen calls of chosen tools fail on their way to the agent (docs/faults.md).

A plan is a list of rules, per case in the suite (`"faults": [...]` on a case's line) or per
run (`callgate run --faults FILE`, `{"seed": N, "faults": [...], "after_fault": {...}}`). A
rule names a tool (its catalogue name, or `*` for every tool), a kind, and which of its calls
fail: `calls` (the 1st, 2nd, ... call of that tool in the attempt), else `probability` (each
call independently, drawn from a hash of the seed, the case, the repeat, the tool and the call:
the same plan always fails the same calls), else every call. The fault is a
`ToolResultTransform` on the interception seam (suites.interception): the call runs, and the
agent reads the fault instead of its result.

What the agent reads, by kind:
- `timeout`: `{"error": {"type": "timeout", "message": "..."}}`
- `rate_limit`: `{"error": {"type": "rate_limit", "status": 429, "retry_after": S, ...}}`
- `server_error`: `{"error": {"type": "server_error", "status": 500, ...}}`
- `validation_error`: `{"error": {"type": "validation_error", "status": 422, "field": F, ...}}`
  (F: the rule's `field`, else the call's first argument)
- `empty`: an empty answer (the tool message's content is "")
- `truncated`: the first `keep` share of the result's text, cut there (no longer JSON)
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from callgate.reading import names_lines, read_json, validate
from callgate.suites import schemas
from callgate.suites.interception import Replaced, ToolCallSite, ToolResults, ToolResultTransform
from callgate.suites.tool_messages import ToolText, tool_message_content

FaultKind = Literal["timeout", "rate_limit", "server_error", "validation_error", "empty",
                    "truncated"]
FAULT_KINDS: tuple[FaultKind, ...] = ("timeout", "rate_limit", "server_error",
                                      "validation_error", "empty", "truncated")
ANY_TOOL = "*"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class FaultRule(_Strict):
    """One rule of a fault plan (docs/faults.md)."""

    tool: str = Field(min_length=1)
    kind: FaultKind
    calls: list[int] | None = Field(None, min_length=1)  # 1 is the tool's first call
    probability: float | None = Field(None, gt=0, le=1, allow_inf_nan=False)
    retry_after: float = Field(2.0, ge=0, le=86400, allow_inf_nan=False)  # rate_limit's hint
    field: str | None = Field(None, min_length=1)  # validation_error's field
    message: str | None = Field(None, min_length=1)  # instead of the kind's own words
    keep: float = Field(0.5, ge=0, lt=1, allow_inf_nan=False)  # truncated: the share kept

    @model_validator(mode="after")
    def _one_choice(self) -> FaultRule:
        if self.calls is not None and self.probability is not None:
            raise ValueError("calls and probability: give one of them (which calls fail)")
        if self.calls is not None and any(n < 1 for n in self.calls):
            raise ValueError("calls: call numbers start at 1 (the tool's first call)")
        if self.field is not None and self.kind != "validation_error":
            raise ValueError("field: only a validation_error names a field")
        return self

    def chooses(self, site: ToolCallSite, seed: int, position: int) -> bool:
        if self.tool not in (ANY_TOOL, site.tool):
            return False
        if self.calls is not None:
            return site.index + 1 in self.calls
        if self.probability is not None:
            return draw(seed, site, position) < self.probability
        return True


class AfterFault(_Strict):
    """What a case expects of the agent once a fault hit one of its calls (checks.recovery):
    `retries`: it calls the failed tool again, at most that many times; `fallback`: it calls
    this tool instead; `tells_user`: its final answer says the call failed (true: the bundled
    phrases; a list: these patterns, regular expressions, case-insensitive);
    `no_success_claim`: its final answer never claims the task done (true: the bundled
    phrases; a list: these patterns)."""

    retries: int | None = Field(None, ge=1, le=100)
    fallback: str | None = Field(None, min_length=1)
    tells_user: bool | list[str] = False
    no_success_claim: bool | list[str] = False

    @model_validator(mode="after")
    def _something(self) -> AfterFault:
        if (self.retries is None and self.fallback is None and not self.tells_user
                and not self.no_success_claim):
            raise ValueError("states no expectation: give retries, fallback, tells_user or "
                             "no_success_claim")
        for name in ("tells_user", "no_success_claim"):
            value = getattr(self, name)
            if isinstance(value, list) and not value:
                raise ValueError(f"{name}: an empty list of patterns matches nothing; give "
                                 "true for the bundled phrases")
            for pattern in value if isinstance(value, list) else ():
                problem = schemas.pattern_problem(pattern)
                if problem is not None:
                    raise ValueError(f"{name}: a pattern {problem}")
        return self


class FaultPlanFile(_Strict):
    """`callgate run --faults FILE`: the run's rules, its seed, and what every faulted
    attempt is expected to do when its case says nothing (`after_fault`)."""

    seed: int = Field(0, ge=0, le=2**63 - 1)
    faults: list[FaultRule] = Field(min_length=1)
    after_fault: AfterFault | None = None


@names_lines
def read_fault_plan(path: Path | str) -> FaultPlanFile:
    """A fault plan file; InputError naming the file, the line and the field."""
    source = Path(path)
    return validate(FaultPlanFile, read_json(source, missing="fault plan file not found"),
                    source)


def draw(seed: int, site: ToolCallSite, position: int) -> float:
    """A uniform number in [0, 1) for one call and one rule: the same inputs, the same draw."""
    text = f"{seed}\0{site.case_id}\0{site.repeat}\0{site.tool}\0{site.index}\0{position}"
    digest = hashlib.sha256(text.encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def fault_result(rule: FaultRule, site: ToolCallSite, result: Any) -> Any:
    """What the agent reads instead of `result` when `rule` fails the call."""
    tool, kind = site.tool, rule.kind
    if kind == "empty":
        return ToolText("")
    if kind == "truncated":
        text = tool_message_content(result)
        return ToolText(text[: int(len(text) * rule.keep)])
    error: dict[str, Any] = {"type": kind}
    if kind == "timeout":
        words = f"{tool} did not answer in time: the request timed out"
    elif kind == "rate_limit":
        error.update(status=429, retry_after=rule.retry_after)
        words = f"{tool}: rate limit exceeded; retry after {rule.retry_after:g} s"
    elif kind == "server_error":
        error["status"] = 500
        words = f"{tool}: internal server error"
    else:
        field = rule.field or next(iter(site.arguments), "arguments")
        error.update(status=422, field=field)
        words = f"{tool}: validation failed: {field}: invalid value"
    error["message"] = rule.message or words
    return {"error": error}


@dataclass(frozen=True)
class FaultTransform:
    """A fault plan as the seam's transform: the first rule that chooses a call fails it."""

    rules: tuple[FaultRule, ...]
    seed: int = 0

    def __call__(self, site: ToolCallSite, result: Any, /) -> Any | Replaced:
        for position, rule in enumerate(self.rules):
            if rule.chooses(site, self.seed, position):
                return Replaced(fault_result(rule, site, result), rule.kind)
        return result


@dataclass(frozen=True)
class RunFaults:
    """What a run puts on the seam for every case: each case's own `faults` first, then the
    run's plan (`--faults`); its `after_fault` for the cases that state none."""

    plan: FaultPlanFile | None = None

    @property
    def seed(self) -> int:
        return self.plan.seed if self.plan is not None else 0

    def rules_for(self, case_rules: Sequence[FaultRule] | None) -> tuple[FaultRule, ...]:
        run_rules = self.plan.faults if self.plan is not None else []
        return (*(case_rules or ()), *run_rules)

    def transform(self, case: Any) -> ToolResultTransform | None:
        """The transform of a case (a suites.cases.Case), None when no rule applies to it."""
        rules = self.rules_for(getattr(case, "faults", None))
        return FaultTransform(rules, self.seed) if rules else None

    def after_fault(self, case: Any) -> AfterFault | None:
        own: AfterFault | None = getattr(case, "after_fault", None)
        if own is not None:
            return own
        return self.plan.after_fault if self.plan is not None else None


def planned_faults(transform: ToolResultTransform, case_id: str, repeat: int,
                   calls: Iterable[tuple[str, Mapping[str, Any] | None]]) -> list[tuple[int, Any]]:
    """Which of an attempt's calls (catalogue name, arguments, in order) the transform
    replaces: (position in `calls`, the Applied record). The results are not needed to
    decide, only to fill in a fault, so none are given."""
    seam = ToolResults(case_id, repeat, transform)
    out = []
    for position, (tool, arguments) in enumerate(calls):
        before = len(seam.applied)
        seam(tool, arguments, None)
        if len(seam.applied) > before:
            out.append((position, seam.applied[-1]))
    return out


def scheduled(transform: ToolResultTransform, case_id: str, repeat: int,
              tools: Mapping[str, str], calls_per_tool: int) -> list[dict[str, Any]]:
    """The faults an agent target applies to its own tools (docs/targets.md,
    `metadata.faults`): for each offered tool (catalogue name -> the name it is offered as)
    and each of its first `calls_per_tool` calls the transform replaces, `{"tool", "call",
    "kind", "result"}` (the JSON the tool answers instead; a truncated result gives `keep`,
    the share of its own result's text to answer, instead)."""
    out: list[dict[str, Any]] = []
    for key, sent in tools.items():
        for index in range(calls_per_tool):
            site = ToolCallSite(case_id, repeat, key, index, {})
            answer = transform(site, None)
            if not isinstance(answer, Replaced):
                continue
            entry: dict[str, Any] = {"tool": sent, "call": index, "kind": answer.kind}
            rule = _rule_of(transform, site)
            if answer.kind == "truncated" and rule is not None:
                entry["keep"] = rule.keep
            else:
                entry["result"] = (str(answer.result) if isinstance(answer.result, ToolText)
                                   else answer.result)
            out.append(entry)
    return out


def _rule_of(transform: ToolResultTransform, site: ToolCallSite) -> FaultRule | None:
    if not isinstance(transform, FaultTransform):
        return None
    return next((rule for position, rule in enumerate(transform.rules)
                 if rule.chooses(site, transform.seed, position)), None)


def apply_scheduled(entry: Mapping[str, Any], result: Any) -> Any:
    """What an agent's tool answers under a scheduled fault (`scheduled`): `result` is its own
    answer, used only by a truncated fault. For target authors (docs/faults.md)."""
    if "keep" in entry:
        text = result if isinstance(result, str) else json.dumps(result, ensure_ascii=False)
        return text[: int(len(text) * float(entry["keep"]))]
    return entry["result"]


class TargetFaults:
    """A target's side of the contract's `metadata.faults`: call it with each of the agent's
    tool calls (the tool's name as offered, and its own result) and it answers what the agent
    must read, counting the calls per tool. `from callgate.suites.faults import TargetFaults`."""

    def __init__(self, metadata: Mapping[str, Any]) -> None:
        self._entries = {(e["tool"], e["call"]): e for e in metadata.get("faults") or ()}
        self._counts: dict[str, int] = {}

    def __call__(self, tool: str, result: Any) -> Any:
        index = self._counts.get(tool, 0)
        self._counts[tool] = index + 1
        entry = self._entries.get((tool, index))
        return result if entry is None else apply_scheduled(entry, result)
