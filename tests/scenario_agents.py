"""An agent under test for the scenario cases against a target (tests/running/
test_target_scenarios.py): a Python target with its own loop and its own order store, no model.
It asks which order and why until a user message names both (`ord_N`, and `duplicate` or
`other`), then cancels that order with its own tool and says so. With `[sloppy]` in the
case's first message it cancels for the wrong reason: the agent's own mistake. Every request it
is asked is kept in ASKED, so a test counts them."""

from __future__ import annotations

import json
import re
from typing import Any

ASKED: list[dict[str, Any]] = []
REASONS = ("duplicate", "other")


def _said(messages: list[dict[str, Any]]) -> tuple[str | None, str | None]:
    """The order and the reason the user's messages name (the latest of each)."""
    order = reason = None
    for message in messages:
        if message.get("role") != "user":
            continue
        text = str(message.get("content"))
        orders = re.findall(r"\bord_\d+\b", text)
        order = orders[-1] if orders else order
        reason = next((r for r in REASONS if r in text), reason)
    return order, reason


def answer(messages: list[dict[str, Any]], tools: list[dict[str, Any]],
           metadata: dict[str, Any]) -> Any:
    ASKED.append({"messages": messages, "metadata": metadata})
    if any(m.get("tool_calls") for m in messages if m.get("role") == "assistant"):
        return {"role": "assistant", "content": "Anything else?"}
    order, reason = _said(messages)
    if order is None or reason is None:
        return {"role": "assistant", "content": "Which order is it, and why?"}
    if "[sloppy]" in str(messages[0].get("content")):
        reason = "other" if reason == "duplicate" else "duplicate"
    call_id = f"call_{len(ASKED)}"
    arguments = {"order_id": order, "reason": reason}
    return {"messages": [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": call_id, "type": "function",
             "function": {"name": "cancel_order", "arguments": json.dumps(arguments)}}]},
        {"role": "tool", "tool_call_id": call_id,
         "content": json.dumps({"order_id": order, "status": "cancelled"})},
        {"role": "assistant", "content": f"{order} is cancelled."}]}


answer.callgate_version = "1"  # type: ignore[attr-defined]
