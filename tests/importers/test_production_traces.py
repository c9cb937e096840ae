"""Production samples (issue 39 point 1, `score --traces --production`): traces the real
instrumentations wrote of conversations without expected answers, checked for what needs
none: every call against the tools its model call was offered (the span's own list, or the
folder's tools.json), the folder's policies; provider errors counted apart."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from importers.test_traces import TOOLS, WEATHER, _model_span, _spans_of
from production_traces import (
    CONVERSATIONS,
    record_production,
    trace_ids,
    write_folder,
)

from callgate.errors import InputError
from callgate.scoring.production import score_production
from callgate.store.db import Store


def _rows(db: Path, sql: str) -> list[tuple[Any, ...]]:
    with sqlite3.connect(db) as conn:
        return conn.execute(sql).fetchall()


# OpenInference records the tools each call was offered (llm.tools); the GenAI instrumentation
# of openai-v2 does not, so its traces are checked against the folder's tools.json.
@pytest.mark.parametrize(("instrumentation", "tools_json"), [("openinference", False),
                                                              ("genai", True)])
def test_production_traces_are_counted_with_their_reasons(
        instrumentation: str, tools_json: bool, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    traced = record_production(instrumentation, monkeypatch)
    path = traced.write(tmp_path / "traces.jsonl")
    folder = write_folder(tmp_path / "prod", tools=TOOLS if tools_json else None)
    with Store(tmp_path / "s.db") as store:
        result = score_production(folder, path, store, agent="bot", release="r1")
    ids = trace_ids(traced)
    by_id = {s.trace_id: s for s in result.samples}
    assert set(by_id) == set(ids.values())  # the trace id kept with each sample
    invalid = by_id[ids["invalid"]]
    assert not invalid.schema_valid and invalid.policy_clean
    (why,) = invalid.problems
    assert why.startswith("call 1 (get_weather): arguments do not match the schema")
    assert "missing required argument 'city'" in why and "'town' is not a parameter" in why
    unknown = by_id[ids["unknown"]]
    assert unknown.problems == ("call 1 (delete_account): a tool its model call was not "
                                "offered",)
    (violation,) = by_id[ids["policy"]].violations
    assert violation.policy == "forbidden_values" and "city" in violation.reason
    assert by_id[ids["policy"]].schema_valid  # a valid call can still break a policy
    assert by_id[ids["failed"]].provider_error
    assert all(by_id[ids[k]].schema_valid for k in ("valid", "chat", "order"))
    f = result.figures
    assert (f.traces, f.provider_errors, f.scored) == (7, 1, 6)
    assert (f.schema_valid.successes, f.schema_valid.n) == (4, 6)
    assert (f.policy_clean.successes, f.policy_clean.n) == (5, 6)
    assert (f.calls, f.calls_per_trace) == (6, 1.0)
    assert (f.unknown_tool_calls.successes, f.unknown_tool_calls.n) == (1, 6)
    assert f.violations == {"forbidden_values": 1}
    stored = _rows(tmp_path / "s.db", "SELECT trace_id, day, schema_valid, policy_clean, "
                   "provider_error, problems FROM production_samples")
    assert len(stored) == result.stored == 7
    row = next(r for r in stored if r[0] == ids["invalid"])
    assert row[2:5] == (0, 1, 0) and json.loads(row[5]) == [why]
    assert {r[1] for r in stored} == {result.samples[0].started_at[:10]}


def test_the_same_traces_scored_again_are_not_counted_twice(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = record_production("openinference", monkeypatch, CONVERSATIONS[:2]).write(
        tmp_path / "t.jsonl")
    folder = write_folder(tmp_path / "prod", tools=None)
    with Store(tmp_path / "s.db") as store:
        first = score_production(folder, path, store, agent="bot")
        again = score_production(folder, path, store, agent="bot")
        other = score_production(folder, path, store, agent="other-bot")
    assert (first.stored, again.stored, other.stored) == (2, 0, 2)
    assert _rows(tmp_path / "s.db", "SELECT agent, count(*) FROM production_samples GROUP BY "
                 "agent ORDER BY agent") == [("bot", 2), ("other-bot", 2)]


def _util_genai_spans(cities: list[Any], monkeypatch: pytest.MonkeyPatch,
                      version: str | None = None) -> list[Any]:
    """Model calls of get_weather as opentelemetry-util-genai's TelemetryHandler records
    them (with gen_ai.tool.definitions), under an SDK Resource naming `version`."""
    monkeypatch.setenv("OTEL_SEMCONV_STABILITY_OPT_IN", "gen_ai_latest_experimental")
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "span_only")
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.util.genai import types
    from opentelemetry.util.genai.handler import TelemetryHandler

    exporter = InMemorySpanExporter()
    resource = Resource.create({"service.version": version} if version else {})
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    handler = TelemetryHandler(tracer_provider=provider)
    parameters = WEATHER["function"]["parameters"]
    for city in cities:
        call = handler.start_inference("openai", request_model="test/model")
        call.input_messages = [types.InputMessage(role="user", parts=[types.Text(content="?")])]
        call.tool_definitions = [types.FunctionToolDefinition(
            name="get_weather", description="The weather", parameters=parameters)]
        call.output_messages = [types.OutputMessage(role="assistant", parts=[
            types.ToolCallRequest(arguments={"city": city}, name="get_weather", id="c1")],
            finish_reason="tool_calls")]
        call.stop()
    return list(exporter.get_finished_spans())


def _export(path: Path, *span_lists: list[Any]) -> Path:
    from importers.test_traces import otlp_json

    path.write_text("".join(json.dumps(d) + "\n" for spans in span_lists
                            for d in otlp_json(spans)))
    return path


def test_a_span_s_own_tool_definitions_are_read(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """gen_ai.tool.definitions as opentelemetry-util-genai writes it (the openai-v2
    instrumentation does not set it): the span's tools are what the call is checked against,
    before the folder's tools.json (which here offers no get_weather)."""
    spans = _util_genai_spans(["Paris", 42], monkeypatch)
    assert all("gen_ai.tool.definitions" in (s.attributes or {}) for s in spans)
    path = _export(tmp_path / "t.jsonl", spans)
    folder = write_folder(tmp_path / "prod", tools=TOOLS[1:], policies=None)
    with Store(tmp_path / "s.db") as store:
        result = score_production(folder, path, store, agent="bot")
    assert [s.schema_valid for s in result.samples] == [True, False]
    assert result.samples[1].problems[0].endswith("city: expected string, got integer")


