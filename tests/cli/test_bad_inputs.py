"""A corpus of bad inputs, one table row each: suites, recorded responses, callgate.toml, judge
specs, calibration sets, scores files, output options that would land on the store or an
input, stores handed to `merge`, `serve` start-up, judge commands, text that is not Unicode,
and hostile model output.

Every bad file must end the command with exit 2 and one stderr line naming the file (and the
line and field where there are some): no traceback, no secret echoed (a fake key sits in the
environment, and some inputs carry it), and the store exactly as it was (a hash of its
`iterdump()`), and no other file made or changed beside it. Model output is different: a
hostile answer never stops a run; it is scored (`invalid_json` with a reason) or kept as a
provider error, and the run completes.

The CLI runs in-process (`callgate.cli.main.entry`, the console script's own function, so exit codes
are mapped as in production); a few rows also run as real subprocesses. Store-file rows live in
tests/store/test_store_robust.py.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from conftest import KEY, KEY_ENV
from factories import LOOKUP_ORDER, TOOLS
from loopback import Loopback, Reply, completion, ok, tool_call

from callgate import reading
from callgate.cli import main as cli
from callgate.judging.judge import JudgeOutputError, parse_output

DEEP = "[" * 10_000 + "]" * 10_000
DEEP_OBJ = '{"a":' * 10_000 + "1" + "}" * 10_000
HUGE_INT = "9" * 5000  # beyond Python's 4300-digit limit for reading an int
OVER_INT64 = str(2**70)


def j(value: Any) -> str:
    return json.dumps(value)


# --------------------------------------------------------------------------- the good inputs

CASE_A = {"id": "a", "messages": [{"role": "user", "content": "[a] Where is order ord_1?"}],
          "tags": ["clean"],
          "expect": {"type": "calls", "calls": [{"tool": "lookup_order",
                                                 "args": {"order_id": "ord_1"}}]}}
CASE_B = {"id": "b", "messages": [{"role": "user", "content": "[b] What are your hours?"}],
          "tags": ["no-tool"], "expect": {"type": "no_call"}}
CASE_T = {"id": "t", "messages": [{"role": "user", "content": "[t] Cancel ord_1, a duplicate."}],
          "tags": ["multi-turn"],
          "tool_results": [{"tool": "lookup_order", "args": {"order_id": "ord_1"},
                            "result": {"status": "open"}}],
          "expect": {"type": "trajectory", "calls": [
              {"tool": "lookup_order", "args": {"order_id": "ord_1"}},
              {"tool": "cancel_order", "args": {"order_id": "ord_1", "reason": "duplicate"}}]}}
CASES = "".join(j(c) + "\n" for c in (CASE_A, CASE_B, CASE_T))  # 3 lines


def call(name: str, arguments: Any, call_id: str = "c1") -> dict[str, Any]:
    return {"id": call_id, "type": "function",
            "function": {"name": name, "arguments": arguments}}


def bare(*calls: dict[str, Any], content: str | None = None) -> dict[str, Any]:
    return {"role": "assistant", "content": content, "tool_calls": list(calls)}


LOOKUP_CALL = call("lookup_order", j({"order_id": "ord_1"}))
RESP_A = {"case_id": "a", "finish_reason": "tool_calls", "response": bare(LOOKUP_CALL)}
RESP_B = {"case_id": "b", "finish_reason": "stop", "response": bare(content="9 to 5")}
RESP_T = {"case_id": "t", "turns": [
    bare(LOOKUP_CALL),
    bare(call("cancel_order", j({"order_id": "ord_1", "reason": "duplicate"}), "c2")),
    bare(content="Done.")]}
RESPONSES = "".join(j(r) + "\n" for r in (RESP_A, RESP_B))  # 2 lines; t left unanswered

PROMPT = ("Judge the call.\n<tools>{{tools}}</tools>\n<conversation>{{conversation}}"
          "</conversation>\n<rubric>{{rubric}}</rubric>\n<response>{{response}}</response>\n")
# The endpoint is a closed loopback port: a row that slipped through could never reach a
# public API.
SPEC_LINES = ['name = "j"', 'model = "openai/gpt-4.1-2025-04-14"', 'prompt = "j.md"',
              f'api_key_env = "{KEY_ENV}"', 'api_base = "http://127.0.0.1:9/v1"']
SPEC = "\n".join(SPEC_LINES) + "\n[parameters]\ntemperature = 0\nsamples = 1\n"

ITEM = {"id": "c1", "split": "test",
        "case": {"messages": [{"role": "user", "content": "Where is ord_1?"}],
                 "tools": [LOOKUP_ORDER], "rubric": "Look the order up."},
        "response": {"content": None, "tool_calls": [
            {"name": "lookup_order", "arguments": j({"order_id": "ord_1"})}]},
        "label": {"tool_choice": "pass", "arguments": "pass"}}
ITEM2 = {**ITEM, "id": "c2", "label": {"tool_choice": "fail", "arguments": "n/a"}}
CALIBRATION = j(ITEM) + "\n" + j(ITEM2) + "\n"  # 2 lines

CONFIG = (
    "[[candidates]]\n"
    'name = "mini"\n'
    'model = "openrouter/test/model"\n'
    'api_base = "http://127.0.0.1:9/v1"\n'
    f'api_key_env = "{KEY_ENV}"\n'
)


def item(**changes: Any) -> str:
    return j({**ITEM, "id": "c3", **changes})


def response_line(**changes: Any) -> str:
    return j({**RESP_A, "repeat": 1, **changes})


def deep_response(**changes: Any) -> str:
    return j({"case_id": "a", "repeat": 1, **changes})


COMMANDS: dict[str, list[str]] = {
    "score": ["score", "suite", "-r", "responses.jsonl", "-m", "m", "--release", "bad",
              "--db", "callgate.db"],
    "check": ["suite", "check", "suite"],
    "run": ["run", "suite", "--model", "mini", "--config", "callgate.toml", "--offline",
            "-k", "1", "--release", "bad", "--db", "callgate.db"],
    "judge": ["judge", "show", "judges/j.toml", "--db", "callgate.db"],
    "calibrate": ["judge", "calibrate", "judges/j.toml", "--set", "cal.jsonl",
                  "--db", "callgate.db"],
    "gate": ["gate", "-m", "m", "--release", "r1", "--baseline", "releases/base.json",
             "--db", "callgate.db"],
}


@dataclass(frozen=True)
class Bad:
    kind: str  # suite | responses | config | judge_spec | calibration | scores
    name: str
    command: str
    files: dict[str, str | bytes] = field(default_factory=dict)
    where: tuple[str, ...] = ()  # what the error line must name (file:line, field, words)
    folders: tuple[str, ...] = ()  # paths replaced by an empty folder
    removed: tuple[str, ...] = ()
    args: tuple[str, ...] = ()  # replace the command's arguments
    links: tuple[tuple[str, str, bool], ...] = ()  # (path, target, hard link?)
    sql: tuple[str, ...] = ()  # run on in.db, a copy of the store, for `merge`
    xfail: str | None = None


CORPUS: list[Bad] = []


def bad(kind: str, name: str, command: str, *where: str, **kwargs: Any) -> None:
    CORPUS.append(Bad(kind, name, command, where=where, **kwargs))


# --------------------------------------------------------------------------- suites: cases.jsonl

def case_line(name: str, line: str | bytes, *where: str) -> None:
    text: str | bytes = (CASES + line + "\n") if isinstance(line, str) else (
        CASES.encode() + line + b"\n")
    bad("suite", f"cases: {name}", "score", "cases.jsonl:4", *where,
        files={"suite/cases.jsonl": text})


def case(**changes: Any) -> str:
    body = {**CASE_A, "id": "c", **changes}
    return j({k: v for k, v in body.items() if v is not None})


CALLS = CASE_A["expect"]
case_line("not JSON", '{"id": "c",', "invalid JSON")
case_line("a JSON array", "[1, 2]", "JSON object")
case_line("a JSON string", '"c"', "JSON object")
case_line("nested 10,000 deep", '{"id": "c", "note": ' + DEEP + "}", "nested more than 100")
case_line("object nested 10,000 deep", DEEP_OBJ, "nested more than 100")
case_line("NaN in a message", case(messages=[{"role": "user", "content": "x"}])
          .replace('"x"', "NaN"), "messages[0].content", "NaN")
case_line("Infinity in a key argument", case().replace('"ord_1"', "Infinity"),
          "expect.calls[0].args.order_id", "Infinity")
case_line("a 5000-digit number", case().replace('"ord_1"', HUGE_INT), "too long to be read")
case_line("a byte that is not UTF-8", b'{"id": "c\xff"}', "not UTF-8")
case_line("duplicate id", case(id="a"), "id", "duplicate case id")
case_line("no id", case(id=None), "id", "Field required")
case_line("id is a number", case(id=7), "id")
case_line("no messages", case(messages=None), "messages")
case_line("no expect", case(expect=None), "expect")
case_line("unknown expectation type", case(expect={"type": "maybe"}), "expect")
case_line("calls is empty", case(expect={"type": "calls", "calls": []}), "expect.calls")
case_line("unknown tool", case(expect={"type": "calls", "calls": [{"tool": "refund"}]}),
          "expect.calls[0].tool", "unknown tool")
case_line("expected call without a tool", case(expect={"type": "calls", "calls": [{}]}),
          "expect.calls[0].tool")
case_line("key argument the tool lacks", case(expect={"type": "calls", "calls": [
    {"tool": "lookup_order", "args": {"colour": "red"}}]}), "expect.calls[0].args.colour")
case_line("key argument that breaks the schema", case(expect={"type": "calls", "calls": [
    {"tool": "lookup_order", "args": {"order_id": "x"}}]}), "expect.calls[0].args.order_id")
case_line("key argument outside the enum", case(expect={"type": "calls", "calls": [
    {"tool": "cancel_order", "args": {"order_id": "ord_1", "reason": "whim"}}]}),
    "expect.calls[0].args.reason")
case_line("offered tool that does not exist", case(tools=["refund"]), "tools")
case_line("expected tool not offered", case(tools=["cancel_order"]),
          "expect.calls[0].tool", "not offered")
case_line("unknown field", case(colour="red"), "colour")
case_line("tags is a string", case(tags="clean"), "tags")
case_line("ends with the assistant", case(messages=[
    {"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]), "messages")
case_line("judge without a rubric", case(expect={"type": "judge"}), "expect.rubric")
case_line("alternatives empty", case(expect={"type": "alternatives", "alternatives": []}),
          "expect.alternatives")
case_line("unknown mode", case(expect={**CALLS, "mode": "sideways"}), "expect.mode")
case_line("unknown trajectory argument rule", case(expect={
    "type": "trajectory", "args": "fuzzy", "calls": CALLS["calls"]}), "expect.args")
case_line("final_state without an environment", case(expect={
    "type": "final_state", "calls": CALLS["calls"]}), "expect")
case_line("one_of empty", case(expect={"type": "calls", "calls": [
    {"tool": "lookup_order", "args": {"order_id": {"one_of": []}}}]}),
    "expect.calls[0].args", "one_of")
case_line("max_turns 0", case(max_turns=0), "max_turns")
case_line("scripted result for an unknown tool", case(tool_results=[
    {"tool": "refund", "result": {}}]), "tool_results[0].tool")
bad("suite", "cases: empty file", "score", "cases.jsonl", "no cases",
    files={"suite/cases.jsonl": ""})
bad("suite", "cases: a folder", "score", "cases.jsonl", "folder", folders=("suite/cases.jsonl",))
bad("suite", "cases: missing", "score", "cases.jsonl", "not found", removed=("suite/cases.jsonl",))
bad("suite", "cases: a byte that is not UTF-8 (suite check)", "check", "cases.jsonl:2",
    "not UTF-8", files={"suite/cases.jsonl": CASES.encode().replace(b"[b]", b"[\xfe]")})


# --------------------------------------------------------------------------- suites: tools.json

def tools_file(name: str, text: str | bytes, *where: str) -> None:
    bad("suite", f"tools: {name}", "score", "tools.json", *where, files={"suite/tools.json": text})


def tools(*items: Any) -> str:
    return json.dumps(list(items), indent=1)


def tool_with(parameters: Any) -> dict[str, Any]:
    return {"type": "function", "function": {"name": "lookup_order", "parameters": parameters}}


tools_file("not JSON", '[{"type": "function",\n', "tools.json:", "invalid JSON")
tools_file("an object, not an array", j({"tools": TOOLS}), "JSON array")
tools_file("empty file", "", "invalid JSON")
tools_file("an item that is a number", tools(LOOKUP_ORDER, 1), "[1]")
tools_file("no function", tools({"type": "function"}), "[0].function")
tools_file("function without a name", tools({"type": "function", "function": {}}),
           "tools.json:4: [0].function.name")
tools_file("type is not function", tools({**LOOKUP_ORDER, "type": "retrieval"}), "[0].type")
tools_file("duplicate tool name", tools(LOOKUP_ORDER, LOOKUP_ORDER),
           "tools.json:27: [1].function.name", "duplicate")
tools_file("schema with an unknown type", tools(tool_with({"type": "objekt"})),
           "[0].function.parameters", "Draft 7")
tools_file("schema of an array", tools(tool_with({"type": "array"})),
           "[0].function.parameters.type")
tools_file("properties is a list", tools(tool_with({"type": "object", "properties": []})),
           "[0].function.parameters")
tools_file("nested 10,000 deep", "[" + DEEP + "]", "tools.json:1", "nested more than 100")
tools_file("schema nested 10,000 deep", '[{"type": "function", "function": {"name": "x", '
           '"parameters": ' + DEEP_OBJ + "}}]", "nested more than 100")
tools_file("NaN in a schema", tools(tool_with({"type": "object", "properties": {
    "n": {"type": "number", "minimum": 0}}})).replace('"minimum": 0', '"minimum": NaN'),
    "tools.json:11: [0].function.parameters.properties.n.minimum", "NaN")
tools_file("a 5000-digit number", tools(tool_with({"type": "object", "properties": {
    "n": {"type": "number", "minimum": 0}}})).replace('"minimum": 0', f'"minimum": {HUGE_INT}'),
    "tools.json:", "too long to be read")
tools_file("a byte that is not UTF-8 on line 3", tools(LOOKUP_ORDER).encode().replace(
    b'"function"', b'"functi\xc3on"', 1), "tools.json:3", "not UTF-8")
tools_file("unknown field in function", tools({**LOOKUP_ORDER, "function": {
    **LOOKUP_ORDER["function"], "colour": "red"}}), "[0].function.colour")
bad("suite", "tools: missing", "score", "tools.json", "not found", removed=("suite/tools.json",))
bad("suite", "tools: a folder", "score", "tools.json", "folder", folders=("suite/tools.json",))


# --------------------------------------------------------------------------- suites: suite.json

def meta(name: str, text: str | bytes, *where: str) -> None:
    bad("suite", f"suite.json: {name}", "score", "suite.json", *where,
        files={"suite/suite.json": text})


meta("not JSON", '{"name": ', "invalid JSON")
meta("an array", "[]", "JSON object")
meta("misspelt environment", '{"name": "s",\n "enviroment": "env:X"}', "suite.json:2: enviroment",
     "did you mean")
meta("empty name", j({"name": ""}), "name")
meta("name is a number", j({"name": 3}), "name")
meta("unknown match rule value", j({"match": {"values": "fuzzy"}}), "match.values")
meta("unknown match field", j({"match": {"pairing_": "optimal"}}), "match.pairing_")
meta("environment is a number", j({"environment": 1}), "environment")
meta("environment module missing", j({"environment": "nosuchmodule:Store"}), "environment")
meta("nested 10,000 deep", '{"description": ' + DEEP + "}", "suite.json:1",
     "nested more than 100")
meta("Infinity", '{"name": "s", "description": Infinity}', "description", "Infinity")
meta("a byte that is not UTF-8", b'{"name": "s",\n "description": "\xff"}', "suite.json:2",
     "not UTF-8")


# --------------------------------------------------------------------------- recorded responses

def responses(name: str, line: str | bytes, *where: str, at: int = 3) -> None:
    text: str | bytes = (RESPONSES + line + "\n") if isinstance(line, str) else (
        RESPONSES.encode() + line + b"\n")
    bad("responses", name, "score", f"responses.jsonl:{at}", *where,
        files={"responses.jsonl": text})


responses("not JSON", '{"case_id": "a"', "invalid JSON")
responses("a JSON array", "[]", "JSON object")
responses("line nested 10,000 deep", deep_response(note=None)[:-1] + ', "x": ' + DEEP + "}",
          "nested more than 100")
responses("completion nested 10,000 deep", '{"case_id": "a", "repeat": 1, "response": '
          + DEEP_OBJ + "}", "nested more than 100")
responses("NaN cost", response_line(cost=0).replace('"cost": 0', '"cost": NaN'), "cost", "NaN")
responses("Infinity latency", response_line(latency_ms=1).replace(
    '"latency_ms": 1', '"latency_ms": Infinity'), "latency_ms", "Infinity")
responses("-Infinity cost in usage", response_line(usage={"cost": 0}).replace(
    '"cost": 0', '"cost": -Infinity'), "usage.cost", "-Infinity")
responses("repeat beyond 64 bits", response_line(repeat=2**70), "repeat", "2^63-1")
responses("repeat negative", response_line(repeat=-1), "repeat")
responses("repeat fractional", response_line(repeat=1.5), "repeat")
responses("repeat a 5000-digit number", response_line().replace('"repeat": 1',
          f'"repeat": {HUGE_INT}'), "too long to be read")
responses("prompt tokens beyond 64 bits", response_line(usage={"prompt_tokens": 2**64}),
          "usage.prompt_tokens")
responses("completion tokens negative", response_line(usage={"completion_tokens": -5}),
          "usage.completion_tokens")
responses("tokens beyond 64 bits in a completion", response_line(response={
    "choices": [{"message": bare(LOOKUP_CALL), "finish_reason": "tool_calls"}],
    "usage": {"total_tokens": 2**70}}), "usage.total_tokens")
responses("cost is a word", response_line(cost="free"), "cost")
responses("a negative cost", response_line(cost=-0.5), "cost", "greater than or equal to 0")
responses("a negative latency", response_line(latency_ms=-3), "latency_ms",
          "greater than or equal to 0")
responses("usage is a string", response_line(usage="lots"), "usage", "JSON object")
responses("response and error", response_line(error={"kind": "rate_limit", "message": "x"}),
          "error", "not both")
responses("turns and response", response_line(turns=[bare(content="x")]), "turns", "not both")
responses("neither response nor error", deep_response(), "response")
responses("no case_id", j({"response": bare(content="x")}), "case_id")
responses("unknown case", response_line(case_id="zz"), "case_id", "no case 'zz'")
responses("second answer for a repeat", j(RESP_A), "repeat", "a second response")
responses("misspelt response", j({"case_id": "a", "repeat": 1, "reponse": bare()}), "reponse",
          "unknown field")
responses("response is a string", response_line(response="call lookup_order"), "response")
responses("tool_calls is an object", response_line(response={"role": "assistant",
          "tool_calls": {"0": LOOKUP_CALL}}), "response.tool_calls")
responses("a tool call that is a string", response_line(response=bare("lookup_order")),
          "response.tool_calls[0]")
responses("a call without a function name", response_line(response=bare(
    {"id": "c", "type": "function", "function": {"arguments": "{}"}})),
    "response.tool_calls[0].function.name")
responses("call id is a number", response_line(response=bare({**LOOKUP_CALL, "id": 5})),
          "response.tool_calls[0].id")
responses("no choices", response_line(response={"choices": []}), "response.choices")
responses("a choice that is a list", response_line(response={"choices": [[]]}),
          "response.choices[0]")
responses("content is a number", response_line(response={"role": "assistant", "content": 5}),
          "response.content")
responses("error is a string", deep_response(error="boom"), "error")
responses("turns is empty", deep_response(turns=[]), "turns")
responses("a multi-turn case recorded with response", j({**RESP_A, "case_id": "t"}), "response",
          "multi-turn")
responses("a byte that is not UTF-8", b'{"case_id": "a", "repeat": 1, "note": "\xe9"}',
          "not UTF-8")
responses("blank lines then a bad one", "\n\n" + "{", "invalid JSON", at=5)
bad("responses", "empty file", "score", "responses.jsonl", "no responses",
    files={"responses.jsonl": ""})
bad("responses", "only blank lines", "score", "responses.jsonl", "no responses",
    files={"responses.jsonl": "\n\n  \n"})
bad("responses", "a folder", "score", "responses.jsonl", "folder", folders=("responses.jsonl",))
bad("responses", "missing", "score", "responses.jsonl", "not found",
    removed=("responses.jsonl",))


# --------------------------------------------------------------------------- callgate.toml

def config(name: str, text: str | bytes, *where: str, **kwargs: Any) -> None:
    bad("config", name, "run", "callgate.toml", *where, files={"callgate.toml": text}, **kwargs)


config("not TOML", CONFIG + "name = \n", "callgate.toml:6", "invalid TOML")
config("a byte that is not UTF-8", CONFIG.encode() + b'# caf\xe9\n', "callgate.toml:6",
       "not UTF-8")
config("no candidates", 'title = "x"\n', "callgate.toml: candidates")  # no table to name
config("candidates is empty", "candidates = []\n", "callgate.toml:1: candidates")
config("a candidate without a model", '[[candidates]]\nname = "mini"\n',
       "callgate.toml:1: candidates[0].model")
config("the key itself", CONFIG + f'api_key = "{KEY}"\n',
       "callgate.toml:6: candidates[0].api_key")
config("a key in extra", CONFIG + f'extra = {{ api_key = "{KEY}" }}\n',
       "callgate.toml:6: candidates[0].extra.api_key", "api_key_env")
config("a key in a header", CONFIG + f'extra = {{ extra_headers = {{ Authorization = '
       f'"Bearer {KEY}" }} }}\n', "callgate.toml:6: candidates[0].extra.extra_headers")
config("a key in api_base", CONFIG.replace("http://127.0.0.1:9/v1",
       f"http://user:{KEY}@127.0.0.1:9/v1"), "callgate.toml:4: candidates[0].api_base")
config("a key in the api_base query", CONFIG.replace("http://127.0.0.1:9/v1",
       f"http://127.0.0.1:9/v1?key={KEY}"), "callgate.toml:4: candidates[0].api_base")
config("a key as api_key_env", CONFIG.replace(f'"{KEY_ENV}"', f'"{KEY}"'),
       "callgate.toml:5: candidates[0].api_key_env")
config("max_tokens", CONFIG + "max_tokens = 100\n",
       "callgate.toml:6: candidates[0].max_tokens")
config("max_tokens in extra", CONFIG + "extra = { max_tokens = 100 }\n",
       "callgate.toml:6: candidates[0].extra.max_tokens")
config("unknown reasoning effort", CONFIG + 'reasoning_effort = "extreme"\n',
       "callgate.toml:6: candidates[0].reasoning_effort")
config("provider routing off OpenRouter", CONFIG.replace("openrouter/test/model", "openai/gpt-x")
       + 'provider = { order = ["a"] }\n', "callgate.toml:6: candidates[0].provider")
config("duplicate names", CONFIG + CONFIG, "callgate.toml:7: candidates[1].name", "duplicate")
config("misspelt field", CONFIG + "temprature = 0\n",
       "callgate.toml:6: candidates[0].temprature")
config("misspelt after a multi-line string", CONFIG + 'extra = { stop = """\n[[candidates]]\n'
       'temprature = 1\n""" }\ntemprature = 0\n', "callgate.toml:10: candidates[0].temprature")
