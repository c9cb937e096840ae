"""A small MCP server over stdio for the tests: an order store whose state the case gives in
CALLGATE_STATE, read back by its read_state tool.

    python mcp_server.py                      # the store
    python mcp_server.py --crash              # dies before it answers anything
    python mcp_server.py --cancel-doc TEXT    # cancel_order described as TEXT
    python mcp_server.py --bad-schema         # one more tool whose inputSchema is not Draft 7
    python mcp_server.py --env-file PATH      # writes the variables it was started with to PATH
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

args = sys.argv[1:]
if "--crash" in args:
    print("mcp_server: cannot open the order database", file=sys.stderr)
    sys.exit(3)

if "--env-file" in args:
    with open(args[args.index("--env-file") + 1], "a", encoding="utf-8") as out:
        out.write(json.dumps(dict(os.environ)) + "\n")

cancel_doc = "Cancel an order that has not shipped yet."
if "--cancel-doc" in args:
    cancel_doc = args[args.index("--cancel-doc") + 1]

STATE: dict[str, Any] = json.loads(os.environ.get("CALLGATE_STATE") or '{"orders": {}}')
app = MCPServer("orders")


def _order(order_id: str) -> dict[str, Any]:
    order = STATE["orders"].get(order_id)
    if order is None:
        raise ToolError(f"no order {order_id}")
    return order


@app.tool(description="Look up one order by its id.")
def lookup_order(order_id: str) -> str:
    return json.dumps({"order_id": order_id, "status": _order(order_id)["status"]})


@app.tool(description=cancel_doc)
def cancel_order(order_id: str, reason: str) -> str:
    order = _order(order_id)
    if order["status"] == "shipped":
        raise ToolError(f"{order_id} is shipped")
    order["status"] = "cancelled"
    order["reason"] = reason
    return json.dumps({"order_id": order_id, "status": "cancelled"})


@app.tool(description="Track an order's parcel.")
def track_shipment(order_id: str) -> str:
    if order_id == "ord_hang":
        time.sleep(60)  # a hung server: the client's timeout ends it
    if order_id == "ord_die":
        os._exit(1)  # the server dies mid-conversation
    return f"{order_id} is in transit"


@app.tool(description="The store's state, for callgate's final-state checks.")
def read_state() -> str:
    return json.dumps(STATE)


if "--close-tool" in args:
    @app.tool(description="Close an order's support ticket.")
    def close(order_id: str) -> str:
        return json.dumps({"order_id": order_id, "ticket": "closed"})


if "--bad-schema" in args:
    @app.tool(description="A tool whose schema no validator takes.")
    def broken(x: int) -> str:
        return "never"

    original = app.list_tools

    async def list_tools() -> Any:
        tools = await original()
        for tool in tools:
            if tool.name == "broken":
                tool.input_schema = {"type": "object", "properties": {"x": {"type": "integer",
                                                                            "minimum": "zero"}}}
        return tools

    app.list_tools = list_tools  # type: ignore[method-assign]

app.run("stdio")
