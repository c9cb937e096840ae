"""Traces in (issue 39 point 1): the real instrumentations (opentelemetry-instrumentation-openai-v2
with the GenAI conventions, openinference-instrumentation-openai) around the `openai` client
talking to the loopback server, exported with the SDK's in-memory exporter and encoded as the
Collector's file exporter writes OTLP JSON, then scored: the same verdicts and figures as the
same conversations written in callgate's own recorded format."""

from __future__ import annotations

import base64
import contextlib
import json
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from conftest import write_suite
from loopback import Loopback, Reply, completion, error, tool_call

from callgate.errors import InputError
from callgate.importers.traces import read_trace_file, trace_lines
from callgate.scoring.pipeline import score_file
from callgate.scoring.traces import score_traces
from callgate.store.db import Store
from callgate.suites.suite import Suite, load_suite

# openai and the OpenTelemetry SDK are imported by the tests that record (1-2 s CPU), not
# while collecting: every xdist worker collects this file, one runs its recording tests.

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}}
LOOKUP = {"type": "function", "function": {
    "name": "lookup_order", "description": "Look up an order.",
    "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}},
                   "required": ["order_id"]}}}
TRACK = {"type": "function", "function": {
    "name": "track_shipment", "description": "Track an order's parcel.",
    "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}},
                   "required": ["order_id"]}}}
TOOLS = [WEATHER, LOOKUP, TRACK]
RESULTS = [{"tool": "lookup_order", "args": {"order_id": "ord_1"}, "result": {"status": "sent"}},
           {"tool": "track_shipment", "args": {"order_id": "ord_1"}, "result": {"at": "Brno"}},
           {"tool": "lookup_order", "args": {"order_id": "ord_2"}, "result": {"status": "paid"}},
           {"tool": "track_shipment", "args": {"order_id": "ord_2"}, "result": {"at": "Linz"}}]


