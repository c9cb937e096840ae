"""Python targets that misbehave as user code can, for tests/running/test_target_isolation.py:
each answers the expected lookup call (asking no model) unless its misbehaviour stops it."""

from __future__ import annotations

import json
import sys
import threading
from typing import Any

RELEASE = threading.Event()  # what a blocking agent waits for; the test sets it when done


def call(messages: list[dict[str, Any]]) -> dict[str, Any]:
    order = str(messages[-1]["content"]).split()[-1].rstrip("?")
    return {"role": "assistant", "content": None, "tool_calls": [{
        "id": "c1", "type": "function",
        "function": {"name": "lookup_order", "arguments": json.dumps({"order_id": order})}}]}


async def exits_async(messages: list[dict[str, Any]], tools: Any, metadata: Any) -> Any:
    sys.exit(0)


def exits_sync(messages: list[dict[str, Any]], tools: Any, metadata: Any) -> Any:
    sys.exit(3)


def prints(messages: list[dict[str, Any]], tools: Any, metadata: Any) -> Any:
    print("the agent talks on stdout", flush=True)
    return call(messages)


def closes_stdout(messages: list[dict[str, Any]], tools: Any, metadata: Any) -> Any:
    sys.stdout.close()
    return call(messages)


def appends(messages: list[dict[str, Any]], tools: Any, metadata: Any) -> Any:
    messages.append(call(messages))  # the history, grown in place, as some frameworks do
    return messages


async def blocks_loop(messages: list[dict[str, Any]], tools: Any, metadata: Any) -> Any:
    if "[block]" in str(messages[-1]["content"]):
        RELEASE.wait(120)  # blocks its event loop: no await
    return call(messages)


def bad_bookkeeping(messages: list[dict[str, Any]], tools: Any, metadata: Any) -> Any:
    return {"message": call(messages), "cost": float("nan"),
            "usage": {"prompt_tokens": float("inf"), "completion_tokens": 3}}


for agent in (exits_async, exits_sync, prints, closes_stdout, appends, blocks_loop,
              bad_bookkeeping):
    agent.callgate_version = "1"  # type: ignore[attr-defined]
del agent
