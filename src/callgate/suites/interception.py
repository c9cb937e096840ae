"""The one seam every tool result passes through on its way to the agent under test.

Wherever a call gets an answer (a Python environment, an MCP server, a BFCL environment, a
case's scripted `tool_results`, an agent target's own tools through the contract's
`metadata.faults`, the results a recorded conversation's calls got), the answer goes through a
`ToolResults` object made for that attempt, which hands it to one `ToolResultTransform`:

    transform(site, result) -> result, or a Replaced(result, kind, detail)

`site` (`ToolCallSite`) says which call it is: the case id, the repeat, the tool's catalogue
name, the call's index among this attempt's calls *to that tool* (0 for its first call, over
every turn and user turn) and the call's arguments. A transform must be pure: the same site and
result always give the same answer (seed any randomness from the site), so a live run, the
checks' rebuild of what the model saw, the judge's view and a later replay all agree. It
returns the result unchanged to leave the call alone, or `Replaced` to put something else in
the model's hands, with a `kind` naming why (`timeout`, `rate_limit`, ..., or an attack's
template) that the seam records in `applied`, in order, for the recorded line and the checks.

The environment's call has run by then: a transform changes what the agent *reads*, never the
environment's state (the checks' re-run of the calls on a fresh environment, and `final_state`,
see the state the real calls left). Faults (`suites.faults`) are one transform; instructions
injected into tool output can be another on the same seam: they only need a different
`ToolResultTransform`. `compose` chains several (the first one's answer is the second's input).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True)
class ToolCallSite:
    """Which call a result answers: `index` counts this attempt's calls to `tool`, from 0."""

    case_id: str
    repeat: int
    tool: str
    index: int
    arguments: Mapping[str, Any]


@dataclass(frozen=True)
class Replaced:
    """A result a transform put in place of the real one, and why (`kind`, `detail`)."""

    result: Any
    kind: str
    detail: str = ""


class ToolResultTransform(Protocol):
    def __call__(self, site: ToolCallSite, result: Any, /) -> Any | Replaced: ...


def unchanged(site: ToolCallSite, result: Any, /) -> Any:
    """The transform that leaves every result alone (a clean run)."""
    return result


def compose(*transforms: ToolResultTransform) -> ToolResultTransform:
    """One transform applying each in turn; the last replacement's kind is the one recorded."""

    def chained(site: ToolCallSite, result: Any, /) -> Any | Replaced:
        replaced: Replaced | None = None
        for transform in transforms:
            answer = transform(site, result)
            if isinstance(answer, Replaced):
                replaced, result = answer, answer.result
            else:
                result = answer
        if replaced is None:
            return result
        return Replaced(result, replaced.kind, replaced.detail)

    return chained


@dataclass(frozen=True)
class Applied:
    """One result a transform replaced: the tool, its per-tool call index, the kind."""

    tool: str
    index: int
    kind: str
    detail: str = ""

    def as_json(self) -> dict[str, Any]:
        return {"tool": self.tool, "call": self.index, "kind": self.kind}


@dataclass
class ToolResults:
    """The seam for one attempt: counts the calls per tool, hands each result to the
    transform, keeps what it replaced (`applied`). Not shared between attempts."""

    case_id: str
    repeat: int
    transform: ToolResultTransform = unchanged
    applied: list[Applied] = field(default_factory=list)
    _counts: Counter[str] = field(default_factory=Counter)

    def site(self, tool: str, arguments: Mapping[str, Any] | None) -> ToolCallSite:
        """The next call to `tool` (and counts it)."""
        index = self._counts[tool]
        self._counts[tool] += 1
        return ToolCallSite(self.case_id, self.repeat, tool, index, dict(arguments or {}))

    def __call__(self, tool: str, arguments: Mapping[str, Any] | None, result: Any) -> Any:
        """What the agent reads for this call's `result`."""
        site = self.site(tool, arguments)
        answer = self.transform(site, result)
        if isinstance(answer, Replaced):
            self.applied.append(Applied(tool, site.index, answer.kind, answer.detail))
            return answer.result
        return answer