def _user(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


def _calls(*calls: tuple[str, dict[str, str]]) -> dict[str, Any]:
    return {"type": "calls", "mode": "strict",
            "calls": [{"tool": tool, "args": args} for tool, args in calls]}


CASES = [
    {"id": "greet", "messages": _user("Say hello to me"), "tags": ["no-tool"],
     "expect": {"type": "no_call"}},
    {"id": "weather", "messages": _user("What is the weather in Paris?"), "tags": ["clean"],
     "expect": _calls(("get_weather", {"city": "Paris"}))},
    {"id": "weather-wrong", "messages": _user("What is the weather in Oslo?"),
     "expect": _calls(("get_weather", {"city": "Oslo"}))},
    {"id": "streamed", "messages": _user("Stream me the weather in Rome"),
     "expect": _calls(("get_weather", {"city": "Rome"}))},
    {"id": "order", "messages": _user("Where is my order ord_1?"), "tool_results": RESULTS,
     "expect": _calls(("lookup_order", {"order_id": "ord_1"}),
                      ("track_shipment", {"order_id": "ord_1"}))},
    {"id": "two-turns", "messages": _user("Look up ord_2 please"), "tool_results": RESULTS,
     "user_turns": [{"messages": _user("Now track ord_2")}],
     "expect": _calls(("lookup_order", {"order_id": "ord_2"}),
                      ("track_shipment", {"order_id": "ord_2"}))},
]
STREAMED = {"streamed"}
NO_ATTRIBUTE = {"greet"}  # found by its first user message


def _body(*, calls: list[dict[str, Any]] | None = None, content: str | None = None,
          prompt: int = 30, completion_tokens: int = 5) -> dict[str, Any]:
    body = completion(calls=calls, content=content, provider=None, cost=None)
    body["usage"] = {"prompt_tokens": prompt, "completion_tokens": completion_tokens,
                     "total_tokens": prompt + completion_tokens}
    return body


def _sse(body: dict[str, Any]) -> Reply:
    """A completion body as the server-sent events a streamed answer is."""
    choice = body["choices"][0]
    head = {"id": body["id"], "object": "chat.completion.chunk", "created": 1,
            "model": body["model"]}
    delta: dict[str, Any] = {"role": "assistant", "content": choice["message"]["content"]}
    chunks = [{**head, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}]
    for index, call in enumerate(choice["message"].get("tool_calls") or []):
        half = len(call["function"]["arguments"]) // 2
        for part, text in enumerate((call["function"]["arguments"][:half],
                                     call["function"]["arguments"][half:])):
            piece: dict[str, Any] = {"index": index, "function": {"arguments": text}}
            if not part:
                piece.update(id=call["id"], type="function")
                piece["function"]["name"] = call["function"]["name"]
            chunks.append({**head, "choices": [{"index": 0, "delta": {"tool_calls": [piece]},
                                                "finish_reason": None}]})
    chunks.append({**head, "choices": [{"index": 0, "delta": {},
                                        "finish_reason": choice["finish_reason"]}]})
    chunks.append({**head, "choices": [], "usage": body["usage"]})
    raw = "".join(f"data: {json.dumps(chunk)}\n\n" for chunk in chunks) + "data: [DONE]\n\n"
    return Reply(raw=raw)


def _call(name: str, order_or_city: str, call_id: str) -> dict[str, Any]:
    key = "city" if name == "get_weather" else "order_id"
    return tool_call(name, {key: order_or_city}, call_id)


# What the model answers in each case, turn by turn (each user turn's answers, keyed by the
# text of the user message it answers).
SCRIPT: dict[str, list[dict[str, Any]]] = {
    "Say hello": [_body(content="Hello!")],
    "weather in Paris": [_body(calls=[_call("get_weather", "Paris", "c1")])],
    "weather in Oslo": [_body(calls=[_call("get_weather", "Bergen", "c1")])],
    "weather in Rome": [_body(calls=[_call("get_weather", "Rome", "c1")], prompt=11)],
    "order ord_1": [_body(calls=[_call("lookup_order", "ord_1", "c1")]),
                    _body(calls=[_call("track_shipment", "ord_1", "c2")], prompt=60),
                    _body(content="It is in Brno.", prompt=90, completion_tokens=9)],
    "Look up ord_2": [_body(calls=[_call("lookup_order", "ord_2", "c1")]),
                      _body(content="It is paid.", prompt=50)],
    "track ord_2": [_body(calls=[_call("track_shipment", "ord_2", "c2")], prompt=70),
                    _body(content="It is in Linz.", prompt=99)],
}


def _script(server: Loopback) -> None:
    for match, bodies in SCRIPT.items():
        replies = [_sse(b) if match == "weather in Rome" else Reply(body=b) for b in bodies]
        server.script_turns(match, *replies)


def _result(case: dict[str, Any], call: Any) -> str:
    args = json.loads(call.function.arguments)
    for entry in case.get("tool_results") or []:
        if entry["tool"] == call.function.name and all(args.get(k) == v
                                                        for k, v in entry["args"].items()):
            return json.dumps(entry["result"])
    return json.dumps({"error": "no result scripted for this call"})


def _ask(client: Any, messages: list[dict[str, Any]], stream: bool) -> Any:
    """One model call; a streamed one is read to its end, as an agent reads it."""
    if not stream:
        return client.chat.completions.create(model="test/model", messages=messages,
                                              tools=TOOLS)
    chunks = client.chat.completions.create(model="test/model", messages=messages, tools=TOOLS,
                                            stream=True, stream_options={"include_usage": True})
    calls: dict[int, dict[str, Any]] = {}
    for chunk in chunks:
        for choice in chunk.choices:
            for piece in choice.delta.tool_calls or []:
                call = calls.setdefault(piece.index, {"id": piece.id, "type": "function",
                                                      "function": {"name": "", "arguments": ""}})
                call["function"]["name"] += piece.function.name or ""
                call["function"]["arguments"] += piece.function.arguments or ""
    from openai.types.chat import ChatCompletionMessage

    message = ChatCompletionMessage.model_validate(
        {"role": "assistant", "content": None, "tool_calls": list(calls.values())})
    return type("Streamed", (), {"message": message})()


def converse(client: Any, tracer: Any, case: dict[str, Any]) -> None:
    """The team's agent: a loop over the model's calls and the case's tool results, one user
    turn after another, inside one span (one trace) that names the case."""
    attributes = {} if case["id"] in NO_ATTRIBUTE else {"callgate.case_id": case["id"]}
    with tracer.start_as_current_span("agent.turn", attributes=attributes):
        messages = list(case["messages"])
        for user_turn in [None, *(case.get("user_turns") or [])]:
            if user_turn is not None:
                messages.extend(user_turn["messages"])
            for _ in range(case.get("max_turns", 10)):
                reply = _ask(client, messages, case["id"] in STREAMED)
                message = reply.message if hasattr(reply, "message") else \
                    reply.choices[0].message
                messages.append(message.model_dump(exclude_none=True))
                if not message.tool_calls or "tool_results" not in case:
                    break  # a single-answer case: the agent asks the model once
                for call in message.tool_calls:
                    messages.append({"role": "tool", "tool_call_id": call.id,
                                     "content": _result(case, call)})


def own_format(case: dict[str, Any]) -> dict[str, Any]:
    """The same conversation as callgate's own recorded line."""
    turns = []
    ends = []
    for text in [case["messages"][0]["content"],
                 *(t["messages"][0]["content"] for t in case.get("user_turns") or [])]:
        match = next(m for m in SCRIPT if m in text)
        turns.extend(SCRIPT[match])
        ends.append(len(turns))
    line: dict[str, Any] = {"case_id": case["id"], "repeat": 0}
    if "tool_results" in case:
        line["turns"] = turns
        if "user_turns" in case:
            line["user_turn_ends"] = ends
    else:
        (line["response"],) = turns
    return line


def _hex(value: str) -> str:
    return base64.b64decode(value).hex()


def otlp_json(spans: Any, *, hex_ids: bool = True) -> list[dict[str, Any]]:
    """The spans as the Collector's file exporter writes them: OTLP/JSON, one export request
    a line (here one per trace), trace and span ids in hex. Without `hex_ids`: protobuf's own
    JSON mapping (ids in base64)."""
    from google.protobuf.json_format import MessageToDict
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    by_trace: dict[int, list[Any]] = {}
    for span in spans:
        by_trace.setdefault(span.context.trace_id, []).append(span)
    documents = []
    for group in by_trace.values():
        document = MessageToDict(encode_spans(group), use_integers_for_enums=True)
        if hex_ids:
            for resource in document["resourceSpans"]:
                for scope in resource["scopeSpans"]:
                    for span in scope["spans"]:
                        for key in ("traceId", "spanId", "parentSpanId"):
                            if key in span:
                                span[key] = _hex(span[key])
        documents.append(document)
    return documents


@dataclass
class Traced:
    instrumentation: str
    documents: list[dict[str, Any]]
    spans: list[Any]

    def write(self, path: Path) -> Path:
        path.write_text("".join(json.dumps(d) + "\n" for d in self.documents))
        return path


def record(instrumentation: str, monkeypatch: pytest.MonkeyPatch,
           cases: list[dict[str, Any]] = CASES,
           script: Callable[[Loopback], None] = _script) -> Traced:
    """Run every case through the real instrumentation and export what it wrote."""
    openai = pytest.importorskip("openai")
    trace_sdk = pytest.importorskip("opentelemetry.sdk.trace")
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    if instrumentation == "genai":
        # Content on the span needs the latest conventions (set here, in the test only).
        monkeypatch.setenv("OTEL_SEMCONV_STABILITY_OPT_IN", "gen_ai_latest_experimental")
        monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "span_only")
        from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
    else:
        from openinference.instrumentation.openai import (  # type: ignore[no-redef]
            OpenAIInstrumentor,
        )
    exporter = InMemorySpanExporter()
    provider = trace_sdk.TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        with Loopback() as server:
            script(server)
            client = openai.OpenAI(base_url=server.base_url, api_key="sk-test-not-a-key",
                                   max_retries=0)
            tracer = provider.get_tracer("team-agent")
            for case in cases:
                # An agent that gives up on a failed call: its trace says the call failed.
                with contextlib.suppress(openai.APIError):
                    converse(client, tracer, case)
    finally:
        instrumentor.uninstrument()
    spans = list(exporter.get_finished_spans())
    return Traced(instrumentation, otlp_json(spans), spans)


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> Suite:
    return load_suite(write_suite(tmp_path_factory.mktemp("suite") / "s", CASES, TOOLS))


