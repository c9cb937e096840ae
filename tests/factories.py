"""Small builders for suites and responses used across the tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

LOOKUP_ORDER = {
    "type": "function",
    "function": {
        "name": "lookup_order",
        "description": "Look up an order by id.",
        "parameters": {
            "type": "object",
            "properties": {
                "order_id": {"type": "string", "pattern": "^ord_[0-9]+$"},
                "include_items": {"type": "boolean"},
            },
            "required": ["order_id"],
        },
    },
}
TRACK_SHIPMENT = {
    "type": "function",
    "function": {
        "name": "track_shipment",
        "description": "Where is the parcel?",
        "parameters": {
            "type": "object",
            "properties": {"order_id": {"type": "string"}},
            "required": ["order_id"],
        },
    },
}
CANCEL_ORDER = {
    "type": "function",
    "function": {
        "name": "cancel_order",
        "description": "Cancel an order.",
        "parameters": {
            "type": "object",
            "properties": {
                "order_id": {"type": "string"},
                "reason": {"type": "string", "enum": ["changed_mind", "duplicate", "other"]},
            },
            "required": ["order_id", "reason"],
            "additionalProperties": False,
        },
    },
}
TOOLS = [LOOKUP_ORDER, TRACK_SHIPMENT, CANCEL_ORDER]


def user(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


def case(case_id: str, expect: dict[str, Any], text: str = "help", **extra: Any) -> dict:
    return {"id": case_id, "messages": user(text), "expect": expect, **extra}


def calls(*expected: tuple[str, dict[str, Any]], mode: str = "strict") -> dict[str, Any]:
    return {"type": "calls", "mode": mode,
            "calls": [{"tool": name, "args": args} for name, args in expected]}


def write_suite(root: Path, cases: list[dict], tools: list[dict] | None = None,
                name: str | None = None) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "tools.json").write_text(json.dumps(TOOLS if tools is None else tools))
    (root / "cases.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cases))
    if name:
        (root / "suite.json").write_text(json.dumps({"name": name}))
    return root


def tool_call(name: str, arguments: str | dict, call_id: str = "call_1") -> dict[str, Any]:
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments)
    return {"id": call_id, "type": "function",
            "function": {"name": name, "arguments": arguments}}


def message(*tool_calls: dict[str, Any], content: str | None = None) -> dict[str, Any]:
    return {"role": "assistant", "content": content, "tool_calls": list(tool_calls)}


def line(case_id: str, response: dict | None = None, repeat: int = 0,
         finish_reason: str = "tool_calls", **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"case_id": case_id, "repeat": repeat, **extra}
    if response is not None:
        out["response"] = response
        out["finish_reason"] = finish_reason
    return out


def write_lines(path: Path, lines: list[dict]) -> Path:
    path.write_text("".join(json.dumps(item) + "\n" for item in lines))
    return path
