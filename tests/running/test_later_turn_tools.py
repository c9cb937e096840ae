"""The tools a later user turn adds are sent as the first turn's are: without the MCP hints
(`annotations`) callgate keeps beside `function` in tools.json (an OpenAI tool object holds
`type` and `function` only, and a strict endpoint refuses more)."""

from __future__ import annotations

import copy
from pathlib import Path

from multiturn import STATE, TOOLS, env_suite

from callgate.running.plan import later_turns
from callgate.suites.suite import load_suite


def test_an_added_tool_is_sent_without_its_annotations(tmp_path: Path) -> None:
    tools = copy.deepcopy(TOOLS)
    for tool in tools:
        tool["annotations"] = {"readOnlyHint": tool["function"]["name"] == "lookup_order"}
    case = {"id": "two", "messages": [{"role": "user", "content": "[two] look up ord_1"}],
            "tools": ["lookup_order"], "state": STATE,
            "expect": {"type": "final_state", "calls": [
                {"tool": "cancel_order", "args": {"order_id": "ord_1", "reason": "duplicate"}}]},
            "user_turns": [{"messages": [{"role": "user", "content": "[two-2] cancel it"}],
                            "add_tools": ["cancel_order"]}]}
    suite = load_suite(env_suite(tmp_path / "shop", [case], tools=tools))
    assert all("annotations" in tool for tool in suite.raw_tools)  # kept in tools.json
    (turn,) = later_turns(suite, "two")
    assert [set(tool) for tool in turn.tools] == [{"type", "function"}]
    assert set(suite.offered_tools(suite.cases["two"])[0]) == {"type", "function"}
