"""An MCP server over stdio written without the SDK, so it can answer what the SDK would never
send (tests/suites/test_mcp_edges.py):

    python raw_mcp_server.py --repeat-cursor   # every tools/list page names the same nextCursor
    python raw_mcp_server.py --bad-tool        # a tool whose inputSchema is a number
    python raw_mcp_server.py --slow-start S    # sleeps S seconds before answering initialize
    python raw_mcp_server.py --garbage         # a line that is not JSON-RPC before each answer
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

args = sys.argv[1:]
TOOL = {"name": "lookup_order", "description": "Look up one order.",
        "inputSchema": {"type": "object", "properties": {"order_id": {"type": "string"}}}}


def send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def answer(request: dict[str, Any]) -> Any:
    method = request.get("method")
    if method == "initialize":
        if "--slow-start" in args:
            time.sleep(float(args[args.index("--slow-start") + 1]))
        return {"protocolVersion": request["params"]["protocolVersion"],
                "capabilities": {"tools": {}}, "serverInfo": {"name": "raw", "version": "1"}}
    if method == "tools/list":
        if "--bad-tool" in args:
            return {"tools": [TOOL, {"name": "broken", "inputSchema": 5}]}
        page: dict[str, Any] = {"tools": [TOOL]}
        if "--repeat-cursor" in args:
            page["nextCursor"] = "page-2"
        return page
    if method == "tools/call":
        return {"content": [{"type": "text", "text": "{}"}]}
    return {}


for line in sys.stdin:
    request = json.loads(line)
    if "id" not in request:
        continue  # a notification
    if "--garbage" in args:
        sys.stdout.write("this is not JSON-RPC\n")
    send({"jsonrpc": "2.0", "id": request["id"], "result": answer(request)})
