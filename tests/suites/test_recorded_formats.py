"""Recorded answers in every shape callgate reads are scored as the same answers recorded as OpenAI
chat completions; a shape it does not understand is refused, never scored as "no call"."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from console80 import cli80
from factories import calls, case, write_lines, write_suite

from callgate.scoring.pipeline import score_file
from callgate.store.db import Store
from callgate.suites.suite import load_suite

Call = tuple[str, dict[str, Any]]


class Answer:
    """One answer, format-free: the calls made, the text given, and whether it was cut off."""

    def __init__(self, calls: list[Call], text: str | None = None, truncated: bool = False):
        self.calls, self.text, self.truncated = calls, text, truncated


def chat_completion(answer: Answer) -> dict[str, Any]:
    # As the OpenAI SDK dumps it: the legacy fields present and null.
    message = {"role": "assistant", "content": answer.text, "refusal": None, "audio": None,
               "function_call": None, "tool_calls": [
                   {"id": f"call_{i}", "type": "function",
                    "function": {"name": name, "arguments": json.dumps(args)}}
                   for i, (name, args) in enumerate(answer.calls)] or None}
    finish = "length" if answer.truncated else "tool_calls" if answer.calls else "stop"
    return {"response": {"id": "chatcmpl-1", "object": "chat.completion", "choices": [
        {"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}}


def bare_message(answer: Answer) -> dict[str, Any]:
    line = chat_completion(answer)["response"]["choices"][0]
    return {"response": line["message"], "finish_reason": line["finish_reason"]}


def responses_api(answer: Answer) -> dict[str, Any]:
    output: list[dict[str, Any]] = [{"type": "reasoning", "id": "rs_1", "summary": []}]
    if answer.text is not None:
        output.append({"type": "message", "id": "msg_1", "role": "assistant", "status":
                       "completed", "content": [{"type": "output_text", "text": answer.text,
                                                 "annotations": []}]})
    output += [{"type": "function_call", "id": f"fc_{i}", "call_id": f"call_{i}", "name": name,
                "arguments": json.dumps(args), "status": "completed"}
               for i, (name, args) in enumerate(answer.calls)]
    response: dict[str, Any] = {"id": "resp_1", "object": "response", "status": "completed",
                                "output": output, "usage": {"input_tokens": 10,
                                                            "output_tokens": 5,
                                                            "total_tokens": 15}}
    if answer.truncated:
        response.update(status="incomplete",
                        incomplete_details={"reason": "max_output_tokens"})
    return {"response": response}


def anthropic_blocks(answer: Answer) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = [{"type": "thinking", "thinking": "…", "signature": "x"}]
    if answer.text is not None:
        blocks.append({"type": "text", "text": answer.text})
    blocks += [{"type": "tool_use", "id": f"toolu_{i}", "name": name, "input": args}
               for i, (name, args) in enumerate(answer.calls)]
    return blocks


def anthropic(answer: Answer) -> dict[str, Any]:
    stop = "max_tokens" if answer.truncated else "tool_use" if answer.calls else "end_turn"
    return {"response": {"id": "msg_1", "type": "message", "role": "assistant",
                         "model": "claude-x", "content": anthropic_blocks(answer),
                         "stop_reason": stop, "stop_sequence": None,
                         "usage": {"input_tokens": 10, "output_tokens": 5}}}


def anthropic_bare(answer: Answer) -> dict[str, Any]:
    line: dict[str, Any] = {"response": {"role": "assistant",
                                         "content": anthropic_blocks(answer)}}
    if answer.truncated:
        line["finish_reason"] = "length"
    return line


def gemini(answer: Answer) -> dict[str, Any]:
    parts: list[dict[str, Any]] = [{"text": "thinking it over", "thought": True}]
    if answer.text is not None:
        parts.append({"text": answer.text})
    parts += [{"functionCall": {"name": name, "args": args}} for name, args in answer.calls]
    return {"response": {"candidates": [{
        "content": {"role": "model", "parts": parts},
        "finishReason": "MAX_TOKENS" if answer.truncated else "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5,
                          "totalTokenCount": 15}, "modelVersion": "gemini-x"}}


FORMATS: dict[str, Callable[[Answer], dict[str, Any]]] = {
    "bare_message": bare_message, "responses_api": responses_api, "anthropic": anthropic,
    "anthropic_bare": anthropic_bare, "gemini": gemini}

RIGHT = [("lookup_order", {"order_id": "ord_7281"})]
CORPUS: list[tuple[str, Answer]] = [  # (case, answer)
    ("ord", Answer(RIGHT)),
    ("ord", Answer([("lookup_order", {"order_id": "ord_7282"})])),  # wrong value
    ("ord", Answer([("track_shipment", {"order_id": "ord_7281"})], text="Let me check.")),
    ("ord", Answer([("lookup_order", {"order_id": "ord_72"})], truncated=True)),
    ("ord", Answer([], text="Which order?")),  # missing call
    ("hours", Answer([], text="We open at 9.")),
    ("hours", Answer(RIGHT)),  # unexpected call
    ("hours", Answer([], text="We open", truncated=True)),
    ("both", Answer([("track_shipment", {"order_id": "ord_1"}),
                     ("lookup_order", {"order_id": "ord_1"})])),
    ("both", Answer([("lookup_order", {"order_id": "ord_1", "include_items": "yes"})])),
]


def corpus_suite(tmp_path: Path) -> Path:
    return write_suite(tmp_path / "suite", [
        case("ord", calls(("lookup_order", {"order_id": "ord_7281"}))),
        case("hours", {"type": "no_call"}),
        case("both", calls(("lookup_order", {"order_id": "ord_1"}),
                           ("track_shipment", {"order_id": "ord_1"}), mode="unordered")),
    ])


def verdicts_of(tmp_path: Path, name: str, to_line: Callable[[Answer], dict[str, Any]]
                ) -> list[dict[str, Any]]:
    lines = [{"case_id": case_id, "repeat": repeat, **to_line(answer)}
             for repeat, (case_id, answer) in enumerate(CORPUS)]
    path = write_lines(tmp_path / f"{name}.jsonl", lines)
    suite = load_suite(tmp_path / "suite")
    with Store(tmp_path / f"{name}.db") as store:
        result = score_file(suite, path, store, model="m", release=name)
        stored = store.db.conn.execute("select count(*) from verdicts").fetchone()[0]
    assert stored == len(CORPUS)
    return [verdict.model_dump() for verdict in result.verdicts]


def test_the_openai_answers_get_the_verdicts_they_deserve(tmp_path: Path) -> None:
    corpus_suite(tmp_path)
    got = [(v["status"], v["tool"], v["arguments"])
           for v in verdicts_of(tmp_path, "chat", chat_completion)]
    assert got == [
        ("scored", "right", "right"), ("scored", "right", "wrong_value"),
        ("scored", "wrong_tool", "not_applicable"), ("truncated", None, None),
        ("scored", "missing_call", "not_applicable"), ("scored", "right", "not_applicable"),
        ("scored", "unexpected_call", "not_applicable"), ("truncated", None, None),
        ("scored", "right", "right"), ("scored", "missing_call", "schema_violation"),
    ]


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_every_format_scores_as_the_same_chat_completions(tmp_path: Path, name: str) -> None:
    corpus_suite(tmp_path)
    assert verdicts_of(tmp_path, name, FORMATS[name]) == verdicts_of(
        tmp_path, "chat", chat_completion)


def test_token_counts_of_every_format_are_read(tmp_path: Path) -> None:
    from callgate.suites.responses import parse_response

    for name, to_line in {"chat": chat_completion, **FORMATS}.items():
        if name in ("bare_message", "anthropic_bare"):
            continue  # a bare message carries no usage
        usage = parse_response({"case_id": "ord", **to_line(Answer(RIGHT))}).usage
        assert usage is not None and (usage.prompt_tokens, usage.completion_tokens,
                                      usage.total_tokens) == (10, 5, 15), name


GOOD = {"role": "assistant", "content": "hello"}
CALL = {"id": "c1", "type": "function",
        "function": {"name": "lookup_order", "arguments": "{\"order_id\": \"ord_1\"}"}}
REFUSED: list[tuple[dict[str, Any], str]] = [  # (response, what the message names)
    ({"role": "assistant", "content": None,
      "function_call": {"name": "lookup_order", "arguments": "{}"}},
     "response.function_call: the legacy single-function field is not read"),
    ({"role": "assistant", "tool_calls": {"0": CALL}},
     "response.tool_calls: must be a list of tool calls"),
    ({"role": "assistant", "content": "ok", "toolCalls": [
        {"toolCallId": "1", "toolName": "lookup_order", "args": {}}]},
     "response.toolCalls: tool calls where this shape of answer has none"),
    ({"choices": [{"index": 0, "message": GOOD, "tool_use": {"name": "lookup_order"}}]},
     "response.choices[0].tool_use: tool calls where this shape of answer has none"),
    ({"role": "assistant", "tool_calls": [CALL], "content": [
        {"type": "tool_use", "id": "t", "name": "lookup_order", "input": {}}]},
     "response.content[0]: a tool_use block beside tool_calls"),
    ({"role": "assistant", "content": [
        {"type": "server_tool_use", "id": "s", "name": "web_search", "input": {}}]},
     "response.content[0].type: 'server_tool_use' is not a content block callgate reads"),
    ({"object": "response", "status": "completed", "output": [
        {"type": "computer_call", "call_id": "c", "action": {"type": "click"}}]},
     "response.output[0].type: 'computer_call' is not an output item callgate reads"),
    ({"candidates": [{"content": {"role": "model", "parts": [
        {"function_call": {"name": "lookup_order", "args": {}}}]}, "finishReason": "STOP"}]},
     "response.candidates[0].content.parts[0].function_call: tool calls where this shape"),
    ({"choices": [{"message": GOOD}], "candidates": [{"content": {"parts": []}}]},
     "response: holds candidates and choices, the keys of two different shapes of answer"),
    ({"completion": "Sure, I will look it up.", "stop_reason": None},
     "response: not an answer callgate reads (its keys: completion, stop_reason)"),
    ({"role": "user", "content": "Where is my order?"},
     "response.role: 'user' is not the assistant's answer"),
    ({"object": "response", "status": "failed", "output": [],
      "error": {"code": "server_error", "message": "boom"}},
     "response.status: 'failed' is not a finished answer"),
]


@pytest.mark.slow
@pytest.mark.parametrize(("response", "named"), REFUSED, ids=range(len(REFUSED)))
def test_a_shape_callgate_does_not_understand_is_refused(
        tmp_path: Path, response: dict[str, Any], named: str) -> None:
    corpus_suite(tmp_path)
    write_lines(tmp_path / "r.jsonl", [{"case_id": "hours", "response": GOOD},
                                       {"case_id": "ord", "response": response}])
    result = cli80("score", "suite", "-r", "r.jsonl", "-m", "m", "--release", "1", "--db",
                   "c.db", cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.splitlines() == [f"error: r.jsonl:2: {named}"[:len(named) + 18]] or (
        len(result.stderr.splitlines()) == 1
        and result.stderr.startswith(f"error: r.jsonl:2: {named}")), result.stderr
    with Store(tmp_path / "c.db") as store:
        assert store.db.conn.execute("select count(*) from runs").fetchone()[0] == 0