config("a candidate in a multi-line array", 'candidates = [\n  { model = "openrouter/test/model" '
       '},\n  { model = "a/b", max_tokens = 5 },\n]\n', "callgate.toml:3: candidates[1].max_tokens")
config("nested 10,000 deep", CONFIG + "extra = { x = " + "[" * 10_000 + "]" * 10_000 + " }\n",
       "nested more than 100")
config("no candidate of that name", CONFIG, "no candidate named 'maxi'",
       args=("run", "suite", "--model", "maxi", "--config", "callgate.toml", "--offline",
             "--db", "callgate.db"))
config("a TOML date in extra", CONFIG + "extra = { stop = 1979-05-27 }\n",
       "callgate.toml:6: candidates[0].extra.stop", "date or time")
config("a TOML time in extra", CONFIG + "extra = { at = 07:32:00 }\n",
       "callgate.toml:6: candidates[0].extra.at", "date or time")
config("a TOML date-time in a list in extra", CONFIG + "extra = { stop = [\"x\", "
       "1979-05-27T07:32:00Z] }\n", "callgate.toml:6: candidates[0].extra.stop[1]",
       "date or time")
config("temperature = inf", CONFIG + "extra = { temperature = inf }\n",
       "callgate.toml:6: candidates[0].extra.temperature", "inf is not a JSON number")
