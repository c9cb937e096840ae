"""An example agent under test for `callgate run --target` (README, "Try an agent").

`answer` is an order-support agent with its own loop: it asks an OpenAI-compatible model (at
ORDER_AGENT_API_BASE, model ORDER_AGENT_MODEL, key in ORDER_AGENT_API_KEY if the endpoint needs
one), runs the calls the model makes on its own backend (here the example's order store, seeded
with the case's state), hands the results back, and returns the whole transcript when the model
answers in words. callgate then checks that transcript: trajectories, and final states by
running the calls again on a fresh order store.

`python -m callgate.examples.order_agent` runs it on the order_store example against a loopback
"model" on 127.0.0.1 that replays the hand-written turns of the example's release 2026.11, so
no key and no network are needed: a stand-in for a real model, not one.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import threading
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib.resources import as_file, files
from pathlib import Path
from typing import Any, ClassVar

__version__ = "1"  # callgate keys its cache by this: change it when the agent changes

API_BASE_ENV = "ORDER_AGENT_API_BASE"
MODEL_ENV = "ORDER_AGENT_MODEL"
KEY_ENV = "ORDER_AGENT_API_KEY"
SUITE = "examples/order_store"
REPLAYED = "responses-2026.11.jsonl"
TARGET = "python:callgate.examples.order_agent:answer"


def _suite_path() -> Path:
    with as_file(files("callgate") / SUITE) as path:
        return Path(path)


def _order_store(state: dict[str, Any]) -> Any:
    """The agent's backend: the example's OrderStore (env.py), loaded from its file."""
    spec = importlib.util.spec_from_file_location("order_store_env", _suite_path() / "env.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.OrderStore(state)


def _ask_model(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
    body = {"model": os.environ.get(MODEL_ENV, "example-model"), "messages": messages,
            "tools": tools}
    headers = {"Content-Type": "application/json"}
    if os.environ.get(KEY_ENV):
        headers["Authorization"] = f"Bearer {os.environ[KEY_ENV]}"
    request = urllib.request.Request(os.environ[API_BASE_ENV].rstrip("/") + "/chat/completions",
                                     data=json.dumps(body).encode(), headers=headers)
    with urllib.request.urlopen(request, timeout=60) as reply:
        message = json.loads(reply.read())["choices"][0]["message"]
    return {"role": "assistant", "content": message.get("content"),
            **({"tool_calls": message["tool_calls"]} if message.get("tool_calls") else {})}


def _run_call(store: Any, call: dict[str, Any]) -> Any:
    function = call["function"]
    try:
        arguments = json.loads(function["arguments"] or "{}")
        return getattr(store, function["name"])(**arguments)
    except Exception as exc:  # the model is told what went wrong, as a tool result
        return {"error": str(exc)}


def answer(messages: list[dict[str, Any]], tools: list[dict[str, Any]],
           metadata: dict[str, Any]) -> dict[str, Any]:
    """The agent's loop: ask, run the calls, ask again, until an answer in words."""
    store = _order_store(metadata.get("state") or {})
    history = list(messages)
    for _ in range(metadata.get("max_turns", 10)):
        message = _ask_model(history, tools)
        history.append(message)
        if not message.get("tool_calls"):
            break
        for call in message["tool_calls"]:
            history.append({"role": "tool", "tool_call_id": call["id"],
                            "content": json.dumps(_run_call(store, call))})
    return {"messages": history}


class _Replay(BaseHTTPRequestHandler):
    """Chat completions from recorded turns: the case whose messages start the request, and
    the turn after as many assistant messages as the request holds."""

    cases: ClassVar[list[tuple[list[dict[str, Any]], list[dict[str, Any]]]]] = []

    def do_POST(self) -> None:
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        messages = request["messages"]
        turns = next((t for start, t in self.cases if messages[:len(start)] == start), None)
        turn = sum(m["role"] == "assistant" for m in messages)
        if turns is None or turn >= len(turns):
            message: dict[str, Any] = {"role": "assistant", "content": "I cannot help with that."}
        else:
            message = turns[turn]
        body = json.dumps({"choices": [{"index": 0, "message": message, "finish_reason":
                                        "tool_calls" if message.get("tool_calls") else "stop"}],
                           "model": "replay"}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


def replay_model() -> ThreadingHTTPServer:
    """The loopback model, serving from a daemon thread; its base URL ends in /v1."""
    root = _suite_path()
    cases = {json.loads(line)["id"]: json.loads(line)["messages"]
             for line in (root / "cases.jsonl").read_text().splitlines() if line.strip()}
    replayed = [json.loads(line) for line in (root / REPLAYED).read_text().splitlines()]
    _Replay.cases = [(cases[r["case_id"]], r["turns"]) for r in replayed if r["repeat"] == 0]
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Replay)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def main(argv: list[str]) -> None:
    """Run the example agent as a Python target on the order_store example; `argv` are more
    options for `callgate run` (e.g. --db)."""
    from callgate.cli import entry

    server = replay_model()
    os.environ[API_BASE_ENV] = f"http://127.0.0.1:{server.server_port}/v1"
    print(f"The example agent ({TARGET}) against a loopback model on "
          f"{os.environ[API_BASE_ENV]} that replays the example's hand-written turns:",
          flush=True)
    sys.argv = ["callgate", "run", str(_suite_path()), "--target", TARGET, "--repeats", "1",
                "--release", "try-agent", *argv]
    entry()


if __name__ == "__main__":
    main(sys.argv[1:])
