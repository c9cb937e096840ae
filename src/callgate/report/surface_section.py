"""The gate's section on the tool surface (gating/surface_diff.py) in the console and in
Markdown: what changed since the baseline, each tool with its compared cases and their flips,
and the cases not compared because their expectation changed."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from rich.console import Console
from rich.markup import escape

from callgate.gating.decision import GateDecision
from callgate.gating.surface_diff import SurfaceDiff, summary, surface_lines

JUNIT_CLASS = "callgate.gate.tool_surface"


def _title(decision: GateDecision) -> str:
    return f"tool surface since {decision.baseline_release}"


def print_surface(decision: GateDecision, console: Console) -> None:
    lines = surface_lines(decision.tool_surface)
    if not lines:
        return
    console.print(f"[bold]{escape(_title(decision))}:[/bold]", highlight=False)
    for text in lines:
        console.print(f"  {escape(text)}", highlight=False)


def surface_markdown(decision: GateDecision) -> list[str]:
    lines = surface_lines(decision.tool_surface, limit=1000)
    if not lines:
        return []
    return ["", f"**What changed: {_title(decision)}**", "",
            *(f"- {_code(text)}" for text in lines)]


def _code(text: str) -> str:
    """A word diff's markers kept from Markdown's emphasis and links."""
    return text.replace("[-", "`[-").replace("-]", "-]`").replace("{+", "`{+").replace(
        "+}", "+}`")


def surface_junit(gate: ET.Element, decision: GateDecision) -> None:
    """The tool surface in the gate's JUnit suite, as a CI user reads it: a property
    `callgate.tool_surface` with its summary, and one passing testcase per change (a tool
    added, removed or changed, the system prompt, the MCP server, the cases whose expectation
    changed), its lines in system-out. Passing: the figures decide, these say what changed."""
    diff = decision.tool_surface
    if diff is None:
        return
    properties = gate.find("properties")
    if properties is None:
        properties = ET.Element("properties")
        gate.insert(0, properties)  # JUnit's schema: a suite's properties come first
    ET.SubElement(properties, "property", name="callgate.tool_surface", value=summary(diff))
    for name, lines in _surface_cases(diff):
        case = ET.SubElement(gate, "testcase", name=name, classname=JUNIT_CLASS)
        ET.SubElement(case, "system-out").text = "\n".join(lines)


def _surface_cases(diff: SurfaceDiff) -> list[tuple[str, list[str]]]:
    """(testcase name, its lines): a tool's lines under its name, the rest one each."""
    if diff.unrecorded:
        return [("tool surface not recorded", [diff.unrecorded])]
    out = [(f"tool added: {name}", [f"tool added: {name}"]) for name in diff.added]
    out += [(f"tool removed: {name}", [f"tool removed: {name}"]) for name in diff.removed]
    for change in diff.tools:
        lines = surface_lines(diff.model_copy(update={
            "added": [], "removed": [], "tools": [change], "system": None, "mcp_server": None,
            "expectation_changed": []}))
        out.append((f"tool changed: {change.tool}", lines))
    for name, text in (("system prompt changed", diff.system),
                       ("MCP server changed", diff.mcp_server)):
        if text:
            out.append((name, [f"{name.split(' changed')[0]}: {text}"]))
    if diff.expectation_changed:
        out.append(("expectation changed, not compared", surface_lines(diff.model_copy(
            update={"added": [], "removed": [], "tools": [], "system": None,
                    "mcp_server": None}), limit=1000)))
    return out