config("temperature = nan", CONFIG + "extra = { temperature = nan }\n",
       "candidates[0].extra.temperature", "nan is not a JSON number")
config("-inf nested in extra", CONFIG + "extra = { logit_bias = { a = -inf } }\n",
       "candidates[0].extra.logit_bias.a", "-inf")
config("an unknown key of 100,000 characters", CONFIG + "k" * 100_000 + " = 1\n",
       "callgate.toml:6: candidates[0].kkkkkkkk", "(100000 characters)")
case_line("an unknown field of 100,000 characters", case(**{"f" * 100_000: 1}),
          "ffffffff...(100000 characters)")
bad("config", "a folder", "run", "callgate.toml", "folder", folders=("callgate.toml",))
bad("config", "--param nested 10,000 deep", "run", "--param x", "nested more than 100",
    args=(*COMMANDS["run"], "--param", "x=" + DEEP))
bad("config", "--param max_tokens on a configured candidate", "run",
    "command line: extra.max_tokens", "truncates",
    args=(*COMMANDS["run"], "--param", "max_tokens=5"))


# --------------------------------------------------------------------------- judge specs

def spec(name: str, text: str | bytes, *where: str, files: dict | None = None,
         **kwargs: Any) -> None:
    named = where if any(w.startswith(("j.md", "sub")) for w in where) else ("j.toml", *where)
    bad("judge_spec", name, "judge", *named,
        files={"judges/j.toml": text, **(files or {})}, **kwargs)


def spec_with(**changes: str | None) -> str:
    keys = {"name": '"j"', "model": '"openai/gpt-4.1-2025-04-14"', "prompt": '"j.md"',
            "api_key_env": f'"{KEY_ENV}"', "api_base": '"http://127.0.0.1:9/v1"', **changes}
    head = "".join(f"{k} = {v}\n" for k, v in keys.items() if v is not None and "." not in k)
    tables: dict[str, list[str]] = {}
    for k, v in changes.items():
        if v is not None and "." in k:
            table, key = k.split(".", 1)
            tables.setdefault(table, []).append(f"{key} = {v}\n")
    return head + "".join(f"[{t}]\n" + "".join(lines) for t, lines in tables.items())


spec("not TOML", SPEC + "samples = \n", "j.toml:9", "invalid TOML")
spec("a byte that is not UTF-8", SPEC.encode().replace(b'"j"', b'"j\xff"', 1), "j.toml:1",
     "not UTF-8")
spec("no name", spec_with(name=None), "j.toml: name")  # top level: no table to name
spec("a floating model alias", spec_with(model='"openai/gpt-4o"'), "j.toml:2: model",
     "dated snapshot")
spec("an even number of samples", spec_with(**{"parameters.samples": "2"}),
     "j.toml:7: parameters.samples", "odd")
spec("zero samples", spec_with(**{"parameters.samples": "0"}), "j.toml:7: parameters.samples")
spec("max_tokens", spec_with(**{"parameters.extra": "{ max_tokens = 5 }"}),
     "j.toml:7: parameters.extra.max_tokens")
