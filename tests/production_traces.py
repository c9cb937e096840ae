"""Production conversations run through the real instrumentations (importers/test_traces.py's
`record`: the openai client against the loopback server, its spans exported as the
Collector's OTLP JSON), for the production-sample tests: no cases, no expected answers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from importers.test_traces import RESULTS, TOOLS, Traced, _body, _spans_of, record
from loopback import Loopback, Reply, error, tool_call

NS_PER_DAY = 86_400 * 10**9


def _user(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


# What users asked in production, and (SCRIPT) what the model answered.
CONVERSATIONS = [
    {"id": "valid", "messages": _user("What is the weather in Paris?")},
    {"id": "invalid", "messages": _user("What is the weather in Oslo?")},
    {"id": "unknown", "messages": _user("Close my account now")},
    {"id": "policy", "messages": _user("What is the weather in Atlantis?")},
    {"id": "chat", "messages": _user("Say hello to me")},
    {"id": "order", "messages": _user("Where is my order ord_1?"), "tool_results": RESULTS},
    {"id": "failed", "messages": _user("What is the weather in Rome?")},
]
SCRIPT: dict[str, list[dict[str, Any]]] = {
    "weather in Paris": [_body(calls=[tool_call("get_weather", {"city": "Paris"}, "c1")])],
    "weather in Oslo": [_body(calls=[tool_call("get_weather", {"town": "Oslo"}, "c1")])],
    "Close my account": [_body(calls=[tool_call("delete_account", {}, "c1")])],
    "weather in Atlantis": [_body(calls=[tool_call("get_weather", {"city": "Atlantis"}, "c1")])],
    "Say hello": [_body(content="Hello!")],
    "order ord_1": [_body(calls=[tool_call("lookup_order", {"order_id": "ord_1"}, "c1")]),
                    _body(calls=[tool_call("track_shipment", {"order_id": "ord_1"}, "c2")]),
                    _body(content="It is in Brno.")],
}
# The suite.json policies production is checked on: Atlantis is no city to send.
POLICIES = {"forbidden_values": {"get_weather": {"city": "Atlantis"}}}


def script(server: Loopback) -> None:
    for match, bodies in SCRIPT.items():
        server.script_turns(match, *(Reply(body=body) for body in bodies))
    server.script("weather in Rome", error(500, "upstream overloaded"))


def record_production(instrumentation: str, monkeypatch: pytest.MonkeyPatch,
                      conversations: list[dict[str, Any]] = CONVERSATIONS) -> Traced:
    return record(instrumentation, monkeypatch, conversations, script)


def write_folder(root: Path, *, tools: list[dict[str, Any]] | None = TOOLS,
                 policies: dict[str, Any] | None = POLICIES) -> Path:
    """A production folder: tools.json (None: none) and suite.json with the policies."""
    root.mkdir(parents=True, exist_ok=True)
    if tools is not None:
        (root / "tools.json").write_text(json.dumps(tools))
    if policies is not None:
        (root / "suite.json").write_text(json.dumps({"name": "prod", "policies": policies}))
    return root


def shifted(traced: Traced, days: int) -> Traced:
    """The same export with every span moved by whole days (yesterday's export)."""
    for document in traced.documents:
        for span in _spans_of(document):
            for key in ("startTimeUnixNano", "endTimeUnixNano"):
                span[key] = str(int(span[key]) + days * NS_PER_DAY)
    return traced


def trace_ids(traced: Traced) -> dict[str, str]:
    """Each conversation's trace id, by the callgate.case_id its agent span names."""
    found = {}
    for document in traced.documents:
        for span in _spans_of(document):
            for attribute in span["attributes"]:
                if attribute["key"] == "callgate.case_id":
                    found[attribute["value"]["stringValue"]] = span["traceId"]
    return found
