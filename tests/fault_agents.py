"""An agent target whose own tools answer the faults callgate schedules for them (the
contract's `metadata.faults`, applied with callgate.suites.faults.TargetFaults), for
tests/suites/test_faults_targets.py. Its loop asks no model: it looks ord_1 up, retries once
when the answer is a fault, then says what it found. A `[deaf]` marker in the user message
makes it ignore the faults (its tools answer as if none were scheduled).

As a script: `python fault_agents.py jsonl` speaks JSON Lines; `python fault_agents.py http`
serves HTTP on 127.0.0.1 after printing `READY <url>`."""

from __future__ import annotations

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from callgate.suites.faults import TargetFaults

ORDER = {"order_id": "ord_1", "status": "pending"}


def is_fault(content: str) -> bool:
    try:
        value = json.loads(content)
    except ValueError:
        return True
    return isinstance(value, dict) and "error" in value


def answer(messages: list[dict[str, Any]], tools: list[dict[str, Any]],
           metadata: dict[str, Any]) -> dict[str, Any]:
    deaf = "[deaf]" in str(messages[-1].get("content"))
    tool = TargetFaults({} if deaf else metadata)
    transcript: list[dict[str, Any]] = []
    for attempt in range(2):
        call_id = f"c{attempt}"
        transcript.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": call_id, "type": "function",
             "function": {"name": "lookup_order", "arguments": '{"order_id": "ord_1"}'}}]})
        result = tool("lookup_order", ORDER)
        content = result if isinstance(result, str) else json.dumps(result)
        transcript.append({"role": "tool", "tool_call_id": call_id, "content": content})
        if not is_fault(content):
            break
    words = "ord_1 is pending" + (" (the first lookup failed, so I tried again)."
                                  if len(transcript) > 2 else ".")
    transcript.append({"role": "assistant", "content": words})
    return {"messages": transcript}


answer.callgate_version = "1"  # type: ignore[attr-defined]


def reply_to(request: dict[str, Any]) -> dict[str, Any]:
    if "hello" in request:
        return {"version": "1"}
    return answer(request["messages"], request["tools"], request["metadata"])


class Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        raw = json.dumps(reply_to(request)).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def log_message(self, *args: Any) -> None:
        pass


if __name__ == "__main__":
    if sys.argv[1] == "jsonl":
        for line in sys.stdin:
            print(json.dumps(reply_to(json.loads(line))), flush=True)
    else:
        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        print(f"READY http://127.0.0.1:{server.server_port}/agent", flush=True)
        server.serve_forever()