spec("unknown field", spec_with(temprature="0"), "j.toml:6: temprature")
spec("threshold above 1", spec_with(**{"thresholds.tpr": "1.5"}), "j.toml:7: thresholds.tpr")
spec("unknown dimension", spec_with(dimensions='["tone"]'), "j.toml:6: dimensions")
spec("nested 10,000 deep", spec_with(note="[" * 10_000 + "]" * 10_000), "nested more than 100")
spec("prompt file missing", spec_with(prompt='"nope.md"'), "j.toml:3: prompt", "not found")
spec("prompt without placeholders", SPEC, "j.md", "placeholder",
     files={"judges/j.md": "Judge it.\n"})
spec("prompt not UTF-8", SPEC, "j.md:2", "not UTF-8",
     files={"judges/j.md": PROMPT.encode().replace(b"<tools>", b"<t\xffools>")})
spec("prompt is a folder", spec_with(prompt='"sub"'), "sub", "folder",
     files={"judges/sub/x": "x"})
spec("the key itself in the spec", spec_with(api_key=f'"{KEY}"'), "j.toml:6: api_key")
spec("the key as the model", spec_with(model=f'"{KEY}"'), "j.toml:2: model")
spec("the key as api_key_env", spec_with(api_key_env=f'"{KEY}"'), "j.toml:4: api_key_env")
spec("a key in api_base", spec_with(api_base=f'"http://u:{KEY}@127.0.0.1:9/v1"'),
     "j.toml:5: api_base")
spec("a reserved parameter", spec_with(**{"parameters.extra": "{ tools = [] }"}),
     "j.toml:7: parameters.extra.tools", "cannot be set")
spec("unknown reasoning effort", spec_with(**{"parameters.reasoning_effort": '"extreme"'}),
     "j.toml:7: parameters.reasoning_effort")
spec("the key in a multi-line prompt path", spec_with(prompt=f'"""\nj.md\n{KEY}"""'),
     "j.toml:3: prompt", "key itself")

spec("temperature = inf", spec_with(**{"parameters.temperature": "inf"}),
     "j.toml:7: parameters.temperature")
spec("temperature = nan", spec_with(**{"parameters.temperature": "nan"}),
     "parameters.temperature")
spec("a TOML date in parameters.extra",
     spec_with(**{"parameters.extra": "{ seed = 2026-01-01 }"}), "parameters.extra.seed",
     "date or time")

# --------------------------------------------------------------------------- calibration sets

def calibration(name: str, line: str | bytes, *where: str) -> None:
    text: str | bytes = (CALIBRATION + line + "\n") if isinstance(line, str) else (
        CALIBRATION.encode() + line + b"\n")
    bad("calibration", name, "calibrate", "cal.jsonl:3", *where, files={"cal.jsonl": text})


calibration("not JSON", "{", "invalid JSON")
calibration("a byte that is not UTF-8", b'{"id": "c\xff3"}', "not UTF-8")
calibration("nested 10,000 deep", '{"id": "c3", "note": ' + DEEP + "}", "nested more than 100")
calibration("NaN", item(note="x").replace('"x"', "NaN"), "note", "NaN")
calibration("tool_choice fail with arguments pass",
            item(label={"tool_choice": "fail", "arguments": "pass"}), "label.arguments")
# (A later line with the same id, case and response is a person's relabel, not an error.)
calibration("duplicate id for another response", item(id="c1", response={
    "content": "no call", "tool_calls": []}), "id", "duplicate")
calibration("no label", item(label=None).replace(', "label": null', ""), "label")
calibration("unknown split", item(split="train"), "split")
calibration("label maybe", item(label={"tool_choice": "maybe", "arguments": "n/a"}),
            "label.tool_choice")
calibration("turns and tool_calls", item(response={**ITEM["response"], "turns": [
    {"role": "assistant", "content": "x"}]}), "response")
calibration("turns ending with a tool result", item(response={"turns": [
    {"role": "assistant", "tool_calls": []}, {"role": "tool", "name": "x", "content": "{}"}]}),
    "response")
calibration("empty rubric", item(case={**ITEM["case"], "rubric": ""}), "case.rubric")
calibration("unknown field", item(colour="red"), "colour")
calibration("arguments as an object", item(response={"content": None, "tool_calls": [
    {"name": "lookup_order", "arguments": {"order_id": "ord_1"}}]}),
    "response.tool_calls[0].arguments")
calibration("a JSON array", "[]", "JSON object")
calibration("no messages", item(case={**ITEM["case"], "messages": []}), "case.messages")
calibration("a withdrawal of a label never given", j({"withdraw": "c1", "labeller": "ana"}),
            "withdraw", "no standing label by 'ana'")
calibration("a withdrawal without a labeller", j({"withdraw": "c1"}), "labeller")
calibration("an adjudication of an unknown item", j({
    "adjudicate": "c9", "label": {"tool_choice": "pass", "arguments": "n/a"},
    "labeller": "cy", "why": "x"}), "adjudicate", "no item 'c9'")
calibration("an adjudication without a reason", j({
    "adjudicate": "c1", "label": {"tool_choice": "pass", "arguments": "n/a"},
    "labeller": "cy", "why": ""}), "why")
bad("calibration", "empty file", "calibrate", "cal.jsonl", "no items", files={"cal.jsonl": ""})
bad("calibration", "missing", "calibrate", "cal.jsonl", "not found", removed=("cal.jsonl",))


# --------------------------------------------------------------------------- scores files

def scores(name: str, text: str | bytes, *where: str) -> None:
    bad("scores", name, "gate", "base.json", *where, files={"releases/base.json": text})


# Scores rows that change the real base.json are built in the fixture (they need its content).
SCORE_CHANGES: dict[str, Any] = {}


def scores_change(name: str, change: Any, *where: str) -> None:
    SCORE_CHANGES[name] = change
    bad("scores", name, "gate", "base.json", *where)


scores("not JSON", '{"format": ', "invalid JSON")
scores("an array", "[]", "base.json", "JSON object")
scores("empty file", "", "invalid JSON")
scores("nested 10,000 deep", "{\n" + '"x": ' + DEEP + "}", "base.json:2", "nested more than 100")
scores("a byte that is not UTF-8", b'{\n "model": "m\xff"}', "base.json:2", "not UTF-8")
scores_change("NaN share", lambda d: d["figures"].update(right_tool=float("nan")),
              "figures.right_tool", "NaN")
scores_change("Infinity attempts", lambda d: d.update(attempts=float("inf")), "attempts",
              "Infinity")
scores_change("no figures", lambda d: d.pop("figures"), "figures")
scores_change("another format", lambda d: d.update(format="callgate.release/9"), "format")
scores_change("attempts is a word", lambda d: d.update(attempts="many"), "attempts")
scores_change("unknown field", lambda d: d.update(colour="red"), "colour")
scores_change("a case record with a word", lambda d: d["cases"]["a"].update(trials="x"),
              "cases.a.trials")
# A scores file of another model (or agent) named on its own is compared with, the change
# named (test_agent_lineage); one of another suite is refused.
scores_change("another suite", lambda d: d.update(suite_name="other"), "holds agent m",
              "on other")
scores_change("a 5000-digit number", lambda d: json.dumps(d).replace(
    f'"attempts": {d["attempts"]}', f'"attempts": {HUGE_INT}'), "base.json:1",
    "too long to be read")
bad("scores", "baseline path missing", "gate", "nope", "no such scores file",
    args=("gate", "-m", "m", "--release", "r1", "--baseline", "nope", "--db", "callgate.db"))
bad("scores", "a bad file in the baseline folder", "gate", "bad.json", "invalid JSON",
    files={"releases/bad.json": "{"},
    args=("gate", "-m", "m", "--release", "r1", "--baseline", "releases", "--db", "callgate.db"))


# --------------------------------------------------------------------------- output options
# No output may land on the store (or its -wal/-shm/-journal), on an input of the command, on
# another output, or on a folder; checked before the gate decides (it records its decision).

GATE = COMMANDS["gate"]
REPORT = ("report", "-m", "m", "--db", "callgate.db")


def output(name: str, args: tuple[str, ...], *where: str, **kwargs: Any) -> None:
    bad("output", name, args[0], *where, args=args, **kwargs)


for option in ("--scores-out", "--junit", "--markdown"):
    output(f"gate {option} the store", (*GATE, option, "callgate.db"),
           f"{option} callgate.db: is the store")
output("report --html the store", (*REPORT, "--html", "callgate.db"), "--html callgate.db",
       "is the store")
output("report --html the store by another relative path",
       (*REPORT, "--html", "releases/../callgate.db"), "--html releases/../callgate.db",
       "is the store")
output("report --html a symlink to the store", (*REPORT, "--html", "latest.html"),
       "--html latest.html", "is the store", links=(("latest.html", "callgate.db", False),))
output("gate --junit a hard link to the store", (*GATE, "--junit", "ci.xml"),
       "--junit ci.xml", "is the store", links=(("ci.xml", "callgate.db", True),))
output("gate --scores-out the store's WAL", (*GATE, "--scores-out", "callgate.db-wal"),
       "--scores-out callgate.db-wal", "wal file")
output("gate --markdown the store's shared memory", (*GATE, "--markdown", "callgate.db-shm"),
       "--markdown callgate.db-shm", "shm file")
output("report --html the store's journal", (*REPORT, "--html", "callgate.db-journal"),
       "--html callgate.db-journal", "journal file")
output("gate --scores-out the baseline it reads", (*GATE, "--scores-out", "releases/base.json"),
       "--scores-out releases/base.json", "reads or writes")
output("report --html the baseline it reads",
       (*REPORT, "--baseline", "releases/base.json", "--html", "releases/base.json"),
       "--html releases/base.json", "reads or writes")
