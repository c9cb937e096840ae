"""An MCP tool's hints (tools.json `annotations`, kept by `suite tools --mcp`) are part of the
tool surface: a tool that starts saying it destroys is named by the gate as a change; a
surface kept without hints reads as before."""

from __future__ import annotations

import copy
from typing import Any

from callgate.gating.surface_diff import hint_changes, surface_diff
from callgate.suites.surface import SurfaceTool, surface_of

TOOLS: list[dict[str, Any]] = [
    {"type": "function", "function": {"name": "delete_order", "description": "Delete.",
                                      "parameters": {"type": "object"}},
     "annotations": {"readOnlyHint": False}},
    {"type": "function", "function": {"name": "lookup_order", "description": "Look up.",
                                      "parameters": {"type": "object"}}}]


def test_a_changed_hint_is_named_with_the_tools_changes() -> None:
    now = copy.deepcopy(TOOLS)
    now[0]["annotations"] = {"readOnlyHint": False, "destructiveHint": True}
    now[1]["annotations"] = {"readOnlyHint": True}
    diff = surface_diff(surface_of(TOOLS, {}), surface_of(now, {}), "r1")
    assert diff.surface_changed
    assert {change.tool: change.parameters for change in diff.tools} == {
        "delete_order": ["hint destructiveHint: unset → true"],
        "lookup_order": ["hint readOnlyHint: unset → true"]}


def test_the_same_hints_say_nothing_and_none_given_keeps_the_kept_json() -> None:
    assert surface_diff(surface_of(TOOLS, {}), surface_of(copy.deepcopy(TOOLS), {}),
                        "r1").tools == []
    kept = surface_of(TOOLS, {}).tools["lookup_order"]
    assert kept.annotations is None
    assert "annotations" not in kept.model_dump(exclude_none=True)  # old surfaces read alike
    assert SurfaceTool.model_validate({"description": "x"}).annotations is None
    assert hint_changes({"readOnlyHint": True}, {"readOnlyHint": False}) == [
        "hint readOnlyHint: true → false"]