@pytest.fixture(params=["genai", "openinference"])
def traced(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[Traced]:
    yield record(request.param, monkeypatch)


def _figures(result: Any) -> dict[str, Any]:
    scores = result.scores.model_dump()
    for key in ("latency_p50_ms", "latency_p95_ms", "latency_per_right_ms"):
        scores.pop(key)
    return scores


def test_traces_score_as_the_same_conversations_recorded(
        traced: Traced, suite: Suite, tmp_path: Path) -> None:
    trace_file = traced.write(tmp_path / "traces.jsonl")
    own = tmp_path / "answers.jsonl"
    own.write_text("".join(json.dumps(own_format(c)) + "\n" for c in CASES))
    with Store(tmp_path / "a.db") as store:
        from_traces = score_traces(suite, trace_file, store, model="m", release="traces")
    with Store(tmp_path / "b.db") as store:
        recorded = score_file(suite, own, store, model="m", release="own")
    verdicts = {(v.case_id, v.repeat): v.model_dump() for v in from_traces.verdicts}
    assert verdicts == {(v.case_id, v.repeat): v.model_dump() for v in recorded.verdicts}
    assert _figures(from_traces) == _figures(recorded)
    # Not vacuous: the conversations hold right and wrong answers, several turns, a stream.
    by_case = {v.case_id: v for v in from_traces.verdicts}
    assert set(by_case) == {c["id"] for c in CASES}
    assert by_case["weather-wrong"].arguments == "wrong_value"
    assert all(by_case[c].right_arguments for c in ("greet", "weather", "streamed", "order",
                                                    "two-turns"))
    assert from_traces.scores.prompt_tokens == sum(
        b["usage"]["prompt_tokens"] for bodies in SCRIPT.values() for b in bodies)
    assert from_traces.scores.figures.calls_per_task == pytest.approx(7 / 6)


def test_a_trace_keeps_its_id_latency_and_order_of_calls(traced: Traced, suite: Suite,
                                                         tmp_path: Path) -> None:
    trace_file = traced.write(tmp_path / "traces.jsonl")
    loops = frozenset(c["id"] for c in CASES if "tool_results" in c)
    lines = {line["case_id"]: line for line in trace_lines(trace_file, suite.cases, loops=loops)}
    span_traces = {f"{s.context.trace_id:032x}" for s in traced.spans}
    assert {line["trace_id"] for line in lines.values()} == span_traces
    order = lines["order"]
    assert [t["tool_calls"][0]["function"]["name"] for t in order["turns"][:2]] == [
        "lookup_order", "track_shipment"]
    assert lines["two-turns"]["user_turn_ends"] == [2, 4]
    model_spans = [s for s in traced.spans if s.name != "agent.turn"
                   and f"{s.context.trace_id:032x}" == order["trace_id"]]
    assert len(model_spans) == 3
    assert order["latency_ms"] == pytest.approx(
        sum((s.end_time - s.start_time) / 1e6 for s in model_spans), abs=0.01)
    with Store(tmp_path / "a.db") as store:
        result = score_traces(suite, trace_file, store, model="m", release="r")
    with sqlite3.connect(tmp_path / "a.db") as db:
        bodies = [json.loads(body) for (body,) in db.execute(
            "SELECT body FROM responses WHERE run = ?", (result.run_id,))]
    assert {b["trace_id"] for b in bodies} == span_traces


def test_protobuf_json_ids_in_base64_read_too(suite: Suite, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    traced = record("openinference", monkeypatch, CASES[:2])
    path = tmp_path / "t.json"
    # One document for the whole file, as a single JSON export is.
    spans = otlp_json(traced.spans, hex_ids=False)
    path.write_text(json.dumps({"resourceSpans": [r for d in spans
                                                  for r in d["resourceSpans"]]}))
    traces = read_trace_file(path)
    assert {t.trace_id for t in traces} == {f"{s.context.trace_id:032x}" for s in traced.spans}


def _spans_of(document: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for resource in document["resourceSpans"]:
        for scope in resource["scopeSpans"]:
            yield from scope["spans"]


def _model_span(traced: Traced) -> dict[str, Any]:
    return next(s for d in traced.documents for s in _spans_of(d) if s["name"] != "agent.turn")


@pytest.mark.parametrize(("instrumentation", "key", "value", "says"), [
    ("genai", "gen_ai.operation.name", "dance", "gen_ai.operation.name 'dance'"),
    ("genai", "gen_ai.output.messages", None, "captured no content"),
    ("genai", "gen_ai.output.messages", '[{"role": "assistant", "parts": [{"type": "blob"}]}]',
     "output part of type 'blob'"),
    ("openinference", "openinference.span.kind", "WEIRD", "openinference.span.kind 'WEIRD'"),
    ("openinference", "llm.output_messages.0.message.role", None, "without llm.output_messages"),
])
def test_an_unknown_span_shape_is_refused_naming_file_and_span(
        instrumentation: str, key: str, value: str | None, says: str, suite: Suite,
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    traced = record(instrumentation, monkeypatch, CASES[1:2])
    span = _model_span(traced)
    span["attributes"] = [a for a in span["attributes"] if not a["key"].startswith(key)
                          and not (value is None and key.startswith("llm.output_messages")
                                   and a["key"].startswith("llm.output_messages"))]
    if value is not None:
        span["attributes"].append({"key": key, "value": {"stringValue": value}})
    path = traced.write(tmp_path / "bad.jsonl")
    with Store(tmp_path / "s.db") as store, pytest.raises(InputError) as caught:
        score_traces(suite, path, store, model="m", release="r")
    message = str(caught.value)
    assert message.startswith(f"{path}:1: span {span['spanId']}: ")
    assert says in message and "\n" not in message
    with sqlite3.connect(tmp_path / "s.db") as db:
        assert db.execute("SELECT count(*) FROM runs").fetchone() == (0,)


def test_a_trace_naming_no_case_and_matching_none_is_refused(
        suite: Suite, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stray = {"id": "stray", "messages": _user("Say hello in French"),
             "expect": {"type": "no_call"}}
    traced = record("genai", monkeypatch, [{**stray, "id": "greet"}])  # no attribute
    path = traced.write(tmp_path / "t.jsonl")
    with pytest.raises(InputError, match="first user message matches no case"):
        trace_lines(path, suite.cases)
    with pytest.raises(InputError, match="give the suite"):
        trace_lines(path)


@pytest.mark.parametrize("instrumentation", ["genai", "openinference"])
def test_a_failed_model_call_is_an_error_attempt_not_no_call(
        instrumentation: str, suite: Suite, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    def failing(server: Loopback) -> None:
        server.script("Paris", error(500, "upstream overloaded"))

    traced = record(instrumentation, monkeypatch, CASES[1:2], failing)
    path = traced.write(tmp_path / "t.jsonl")
    (line,) = trace_lines(path, suite.cases)
    assert line["error"]["kind"] == "error" and "status ERROR" in line["error"]["message"]
    with Store(tmp_path / "s.db") as store:
        result = score_traces(suite, path, store, model="m", release="r")
    (verdict,) = result.verdicts
    assert verdict.status == "provider_error"
    assert result.scores.figures.scored == 0 and sum(result.scores.excluded.values()) == 1


@pytest.mark.parametrize("instrumentation", ["genai", "openinference"])
def test_broken_json_arguments_stay_broken(instrumentation: str, suite: Suite, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    broken = '{"city": "Par'

    def cut(server: Loopback) -> None:
        server.script("Paris", Reply(body=_body(calls=[tool_call("get_weather", broken)])))

    traced = record(instrumentation, monkeypatch, CASES[1:2], cut)
    path = traced.write(tmp_path / "t.jsonl")
    (line,) = trace_lines(path, suite.cases)
    assert line["response"]["tool_calls"][0]["function"]["arguments"] == broken
    with Store(tmp_path / "s.db") as store:
        (verdict,) = score_traces(suite, path, store, model="m", release="r").verdicts
    assert verdict.arguments == "invalid_json" and verdict.tool == "right"


def test_a_case_attribute_must_name_one_case_of_the_suite(
        suite: Suite, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    traced = record("openinference", monkeypatch, CASES[1:2])
    root = next(s for d in traced.documents for s in _spans_of(d) if s["name"] == "agent.turn")
    root["attributes"] = [{"key": "callgate.case_id", "value": {"stringValue": "nope"}}]
    path = traced.write(tmp_path / "t.jsonl")
    with pytest.raises(InputError, match=r"callgate\.case_id 'nope': no such case in the suite"):
        trace_lines(path, suite.cases)
    _model_span(traced)["attributes"].append(
        {"key": "callgate.case_id", "value": {"stringValue": "weather"}})
    path = traced.write(tmp_path / "t.jsonl")
    with pytest.raises(InputError, match=r"names 2 cases \(nope, weather\)"):
        trace_lines(path, suite.cases)
    # Another attribute name, as --case-attribute gives it.
    root["attributes"] = [{"key": "app.case", "value": {"stringValue": "weather"}}]
    (line,) = trace_lines(traced.write(tmp_path / "t.jsonl"), suite.cases, attribute="app.case")
    assert line["case_id"] == "weather"