output("gate --junit and --markdown one file", (*GATE, "--junit", "ci.out", "--markdown",
                                                "ci.out"), "--markdown ci.out", "reads or writes")
output("gate --scores-out and --junit one file", (*GATE, "--scores-out", "r.json", "--junit",
                                                  "./r.json"), "--junit r.json", "reads or writes")
output("gate --junit a folder", (*GATE, "--junit", "releases"), "--junit releases",
       "is a folder")
output("report --html a folder", (*REPORT, "--html", "releases"), "--html releases",
       "is a folder")
output("gate --scores-out a folder", (*GATE, "--scores-out", "releases"),
       "--scores-out releases", "is a folder")
output("gate --markdown in a missing folder", (*GATE, "--markdown", "nope/ci.md"),
       "--markdown nope/ci.md", "does not exist")
output("gate --scores-out under a file", (*GATE, "--scores-out", "callgate.toml/r.json"),
       "--scores-out callgate.toml/r.json", "not a folder")
output("report --html under a file, two folders down",
       (*REPORT, "--html", "callgate.toml/a/b.html"), "--html callgate.toml/a/b.html",
       "not a folder")
output("import bfcl --out the store", ("import", "bfcl", "releases", "--category",
                                       "simple_python", "--out", "callgate.db", "--force"),
       "--out callgate.db: is a file")
output("judge label --set the store", ("judge", "label", "1", "--set", "callgate.db",
                                       "--db", "callgate.db"), "--set callgate.db",
       "is the store")
output("judge label --set in a missing folder", ("judge", "label", "1", "--set",
                                                 "nofolder/new.jsonl", "--db", "callgate.db"),
       "--set nofolder/new.jsonl", "does not exist")
output("judge label --set a folder", ("judge", "label", "1", "--set", "releases",
                                      "--db", "callgate.db"), "--set releases", "is a folder")


# ------------------------------------------------------------------- text that is not Unicode
# A JSON escape of half a surrogate pair ("\\ud800": j() writes a lone surrogate so) is no
# character; a command-line byte that is not UTF-8 reaches Python as one (surrogateescape).

LONE = "\ud800"
NOT_UNICODE = "not Unicode text"
case_line("a lone surrogate in a message", case(messages=[{"role": "user", "content": LONE}]),
          "messages[0].content", NOT_UNICODE)
case_line("a lone surrogate in a tag", case(tags=["x" + LONE]), "tags[0]", NOT_UNICODE)
case_line("a lone low surrogate as an id", case(id="\udc00"), "id", NOT_UNICODE)
case_line("a lone surrogate in a key", j({**CASE_A, "id": "c", LONE: 1}), NOT_UNICODE)
tools_file("a lone surrogate in a description", tools(LOOKUP_ORDER, {
    "type": "function", "function": {"name": "x", "description": LONE}}),
    "[1].function.description", NOT_UNICODE)
meta("a lone surrogate as the suite name", j({"name": LONE}), "name", NOT_UNICODE)
responses("a lone surrogate as the provider", response_line(provider=LONE), "provider",
          NOT_UNICODE)
responses("a lone surrogate as the finish_reason", response_line(finish_reason="\udfff"),
          "finish_reason", NOT_UNICODE)
responses("a lone surrogate in the answer", response_line(response=bare(content=LONE)),
          "response.content", NOT_UNICODE)
calibration("a lone surrogate in a rubric", item(case={**ITEM["case"], "rubric": LONE}),
            "case.rubric", NOT_UNICODE)
scores("a lone surrogate as the model", j({"model": LONE}), "base.json:1: model", NOT_UNICODE)
config("a lone surrogate escape", CONFIG + 'extra = { stop = "\\ud800" }\n',
       "callgate.toml:6", "invalid TOML")


def not_utf8(name: str, args: tuple[str, ...], *where: str) -> None:
    bad("unicode", name, args[0], *where, "not UTF-8 text (byte 0xff", args=args)


SCORE = tuple(COMMANDS["score"])
not_utf8("a byte in --model", ("score", "suite", "-r", "responses.jsonl", "-m", "m\udcff",
                               "--release", "x", "--db", "callgate.db"), "error: -m: ")
not_utf8("a byte in --release", (*SCORE[:7], "r\udcff", "--db", "callgate.db"),
         "error: --release: ")
not_utf8("a byte in --release=", (*SCORE[:6], "--release=r\udcff", "--db", "callgate.db"),
         "error: --release: ")
not_utf8("a byte in the suite folder", ("score", "sui\udcffte", *SCORE[2:]),
         "error: argument 2: ")
not_utf8("a byte in --db", (*SCORE[:-1], "c\udcff.db"), "error: --db: ")
not_utf8("a byte in --param", (*COMMANDS["run"], "--param", "x=\udcff"), "error: --param: ")
not_utf8("a byte in gate --model", ("gate", "-m", "\udcff", "--release", "r1"), "error: -m: ")


# --------------------------------------------------------------------------- small ones

def small(name: str, args: tuple[str, ...], *where: str, **kwargs: Any) -> None:
    bad("small", name, args[0], *where, args=args, **kwargs)


small("score --model ''", ("score", "suite", "-r", "responses.jsonl", "-m", "", "--release",
                           "x", "--db", "callgate.db"), "error: --model: must not be empty")
small("score --release ''", (*SCORE[:7], "", "--db", "callgate.db"),
      "error: --release: must not be empty")
small("score --release of blanks", (*SCORE[:7], "  ", "--db", "callgate.db"),
      "error: --release: must not be empty")
small("run --model ''", ("run", "suite", "--model", "", "--config", "callgate.toml",
                         "--offline", "--db", "callgate.db"), "error: --model: must not be empty")
small("run --release ''", (*COMMANDS["run"], "--release", ""),
      "error: --release: must not be empty")
small("init where .github is a file", ("init", "proj"), "proj/.github: is a file",
      files={"proj/.github": "x"})
small("init where releases is a file", ("init", "proj"), "proj/releases: is a file",
      files={"proj/releases": "x"})
small("init into a file", ("init", "callgate.toml"), "callgate.toml: is a file")


# --------------------------------------------------------------------------- judge commands

def judge_command(name: str, args: tuple[str, ...], *where: str, **kwargs: Any) -> None:
    bad("judge_cmd", name, "judge", *where, args=args, **kwargs)


for width in ("0", "-1", "nan", "inf", "-inf", "101"):
    judge_command(f"audit --width {width}", ("judge", "audit", "1", "--width", width,
                                             "--db", "callgate.db"), "--width", "not a width")
for width in ("0", "-2.5", "nan", "inf"):
    judge_command(f"plan --run --width {width}", ("judge", "plan", "--run", "1", "--width",
                                                  width, "--db", "callgate.db"),
                  "--width", "not a width")
judge_command("calibrate where the certificate would be a folder", tuple(COMMANDS["calibrate"]),
              "certificate judges/j.cert.json: is a folder",
              files={"judges/j.cert.json/kept": "x"})
judge_command("calibrate where the certificate is a link to the store",
              tuple(COMMANDS["calibrate"]),
              "certificate judges/j.cert.json: is the store",
              links=(("judges/j.cert.json", "../callgate.db", False),))


def sqlite_file(*statements: str) -> bytes:
    conn = sqlite3.connect(":memory:")
    for statement in statements:
        conn.execute(statement)
    data = conn.serialize()
    conn.close()
    return data


# --------------------------------------------------------------------------- serve start-up
# All checked before the port is bound: the server never starts (the test stops one that does).

SERVE = ("serve", "--db", "callgate.db", "--port", "0")


def serve(name: str, extra: tuple[str, ...], *where: str, **kwargs: Any) -> None:
    bad("serve", name, "serve", *where, args=kwargs.pop("args", (*SERVE, *extra)), **kwargs)


serve("--db a folder", (), "releases: is a folder", args=("serve", "--db", "releases"))
serve("--db a text file", (), "callgate.toml: not a SQLite database",
      args=("serve", "--db", "callgate.toml"))
serve("--db another program's database", (), "other.db: another program's SQLite database",
      files={"other.db": sqlite_file("CREATE TABLE notes (x)")},
      args=("serve", "--db", "other.db"))
serve("--db missing", (), "nope.db: no such database", args=("serve", "--db", "nope.db"))
serve("--set not JSON", ("--set", "cal.jsonl"), "cal.jsonl:3", "invalid JSON",
      files={"cal.jsonl": CALIBRATION + "{\n"})
serve("--set with a bad label", ("--set", "cal.jsonl"), "cal.jsonl:3", "label.tool_choice",
      files={"cal.jsonl": CALIBRATION + item(label={"tool_choice": "maybe",
                                                    "arguments": "n/a"}) + "\n"})
serve("--set with a 0xff byte", ("--set", "cal.jsonl"), "cal.jsonl:3", "not UTF-8",
      files={"cal.jsonl": CALIBRATION.encode() + b'{"id": "\xff"}\n'})
serve("--set a folder", ("--set", "releases"), "--set releases: is a folder")
serve("--set two files of one name", ("--set", "cal.jsonl", "--set", "more/cal.jsonl"),
      "--set more/cal.jsonl", "same file name", files={"more/cal.jsonl": CALIBRATION})
serve("--set the store", ("--set", "callgate.db"), "--set callgate.db: is the store")
serve("--set in a missing folder", ("--set", "nope/new.jsonl"), "--set nope/new.jsonl",
      "does not exist")
