"""The tool surface a suite puts before the model: each tool's description and parameters
schema, the suite's system prompt and, for a snapshot of an MCP server, the server's name and
version; beside it, a digest of each case's expectation (what the checker compares against).
Kept with every run, so the gate can say what a release changed (gating/surface_diff.py)."""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from collections.abc import Mapping
from itertools import islice
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from callgate.reading import canonical_json

if TYPE_CHECKING:
    from callgate.suites.suite import Suite

# suite.json's `source` may name the MCP server its tools.json was snapshotted from:
# {"mcp_server": {"name": ..., "version": ...}} (written by `callgate suite tools`).
MCP_SERVER_KEY = "mcp_server"
SYSTEM_SAMPLE = 1000  # cases read for the system prompt most of them open with


class SurfaceTool(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=dict)
    # An MCP tool's hints (readOnlyHint, destructiveHint, ...), those given; None: none given
    annotations: dict[str, bool] | None = None


class ToolSurface(BaseModel):
    """What the model is shown, by tool name; with `expectations`, each case's expectation as
    a digest with the tool names it names apart (`[digest, tool, ...]`, expectation_key), so a
    renamed tool does not count as a changed expectation. A run keeps the surface without
    them (the store has its cases); a scores file carries them."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    tools: dict[str, SurfaceTool]
    system: str | None = None
    mcp_server: dict[str, str] | None = None
    expectations: dict[str, list[str]] = Field(default_factory=dict)


def _text(content: Any) -> str | None:
    """A message's content as text (a list of parts joined), None for none."""
    if content is None:
        return None
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) if isinstance(part, Mapping) else str(part)
                       for part in content)
    return canonical_json(content)


def _system_of(raw: Mapping[str, Any]) -> str | None:
    messages = raw.get("messages")
    if not isinstance(messages, list) or not messages:
        return None
    first = messages[0]
    if isinstance(first, Mapping) and first.get("role") in ("system", "developer"):
        return _text(first.get("content"))
    return None


_TOOL = re.compile(r'"tool":"((?:[^"\\]|\\.)*)"')


def expectation_key(expect: str | None, never_right: str | None = None) -> list[str]:
    """A case's expectation (its JSON text, as the store keeps it) and its never_right, as
    `[digest, tool, ...]`: the digest with the tool names it names taken out, then those
    names in order."""
    names: list[str] = []

    def numbered(found: re.Match[str]) -> str:
        names.append(json.loads(f'"{found.group(1)}"'))
        return f'"tool":{len(names) - 1}'

    body = _TOOL.sub(numbered, expect or "null") + "\x00" + (never_right or "")
    return [hashlib.sha256(body.encode()).hexdigest()[:16], *names]


def surface_of(raw_tools: list[dict[str, Any]], raw_cases: Mapping[str, Mapping[str, Any]],
               meta: Mapping[str, Any] | None = None) -> ToolSurface:
    """The surface of a suite's tools.json (`raw_tools`), cases (as applied, suite.json's
    system message in them) and suite.json (`meta`). The system prompt is suite.json's, else
    the one most of the first SYSTEM_SAMPLE cases open with."""
    tools = {}
    for entry in raw_tools:
        function = entry.get("function") if isinstance(entry, Mapping) else None
        if isinstance(function, Mapping) and isinstance(function.get("name"), str):
            hints = entry.get("annotations")
            kept = ({str(k): v for k, v in hints.items() if isinstance(v, bool)}
                    if isinstance(hints, Mapping) else {})
            tools[function["name"]] = SurfaceTool(
                description=function.get("description") or "",
                parameters=dict(function.get("parameters") or {}), annotations=kept or None)
    systems: Counter[str] = Counter()
    for raw in islice(raw_cases.values(), SYSTEM_SAMPLE):
        system = _system_of(raw)
        if system is not None:
            systems[system] += 1
    meta = meta or {}
    given = meta.get("system")
    system_text = (_text(given.get("content")) if isinstance(given, Mapping)
                   else given if isinstance(given, str) else None)
    if system_text is None and systems:
        system_text = systems.most_common(1)[0][0]
    source = meta.get("source")
    server = source.get(MCP_SERVER_KEY) if isinstance(source, Mapping) else None
    mcp_server = ({str(k): str(v) for k, v in server.items()} if isinstance(server, Mapping)
                  else None)
    return ToolSurface(tools=tools, system=system_text, mcp_server=mcp_server)


def suite_surface(suite: Suite) -> ToolSurface:
    """The surface of a loaded Suite (callgate.suites.suite), suite.json read again for its
    system message and source."""
    from callgate.reading import read_json

    meta_path = suite.path / "suite.json"
    meta = read_json(meta_path) if meta_path.is_file() else {}
    return surface_of(suite.raw_tools, suite.raw_cases,
                      meta if isinstance(meta, Mapping) else {})


def surface_json(suite: Suite) -> str:
    """suite_surface as the JSON text runs.tool_surface keeps (without the expectations: the
    store keeps the cases)."""
    return canonical_json(suite_surface(suite).model_dump(
        mode="json", exclude_none=True, exclude={"expectations"}))
