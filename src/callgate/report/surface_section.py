"""The gate's section on the tool surface (gating/surface_diff.py) in the console and in
Markdown: what changed since the baseline, each tool with its compared cases and their flips,
and the cases not compared because their expectation changed."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape

from callgate.gating.decision import GateDecision
from callgate.gating.surface_diff import surface_lines


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