serve("--host not an address", ("--host", "not-an-ip", "--token", "t"),
      "--host not-an-ip: not an IP address")
serve("--host an address out of range", ("--host", "300.1.1.1", "--token", "t"),
      "--host 300.1.1.1")
serve("--host with a port", ("--host", "127.0.0.1:8765", "--token", "t"),
      "--host 127.0.0.1:8765")
serve("--host a URL", ("--host", "http://127.0.0.1", "--token", "t"),
      "--host http://127.0.0.1")


# --------------------------------------------------------------------------- stores to merge
# in.db is a copy of the good store with the row changed; `merge out.db in.db` must refuse it
# naming in.db, the table, the row and the field, make no out.db and leave in.db as it was.

MERGE = ("merge", "out.db", "in.db")


def merged(name: str, *sql: str, where: tuple[str, ...] = (), **kwargs: Any) -> None:
    bad("merge", name, "merge", *where, args=kwargs.pop("args", MERGE), sql=sql, **kwargs)


def verdict_of_a(change: str, *where: str) -> None:
    merged(f"a verdict with {change}", f"UPDATE verdicts SET {change} WHERE case_id = 'a'",
           where=("in.db: table verdicts, run 1 case 'a' repeat 0", *where))


RUN = ("in.db: table runs, run 1",)
merged("a verdict for a case not in the suite", "UPDATE verdicts SET case_id = 'zz' "
       "WHERE case_id = 'a'", where=("in.db: table verdicts, run 1 case 'zz' repeat 0: "
                                     "case_id", "not a case of suite shop"))
merged("a verdict without a response", "DELETE FROM responses WHERE case_id = 'a'",
       where=("table verdicts, run 1 case 'a' repeat 0: case_id", "without a response"))
merged("a verdict of repeat -1", "UPDATE verdicts SET repeat = -1 WHERE case_id = 'a'",
       where=("table verdicts, run 1 case 'a' repeat -1: repeat", "from 0 to 2^63-1"))
merged("a verdict of repeat 'one'", "UPDATE verdicts SET repeat = 'one' WHERE case_id = 'a'",
       where=("table verdicts", "repeat 'one': repeat"))
verdict_of_a("tool = 'wrong_tool'", "right_tool: is true, but the verdict is scored/wrong_tool")
verdict_of_a("arguments = 'wrong_value'", "right_arguments: is true")
verdict_of_a("status = 'provider_error'", "right_tool: is true, but the verdict is "
             "provider_error")
verdict_of_a("tool = 'maybe'", ": tool: ")
verdict_of_a("status = 'done'", ": status: ")
verdict_of_a("arguments = 'fine'", ": arguments: ")
verdict_of_a("schema_kind = 'odd'", ": schema_kind: ")
verdict_of_a("right_tool = 2", ": right_tool: ")
verdict_of_a("calls = 'many'", ": calls: ")
merged("shard 5 of 4", "UPDATE runs SET shard_count = 4, shards = '[5]'",
       where=(*RUN, "shards", "from 1 to 4"))
merged("shard_count 0", "UPDATE runs SET shard_count = 0, shards = '[1]'",
       where=(*RUN, "shard_count", "from 1 to"))
merged("shard_count a word", "UPDATE runs SET shard_count = 'four', shards = '[1]'",
       where=(*RUN, "shard_count"))
merged("shards without shard_count", "UPDATE runs SET shards = '[1]'", where=(*RUN, "shards",
                                                                            "both"))
merged("shards not JSON", "UPDATE runs SET shard_count = 2, shards = '1,2'",
       where=(*RUN, "shards", "not JSON"))
merged("a shard twice", "UPDATE runs SET shard_count = 2, shards = '[1, 1]'",
       where=(*RUN, "shards", "distinct"))
merged("no shard at all", "UPDATE runs SET shard_count = 2, shards = '[]'",
       where=(*RUN, "shards"))
merged("a gate decision that is not JSON", "UPDATE runs SET gate = '{\"released\": '",
       where=(*RUN, "gate", "not JSON"))
merged("a gate decision that is an array", "UPDATE runs SET gate = '[]'",
       where=(*RUN, "gate", "JSON object"))
merged("scores that are not JSON", "UPDATE runs SET scores = 'fine'",
       where=(*RUN, "scores", "not JSON"))
merged("a run whose suite row is missing", "DELETE FROM cases", "DELETE FROM suites",
       where=(*RUN, "suite", "no row in table suites of this store"))
merged("an empty model name", "UPDATE runs SET model = ''", where=(*RUN, "model"))
merged("an empty release label", "UPDATE runs SET release = ''", where=(*RUN, "release"))
merged("a response body that is not JSON", "UPDATE responses SET body = '{' "
       "WHERE case_id = 'a'", where=("table responses, run 1 case 'a' repeat 0: body",))
merged("a negative cost", "UPDATE responses SET cost = -1 WHERE case_id = 'a'",
       where=("table responses", "cost", "at least 0"))
merged("a latency that is a word", "UPDATE responses SET latency_ms = 'slow' "
       "WHERE case_id = 'a'", where=("table responses", "latency_ms"))
merged("negative prompt tokens", "UPDATE responses SET prompt_tokens = -3 WHERE case_id = 'a'",
       where=("table responses", "prompt_tokens"))
merged("a response for a case not in the suite", "UPDATE responses SET case_id = 'zz' "
       "WHERE case_id = 'b'", where=("table responses, run 1 case 'zz'", "case_id"))
merged("case tags that are not JSON", "UPDATE cases SET tags = 'clean' WHERE case_id = 'a'",
       where=("in.db: table cases, case 'a': tags", "not JSON"))
merged("case tags that are numbers", "UPDATE cases SET tags = '[1]' WHERE case_id = 'a'",
       where=("table cases, case 'a': tags", "strings"))
merged("a case body that is an array", "UPDATE cases SET body = '[]' WHERE case_id = 'a'",
       where=("table cases, case 'a': body", "JSON object"))
merged("a case of a suite that is not there", "UPDATE cases SET suite = 'nope' "
       "WHERE case_id = 'a'", where=("table cases, case 'a': suite", "no row"))
merged("suite tools that are not JSON", "UPDATE suites SET tools = 'x'",
       where=("in.db: table suites", "tools", "not JSON"))
CAL_ITEM = "INSERT INTO calibration_items VALUES ('s', 'i', {}, {}, {}, {})"
merged("a calibration item labelled maybe", CAL_ITEM.format("'dev'", "'maybe'", "'pass'", "'{}'"),
       where=("table calibration_items, set 's' item 'i': label_tool_choice",))
merged("a calibration item in split train",
       CAL_ITEM.format("'train'", "'pass'", "'pass'", "'{}'"),
       where=("table calibration_items", "split"))
merged("a calibration item whose body is not JSON",
       CAL_ITEM.format("'dev'", "'pass'", "'n/a'", "'{'"),
       where=("table calibration_items", "body"))
merged("a certificate that is not JSON",
       "INSERT INTO certificates VALUES ('f', 'j', 't', 1, 'certified')",
       where=("table certificates, fingerprint 'f': body", "not JSON"))
merged("a judge output that is not JSON", "INSERT INTO judge_cache VALUES ('k', 'f', 'pass', "
       "'t')", where=("table judge_cache, key 'k': output",))
merged("a cached answer that is not JSON", "INSERT INTO live_responses VALUES ('k', 'm', 'a', "
       "0, '{}', 'x', NULL, 1, 't')", where=("table live_responses, key 'k': line",))
merged("a judgement labelled maybe", "INSERT INTO judgements VALUES (1, 'a', 0, 'f', 'maybe', "
       "'pass', '')", where=("table judgements, run 1 case 'a' repeat 0: tool_choice",))
merged("a judgement for a case not in the suite", "INSERT INTO judgements VALUES (1, 'zz', 0, "
       "'f', 'pass', 'pass', '')", where=("table judgements, run 1 case 'zz'", "case_id"))
merged("a request for a case not in the suite", "INSERT INTO run_requests VALUES (1, 'zz', 0, "
       "'k', 0)", where=("table run_requests, run 1 case 'zz'", "case_id"))
merged("an empty input", where=("in.db: an empty file",), files={"in.db": b""})
merged("a text file as input", where=("in.db: not a SQLite database",),
       files={"in.db": "not a store\n"})
merged("another program's database as input", where=("in.db: another program's SQLite",),
       files={"in.db": sqlite_file("CREATE TABLE notes (x)")})
merged("a SQLite file without tables as input", where=("in.db: a SQLite file without tables",),
       files={"in.db": sqlite_file("PRAGMA user_version = 0")})
merged("a folder as input", where=("releases: is a folder",), args=("merge", "out.db",
                                                                    "releases"))
merged("a missing input", where=("nope.db: file not found",), args=("merge", "out.db",
                                                                   "nope.db"))
merged("a new store that exists", where=("callgate.db: exists", "--into"),
       args=("merge", "callgate.db", "releases/base.json"))
merged("the output as its own input", where=("callgate.db: is the store merged into",),
       args=("merge", "--into", "callgate.db", "callgate.db"))


# --------------------------------------------------------------------------- running the CLI


def cli_in_process(args: list[str] | tuple[str, ...], capsys: pytest.CaptureFixture[str],
                   monkeypatch: pytest.MonkeyPatch) -> tuple[int, str, str]:
    """The console script's own entry point, in this process: (exit code, stdout, stderr)."""
    monkeypatch.setattr(sys, "argv", ["callgate", *args])
    with pytest.raises(SystemExit) as stopped:
        cli.entry()
    out, err = capsys.readouterr()
    code = stopped.value.code
    return (code if isinstance(code, int) else 0), out, err


