"""Agents under test for tests/running/test_targets*.py, one behaviour for all three target kinds.

Each asks the loopback model (LOOPBACK_URL, its base URL) as a real agent would. A marker in the
last user message picks a misbehaviour: [crash] fails (raises, exits, answers HTTP 500), [hang]
never answers, [slowmodel] raises a TimeoutError of its own, [garbage] answers what the contract
does not allow, [loop] runs the agent's own tool loop and returns the whole transcript.
AGENT_VERSION is the version each reports; with AGENT_LOG set, each appends every request it is
asked (the hello aside) to that file, one JSON line each.

As a script: `python target_agents.py jsonl` speaks JSON Lines on stdin/stdout;
`python target_agents.py http` serves HTTP on 127.0.0.1 after printing `READY <url>`.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

HANG = 3600.0
# The agent's own tools: what its loop runs, not the suite's environment.
ORDERS = {"ord_1": {"status": "pending"}, "ord_2": {"status": "shipped"}}


def version() -> str:
    return os.environ.get("AGENT_VERSION", "1")


def log(request: dict[str, Any]) -> None:
    path = os.environ.get("AGENT_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as out:
            out.write(json.dumps(request) + "\n")


def last_user(messages: list[dict[str, Any]]) -> str:
    return next((str(m.get("content")) for m in reversed(messages) if m["role"] == "user"), "")


def ask_model(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
    body = json.dumps({"model": "agent-model", "messages": messages, "tools": tools}).encode()
    request = urllib.request.Request(
        os.environ["LOOPBACK_URL"] + "/chat/completions", data=body,
        headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        message = json.loads(answer.read())["choices"][0]["message"]
    return {key: value for key, value in message.items() if value is not None}


def run_tool(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    order = ORDERS.get(arguments.get("order_id", ""), {})
    if name == "cancel_order":
        return {"order_id": arguments["order_id"], "status": "cancelled"}
    return {"order_id": arguments.get("order_id"), **order}


def own_loop(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
    """Ask, run the calls with the agent's own tools, ask again, until an answer in words."""
    history = list(messages)
    for _ in range(5):
        message = {"role": "assistant", **ask_model(history, tools)}
        history.append(message)
        if not message.get("tool_calls"):
            break
        for call in message["tool_calls"]:
            result = run_tool(call["function"]["name"], json.loads(call["function"]["arguments"]))
            history.append({"role": "tool", "tool_call_id": call["id"],
                            "content": json.dumps(result)})
    return {"messages": history, "usage": {"prompt_tokens": 3, "completion_tokens": 2}}


def behave(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
    text = last_user(messages)
    if "[crash]" in text:
        raise RuntimeError("the agent fell over")
    if "[slowmodel]" in text:
        raise TimeoutError("the agent's model did not answer")
    if "[hang]" in text:
        time.sleep(HANG)
    if "[garbage]" in text:
        return {"answer": "forty-two"}
    if "[loop]" in text:
        return own_loop(messages, tools)
    return ask_model(messages, tools)


def answer(messages: list[dict[str, Any]], tools: list[dict[str, Any]],
           metadata: dict[str, Any]) -> Any:
    """The sync Python target."""
    assert metadata["case_id"] in last_user(messages)
    log({"messages": messages, "tools": tools, "metadata": metadata})
    return behave(messages, tools)


answer.callgate_version = version()  # type: ignore[attr-defined]


async def answer_async(messages: list[dict[str, Any]], tools: list[dict[str, Any]],
                       metadata: dict[str, Any]) -> Any:
    """The async Python target: the same, without a thread."""
    log({"messages": messages, "tools": tools, "metadata": metadata})
    if "[hang]" in last_user(messages):
        await asyncio.sleep(HANG)
    return await asyncio.to_thread(behave, messages, tools)


answer_async.callgate_version = version()  # type: ignore[attr-defined]


# Called after every answer of `answer_then_hook`: a test stops its run from here.
HOOK: list[Any] = []


async def answer_then_hook(messages: list[dict[str, Any]], tools: list[dict[str, Any]],
                           metadata: dict[str, Any]) -> Any:
    reply = await answer_async(messages, tools, metadata)
    for hook in HOOK:
        hook(metadata)
    return reply


answer_then_hook.callgate_version = version()  # type: ignore[attr-defined]


def jsonl() -> None:
    for line in sys.stdin:
        request = json.loads(line)
        if "hello" in request:
            reply: Any = {"version": version()}
            print(json.dumps(reply), flush=True)
            continue
        log(request)
        if "[crash]" in last_user(request["messages"]):
            print("fatal: the agent fell over", file=sys.stderr, flush=True)
            sys.exit(3)
        elif "[garbage]" in last_user(request["messages"]):
            print("this is not JSON", flush=True)
            continue
        else:
            reply = behave(request["messages"], request["tools"])
        print(json.dumps(reply), flush=True)


class Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        status, raw = 200, b""
        if "hello" not in request:
            log(request)
        if "hello" in request:
            raw = json.dumps({"version": version()}).encode()
        elif "[crash]" in last_user(request["messages"]):
            status, raw = 500, b"internal error"
        elif "[garbage]" in last_user(request["messages"]):
            raw = b"<html>not JSON</html>"
        else:
            raw = json.dumps(behave(request["messages"], request["tools"])).encode()
        self.send_response(status)
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def log_message(self, *args: Any) -> None:
        pass


def serve_http() -> ThreadingHTTPServer:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    return server


if __name__ == "__main__":
    if sys.argv[1] == "jsonl":
        jsonl()
    else:
        http = serve_http()
        print(f"READY http://127.0.0.1:{http.server_port}/agent", flush=True)
        http.serve_forever()


def slow_sync(messages: list[dict[str, Any]], tools: list[dict[str, Any]],
              metadata: dict[str, Any]) -> dict[str, Any]:
    """A sync agent that takes 0.2 s and answers with the expected call, asking no model."""
    time.sleep(0.2)
    order = last_user(messages).split()[-1].rstrip("?")
    return {"role": "assistant", "content": None, "tool_calls": [{
        "id": "c1", "type": "function",
        "function": {"name": "lookup_order", "arguments": json.dumps({"order_id": order})}}]}