def test_the_release_is_the_resource_s_service_version_unless_given(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _export(tmp_path / "t.jsonl",
                   _util_genai_spans(["Paris", 42], monkeypatch, "1.4.1"),
                   _util_genai_spans(["Oslo"], monkeypatch, "1.4.2"),
                   _util_genai_spans(["Rome"], monkeypatch))
    folder = write_folder(tmp_path / "prod", tools=None, policies=None)
    with Store(tmp_path / "s.db") as store:
        found = score_production(folder, path, store, agent="bot")
        groups = store.production_counts("bot", "release")
        given = score_production(folder, path, store, agent="other", release="r9")
    assert [s.release for s in found.samples] == ["1.4.1", "1.4.1", "1.4.2", None]
    assert [(g["key"], g["traces"], g["schema_valid"]) for g in groups] == [
        ("1.4.1", 2, 1), ("1.4.2", 1, 1), ("", 1, 1)]
    assert {s.release for s in given.samples} == {"r9"}


def test_tool_calls_with_no_tools_known_are_refused_nothing_stored(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    traced = record_production("genai", monkeypatch, CONVERSATIONS[:1])
    path = traced.write(tmp_path / "t.jsonl")
    span = _model_span(traced)
    with Store(tmp_path / "s.db") as store, pytest.raises(InputError) as caught:
        score_production(write_folder(tmp_path / "prod", tools=None), path, store, agent="b")
    message = str(caught.value)
    assert message.startswith(f"{path}:1: trace {span['traceId']}: span {span['spanId']}: ")
    assert "tools.json" in message and "\n" not in message
    assert _rows(tmp_path / "s.db", "SELECT count(*) FROM production_batches") == [(0,)]


@pytest.mark.parametrize(("tool", "says"), [
    ('{"type": "function", "function": {', "llm.tools.1.tool.json_schema is not JSON"),
    (json.dumps({"type": "function", "function": {"name": "lookup_order", "parameters": {
        "type": "object", "properties": {"order_id": {"type": "text"}}}}}),
     "tool lookup_order: not a valid JSON Schema Draft 7 document: "),
])
def test_a_bad_tool_list_on_a_span_is_refused_naming_it_nothing_stored(
        tool: str, says: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    traced = record_production("openinference", monkeypatch, CONVERSATIONS[:3])
    documents = traced.documents
    span = next(s for s in _spans_of(documents[2]) if s["name"] != "agent.turn")
    for attribute in span["attributes"]:
        if attribute["key"] == "llm.tools.1.tool.json_schema":
            attribute["value"] = {"stringValue": tool}
    path = traced.write(tmp_path / "t.jsonl")
    folder = write_folder(tmp_path / "prod", tools=None)
    with Store(tmp_path / "s.db") as store, pytest.raises(InputError) as caught:
        score_production(folder, path, store, agent="b")
    assert str(caught.value).startswith(f"{path}:3: span {span['spanId']}: {says}")
    assert "\n" not in str(caught.value)
    assert _rows(tmp_path / "s.db", "SELECT count(*) FROM production_samples") == [(0,)]


def test_a_policy_naming_a_tool_nobody_offered_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = record_production("openinference", monkeypatch, CONVERSATIONS[:1]).write(
        tmp_path / "t.jsonl")
    folder = write_folder(tmp_path / "prod", tools=None,
                          policies={"forbidden_tools": ["get_wether"]})
    with Store(tmp_path / "s.db") as store, pytest.raises(
            InputError, match=r"suite\.json.*policies\.forbidden_tools\[0\]: unknown tool "
                              "'get_wether'"):
        score_production(folder, path, store, agent="b")
    assert os.path.exists(tmp_path / "s.db")
    assert _rows(tmp_path / "s.db", "SELECT count(*) FROM production_samples") == [(0,)]


def test_a_span_without_a_start_time_is_refused(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    traced = record_production("openinference", monkeypatch, CONVERSATIONS[:2])
    span = _model_span(traced)  # the first trace's model call
    del span["startTimeUnixNano"]
    path = traced.write(tmp_path / "t.jsonl")
    with Store(tmp_path / "s.db") as store, pytest.raises(InputError) as caught:
        score_production(write_folder(tmp_path / "prod", tools=None), path, store, agent="b")
    assert str(caught.value).startswith(
        f"{path}:1: trace {span['traceId']}: span {span['spanId']}: no startTimeUnixNano")
    assert _rows(tmp_path / "s.db", "SELECT count(*) FROM production_samples") == [(0,)]