def store_hash(db: Path) -> str:
    with sqlite3.connect(db) as conn:
        dump = "\n".join(conn.iterdump())
    conn.close()
    return hashlib.sha256(dump.encode()).hexdigest()


@pytest.fixture(autouse=True)
def planted_key(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (KEY_ENV, "OPENAI_API_KEY", "OPENROUTER_API_KEY"):
        monkeypatch.setenv(name, KEY)
    monkeypatch.delenv("CALLGATE_DB", raising=False)
    monkeypatch.delenv("CALLGATE_DEBUG", raising=False)
    monkeypatch.setenv("COLUMNS", "100")  # long lines must stay one line


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of good inputs and a store holding one scored release (model m, release r1)
    with its scores file in releases/base.json."""
    root = tmp_path_factory.mktemp("good")
    (root / "suite").mkdir()
    (root / "suite" / "tools.json").write_text(json.dumps(TOOLS, indent=1))
    (root / "suite" / "cases.jsonl").write_text(CASES)
    (root / "suite" / "suite.json").write_text(j({"name": "shop"}))
    (root / "responses.jsonl").write_text(RESPONSES + j(RESP_T) + "\n")
    (root / "judges").mkdir()
    (root / "judges" / "j.toml").write_text(SPEC)
    (root / "judges" / "j.md").write_text(PROMPT)
    (root / "cal.jsonl").write_text(CALIBRATION)
    (root / "callgate.toml").write_text(CONFIG)
    (root / "releases").mkdir()
    argv = sys.argv
    try:
        for args in ([*COMMANDS["score"][:7], "r1", "--db", "callgate.db"],
                     ["gate", "-m", "m", "--release", "r1", "--db", "callgate.db",
                      "--scores-out", "releases/base.json"]):
            sys.argv = ["callgate", *args]
            with pytest.MonkeyPatch.context() as patch:
                patch.chdir(root)
                with pytest.raises(SystemExit) as stopped:
                    cli.entry()
            assert stopped.value.code in (0, None), args
    finally:
        sys.argv = argv
    (root / "responses.jsonl").write_text(RESPONSES)
    return root


def prepare(template: Path, tmp_path: Path, entry: Bad) -> Path:
    root = tmp_path / "w"
    shutil.copytree(template, root)
    for name, change in SCORE_CHANGES.items():
        if entry.kind == "scores" and entry.name == name:
            doc = json.loads((root / "releases" / "base.json").read_text())
            text = change(doc)  # a change edits the document, or returns the text to write
            (root / "releases" / "base.json").write_text(
                text if isinstance(text, str) else json.dumps(doc))
    for rel in entry.removed:
        (root / rel).unlink()
    for rel in entry.folders:
        (root / rel).unlink()
        (root / rel).mkdir()
    if entry.sql:
        shutil.copy(root / "callgate.db", root / "in.db")
        with sqlite3.connect(root / "in.db") as conn:
            for statement in entry.sql:
                conn.execute(statement)
        conn.close()
    for rel, target, hard in entry.links:
        if hard:
            (root / rel).hardlink_to(root / target)
        else:
            (root / rel).symlink_to(target)
    for rel, content in entry.files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    return root


def assert_one_clean_line(code: int, out: str, err: str, entry: Bad, expected: int = 2) -> str:
    assert code == expected, f"exit {code}\nstdout: {out[-500:]}\nstderr: {err[-2000:]}"
    assert "Traceback" not in out + err
    assert KEY not in out + err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    line = lines[0]
    assert line.startswith("error: "), line
    assert len(line) < 1000, line[:300]  # a long input is never echoed whole
    for needle in entry.where:
        assert needle in line, f"{needle!r} not in {line!r}"
    return line


def marks(entry: Bad) -> list[Any]:
    if entry.xfail:
        return [pytest.mark.xfail(strict=True, reason=entry.xfail)]
    return []


@pytest.mark.parametrize("entry", [pytest.param(e, id=f"{e.kind}: {e.name}", marks=marks(e))
                                   for e in CORPUS])
def test_bad_input(entry: Bad, template: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                   monkeypatch: pytest.MonkeyPatch) -> None:
    root = prepare(template, tmp_path, entry)
    before = store_hash(root / "callgate.db")
    files = folder_state(root)
    monkeypatch.chdir(root)
    if entry.kind == "serve":
        stop_any_server(monkeypatch)
    code, out, err = cli_in_process(entry.args or COMMANDS[entry.command], capsys, monkeypatch)
    assert_one_clean_line(code, out, err, entry)
    assert store_hash(root / "callgate.db") == before
    assert folder_state(root) == files  # nothing written beside the store either


def stop_any_server(monkeypatch: pytest.MonkeyPatch) -> None:
    """A server that starts fails the row (exit 4) instead of serving forever."""
    import uvicorn

    def started(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("the server started")

    monkeypatch.setattr(uvicorn, "run", started)
    monkeypatch.setattr(uvicorn.Server, "run", started)


def folder_state(root: Path) -> dict[str, str]:
    """Every file under `root` but the store and its SQLite side files (the store's bytes
    change on opening; its dump is compared), with a hash of its bytes."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*"))
            if p.is_file() and not p.name.startswith("callgate.db")}


def test_the_corpus_is_large_and_distinct() -> None:
    names = [(e.kind, e.name) for e in CORPUS]
    assert len(set(names)) == len(names)
    inputs = {(e.kind, repr(sorted(e.files.items())), e.folders, e.removed, e.args, e.links,
               e.sql,
               e.name if e.name in SCORE_CHANGES else "") for e in CORPUS}
    assert len(inputs) == len(CORPUS)  # no two rows feed the same bytes
    by_kind = Counter(e.kind for e in CORPUS)
    assert len(CORPUS) + len(HOSTILE) >= 340, by_kind  # issue 22: 250 kinds at least
    assert set(by_kind) == {"suite", "responses", "config", "judge_spec", "calibration",
                            "scores", "output", "merge", "judge_cmd", "serve", "unicode",
                            "small"}


# --------------------------------------------------------------------------- model output


def raw_reply(arguments_text: str) -> Reply:
    """A completion whose tool-call arguments are `arguments_text` verbatim."""
    body = completion(calls=[tool_call("lookup_order", "ARGS")])
    text = json.dumps(body).replace('"ARGS"', json.dumps(arguments_text))
    return Reply(raw=text)


HOSTILE: dict[str, tuple[Reply, dict[str, str]]] = {
    # name: (the loopback's answer, what the stored verdict of case a must show)
    "arguments nested 10,000 deep": (
        raw_reply('{"order_id": ' + DEEP + "}"),
        {"arguments": "invalid_json", "reason": "nested more than 100"}),
    "arguments an object nested 10,000 deep": (
        raw_reply(DEEP_OBJ), {"arguments": "invalid_json", "reason": "nested more than 100"}),
    "arguments of 2 MB": (
        raw_reply('{"order_id": "' + "x" * 2_000_000 + '"}'),
        {"arguments": "invalid_json", "reason": "characters long"}),
    "arguments holding NaN": (
        raw_reply('{"order_id": NaN}'), {"arguments": "invalid_json", "reason": "NaN"}),
    "arguments with a 5000-digit number": (
        raw_reply('{"order_id": ' + HUGE_INT + "}"),
        {"arguments": "invalid_json", "reason": "too long to be read"}),
    "arguments a list": (
        raw_reply("[1, 2]"), {"arguments": "invalid_json", "reason": "not an object"}),
    "token counts beyond 64 bits": (
        Reply(body={**completion(calls=[tool_call("lookup_order", {"order_id": "ord_1"})]),
                    "usage": {"prompt_tokens": 2**70, "completion_tokens": -1,
                              "total_tokens": 2**70}}),
        {"arguments": "right"}),
    "a NaN cost": (
        Reply(raw=json.dumps(completion(calls=[tool_call("lookup_order", {"order_id": "ord_1"})],
                                        cost=1.0)).replace('"cost": 1.0', '"cost": NaN')),
        {"arguments": "right"}),
    "a body nested 10,000 deep": (
        Reply(raw='{"choices": ' + DEEP + "}"), {"status": "provider_error"}),
}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_model_output_never_stops_a_run(
        name: str, loopback: Loopback, template: Path, tmp_path: Path,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    reply, expected = HOSTILE[name]
    root = tmp_path / "w"
    shutil.copytree(template, root)
    (root / "callgate.toml").write_text(CONFIG.replace("http://127.0.0.1:9/v1",
                                                       loopback.base_url))
    loopback.script("[a]", reply)
    loopback.script("[t]", ok(content="done"))
    monkeypatch.chdir(root)
    args = ["run", "suite", "--model", "mini", "--config", "callgate.toml", "-k", "1",
            "--release", "live", "--max-retries", "0", "--db", "callgate.db", "--json"]
    code, out, err = cli_in_process(args, capsys, monkeypatch)
    # A provider error leaves 1 of 3 attempts excluded: a completed run, but not a result (3).
    assert code == (3 if expected.get("status") == "provider_error" else 0), err[-2000:]
    assert "Traceback" not in out + err and KEY not in out + err
    document = json.loads(out)
    verdict = next(v for v in document["attempts"] if v["case_id"] == "a")
    for key, want in expected.items():
        got = verdict["arguments_reason"] if key == "reason" else verdict[key]
        assert want in got, (key, got)
    with sqlite3.connect(root / "callgate.db") as conn:
        status = conn.execute("SELECT status FROM runs WHERE release = 'live'").fetchone()[0]
        stored = conn.execute("SELECT count(*) FROM verdicts v JOIN runs r ON r.id = v.run "
                              "WHERE r.release = 'live'").fetchone()[0]
        tokens = conn.execute("SELECT prompt_tokens, cost FROM responses s JOIN runs r "
                              "ON r.id = s.run WHERE r.release = 'live' AND case_id = 'a'"
                              ).fetchone()
    conn.close()
    assert status == "done" and stored == 3
    if name == "token counts beyond 64 bits":
        assert tokens[0] is None
    if name == "a NaN cost":
        assert tokens[1] is None


# --------------------------------------------------------------------------- real processes

SUBPROCESS_ROWS = ["responses: line nested 10,000 deep",
                   "calibration: a byte that is not UTF-8",
                   "judge_spec: a byte that is not UTF-8",
                   "config: a key in extra",
                   "unicode: a byte in --model"]


@pytest.mark.slow
@pytest.mark.parametrize("row", SUBPROCESS_ROWS)
def test_bad_input_as_a_real_process(row: str, template: Path, tmp_path: Path,
                                     callgate_exe: str, cli_env: dict[str, str]) -> None:
    entry = next(e for e in CORPUS if f"{e.kind}: {e.name}" == row)
    root = prepare(template, tmp_path, entry)
    before = store_hash(root / "callgate.db")
    result = subprocess.run([callgate_exe, *(entry.args or COMMANDS[entry.command])], cwd=root,
                            env={**cli_env, "COLUMNS": "80"}, capture_output=True, text=True,
                            timeout=60)
    assert_one_clean_line(result.returncode, result.stdout, result.stderr, entry)
    assert store_hash(root / "callgate.db") == before


@pytest.mark.slow
def test_a_run_whose_cached_answer_is_hostile_completes_on_resume(
        loopback: Loopback, tmp_path: Path, callgate_exe: str, cli_env: dict[str, str],
        template: Path) -> None:
    """The issue's case: the answer is cached, so before the fix the release could never
    complete. Now the first run completes, and an --offline re-run scores the cached answer."""
    root = tmp_path / "w"
    shutil.copytree(template, root)
    (root / "callgate.toml").write_text(CONFIG.replace("http://127.0.0.1:9/v1",
                                                       loopback.base_url))
    loopback.script("[a]", HOSTILE["arguments nested 10,000 deep"][0])
    args = ["run", "suite", "--model", "mini", "--config", "callgate.toml", "-k", "1",
            "--release", "live", "--db", "callgate.db", "--json"]
    for extra in ([], ["--offline"]):
        result = subprocess.run([callgate_exe, *args, *extra], cwd=root, env=cli_env,
                                capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stderr[-2000:]
        verdict = next(v for v in json.loads(result.stdout)["attempts"] if v["case_id"] == "a")
        assert verdict["arguments"] == "invalid_json"
        assert KEY not in result.stdout + result.stderr


def test_arguments_recorded_as_an_object_are_read_as_their_json(
        template: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/formats.md: some SDKs record parsed arguments; an object is accepted as the JSON
    text it stands for, while a number or a list is the model's invalid_json."""
    root = tmp_path / "w"
    shutil.copytree(template, root)
    lines = [{**RESP_A, "response": bare(call("lookup_order", {"order_id": "ord_1"}))},
             {**RESP_B, "case_id": "b", "response": bare(call("lookup_order", [1]))}]
    (root / "responses.jsonl").write_text("".join(j(x) + "\n" for x in lines))
    monkeypatch.chdir(root)
    code, out, err = cli_in_process(
        ["score", "suite", "-r", "responses.jsonl", "-m", "m", "--release", "obj", "--json",
         "--db", "callgate.db"], capsys, monkeypatch)
    assert code == 0, err
    verdicts = {v["case_id"]: v for v in json.loads(out)["attempts"]}
    assert verdicts["a"]["arguments"] == "right"
    assert verdicts["b"]["tool"] == "unexpected_call"
    assert verdicts["b"]["arguments"] == "invalid_json"


def test_calibrate_checks_the_whole_set_before_the_store_exists(
        template: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "w"
    shutil.copytree(template, root)
    (root / "cal.jsonl").write_text(
        CALIBRATION + item(label={"tool_choice": "fail", "arguments": "pass"}) + "\n")
    monkeypatch.chdir(root)
    code, _, err = cli_in_process(["judge", "calibrate", "judges/j.toml", "--set", "cal.jsonl",
                                   "--db", "fresh.db"], capsys, monkeypatch)
    assert code == 2 and "cal.jsonl:3: label.arguments" in err
    assert not (root / "fresh.db").exists()


def test_a_judge_plan_of_a_set_makes_no_store(
        template: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Planning reads: without a store it plans from no verdicts (it made an empty store)."""
    root = tmp_path / "w"
    shutil.copytree(template, root)
    monkeypatch.chdir(root)
    code, out, err = cli_in_process(["judge", "plan", "judges/j.toml", "--set", "cal.jsonl",
                                     "--db", "fresh.db"], capsys, monkeypatch)
    assert code == 0, err
    assert "not judged yet" in out
    assert not (root / "fresh.db").exists()


@pytest.mark.slow
def test_a_calibration_that_fails_keeps_nothing_of_the_set(
        template: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The judge's endpoint is a closed port: calibrate fails (exit 2) and the store is as it
    was (the set's items were loaded first and kept; now they come with the certificate)."""
    root = tmp_path / "w"
    shutil.copytree(template, root)
    before = store_hash(root / "callgate.db")
    monkeypatch.chdir(root)
    code, _, err = cli_in_process(COMMANDS["calibrate"], capsys, monkeypatch)
    assert code == 2 and "127.0.0.1:9" in err, err
    assert store_hash(root / "callgate.db") == before


def test_init_that_fails_part_way_leaves_nothing(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The disk fills up at the fifth file: the four written and the folders made go again."""
    from callgate.cli.scaffold import write_scaffold
    from callgate.errors import CallgateError

    real_open = Path.open
    opened: list[Path] = []

    def filling_up(self: Path, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        if "x" in mode:
            opened.append(self)
            if len(opened) == 5:
                raise OSError(28, "No space left on device", str(self))
        return real_open(self, mode, *args, **kwargs)

    monkeypatch.setattr(Path, "open", filling_up)
    (tmp_path / "proj").mkdir()
    with pytest.raises(CallgateError, match="No space left on device"):
        write_scaffold(tmp_path / "proj")
    assert len(opened) == 5
    assert list((tmp_path / "proj").iterdir()) == []


def test_the_limits_of_the_reader() -> None:
    assert reading.loads("[" * 100 + "]" * 100) is not None
    with pytest.raises(reading.JSONLimitError, match="nested more than 100"):
        reading.loads("[" * 101 + "]" * 101)
    # Brackets inside strings are text, not nesting.
    assert reading.loads(j({"s": "[" * 5000})) == {"s": "[" * 5000}
    with pytest.raises(reading.JSONLimitError) as found:
        reading.loads('{"a": [1, {"b": NaN}]}')
    assert found.value.field == "a[1].b"
    assert reading.loads('{"c": NaN}', constants=True)["c"] != 0  # read, for reply_line to clean


@pytest.mark.parametrize("reply", ['{"tool_choice": ' + DEEP + "}", DEEP_OBJ,
                                   '{"tool_choice": "pass", "arguments": NaN, "reason": ""}'])
def test_a_hostile_judge_reply_is_a_judge_error(reply: str) -> None:
    with pytest.raises(JudgeOutputError):
        parse_output(reply)


def test_corpus_size_by_kind() -> None:
    by_kind = Counter(e.kind for e in CORPUS)
    by_kind["model_output"] = len(HOSTILE)
    print(dict(by_kind), sum(by_kind.values()))
    assert sum(by_kind.values()) >= 340


def test_serve_on_a_port_in_use_is_one_line_before_anything_starts(
        template: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """It printed its URL, then uvicorn's error, and exited 3 (inconclusive)."""
    root = tmp_path / "w"
    shutil.copytree(template, root)
    monkeypatch.chdir(root)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        code, out, err = cli_in_process(["serve", "--db", "callgate.db", "--port", port],
                                        capsys, monkeypatch)
    assert code == 2 and out == "", (code, out, err)
    assert err.splitlines() == [f"error: --port {port}: already in use on 127.0.0.1; stop what "
                                "listens there, or pass another --port (0 picks a free one)"]


@pytest.mark.slow
def test_serve_on_port_0_prints_the_port_it_bound(template: Path, tmp_path: Path,
                                                  callgate_exe: str,
                                                  cli_env: dict[str, str]) -> None:
    root = tmp_path / "w"
    shutil.copytree(template, root)
    server = subprocess.Popen([callgate_exe, "serve", "--db", "callgate.db", "--port", "0"],
                              cwd=root, env=cli_env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        first = server.stdout.readline()
        found = re.search(r"http://127\.0\.0\.1:(\d+)/", first)
        assert found is not None and found.group(1) != "0", first
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{found.group(1)}/",
                                            timeout=2) as page:
                    assert page.status == 200
                break
            except (urllib.error.URLError, ConnectionError):
                assert time.monotonic() < deadline and server.poll() is None
                time.sleep(0.1)
    finally:
        server.terminate()
        server.wait(timeout=10)
        for stream in (server.stdout, server.stderr):
            if stream is not None:
                stream.close()
