"""`callgate init`: a tiny working project to start from.

Everything written is a starting point to edit: a suite of five cases (one expects no call,
one two parallel calls, one accepts any of several values), recorded responses that score at
once with no key and no network, a candidates file, the releases folder the gate keeps its
baselines in, and the GitHub Actions workflows (`callgate.cli.workflows`).
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

from callgate.cli.workflows import action_ref, workflows
from callgate.errors import CallgateError

SUITE = "suite"
RESPONSES = "responses/first.jsonl"

_SYSTEM = ("You are the assistant of a small travel agency. Use the tools for live weather "
           "and flights; answer general questions yourself.")

TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather",
        "description": "Current weather in one city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name, e.g. Paris"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"],
                         "description": "Temperature unit; celsius when not asked otherwise"},
            },
            "required": ["city"],
            "additionalProperties": False,
        },
    }},
    {"type": "function", "function": {
        "name": "find_flights",
        "description": "Direct flights between two cities on one day.",
        "parameters": {
            "type": "object",
            "properties": {
                "origin": {"type": "string", "description": "City or IATA airport code"},
                "destination": {"type": "string", "description": "City or IATA airport code"},
                "date": {"type": "string", "format": "date", "description": "YYYY-MM-DD"},
            },
            "required": ["origin", "destination", "date"],
            "additionalProperties": False,
        },
    }},
]


def _case(case_id: str, text: str, tags: list[str], expect: dict[str, Any], note: str
          ) -> dict[str, Any]:
    return {"id": case_id, "messages": [{"role": "system", "content": _SYSTEM},
                                        {"role": "user", "content": text}],
            "tags": tags, "expect": expect, "note": note}


def _call(tool: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"tool": tool, "args": args}


CASES = [
    _case("weather-paris", "What's the weather in Paris right now?", ["clean"],
          {"type": "calls", "calls": [_call("get_weather", {"city": "Paris"})]},
          "One call, one key argument; unit is not compared (but is schema-checked)."),
    _case("weather-nyc", "Is it cold in NYC today? In fahrenheit please.", ["imprecise"],
          {"type": "calls", "calls": [_call("get_weather", {
              "city": {"one_of": ["New York", "New York City", "NYC"]},
              "unit": "fahrenheit"})]},
          "one_of: any listed spelling of the city is right."),
    _case("weather-two-cities", "Compare the weather in Oslo and Lisbon.", ["parallel"],
          {"type": "calls", "mode": "unordered", "calls": [
              _call("get_weather", {"city": "Oslo"}), _call("get_weather", {"city": "Lisbon"})]},
          "Two calls in one message, in any order."),
    _case("flight-bos-ord", "Find me a flight from Boston to Chicago on 2026-12-05.", ["clean"],
          {"type": "calls", "calls": [_call("find_flights", {
              "origin": {"one_of": ["Boston", "BOS"]},
              "destination": {"one_of": ["Chicago", "ORD", "MDW"]},
              "date": "2026-12-05"})]},
          "A city or its airport code."),
    _case("no-call-cloudy", "Thanks! By the way, what does 'partly cloudy' mean?", ["no-tool"],
          {"type": "no_call"},
          "Answerable without a tool: any call here is a needless call."),
]


def _response(case_id: str, calls: list[tuple[str, dict[str, Any]]], content: str | None = None
              ) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = [
            {"id": f"call_{index}", "type": "function",
             "function": {"name": name, "arguments": json.dumps(args)}}
            for index, (name, args) in enumerate(calls, start=1)]
    finish = "tool_calls" if calls else "stop"
    return {"case_id": case_id, "repeat": 0, "response": {
        "object": "chat.completion", "model": "example/travel-agent",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}]}}


RECORDED = [
    _response("weather-paris", [("get_weather", {"city": "Paris", "unit": "celsius"})]),
    _response("weather-nyc", [("get_weather", {"city": "New York", "unit": "fahrenheit"})]),
    _response("weather-two-cities", [("get_weather", {"city": "Lisbon"}),
                                     ("get_weather", {"city": "Oslo"})]),
    _response("flight-bos-ord", [("find_flights", {"origin": "BOS", "destination": "ORD",
                                                   "date": "2026-12-05"})]),
    _response("no-call-cloudy", [], "Partly cloudy means clouds cover part of the sky, "
                                    "roughly three to five eighths of it."),
]

CONFIG = '''\
# Candidates for `callgate run --model NAME` (see the callgate README, "Asking a model").
[[candidates]]
name = "my-agent"                               # the agent: keep it when the model changes
model = "openrouter/openai/gpt-4.1-mini"        # litellm model id
api_key_env = "OPENROUTER_API_KEY"              # the NAME of the variable, never the key
reasoning_effort = "low"                        # "omit" for models that reject it
# provider = { order = ["openai"], allow_fallbacks = false }   # pin one endpoint (OpenRouter)
# extra = { temperature = 0 }
# A local OpenAI-compatible server (vLLM, Ollama) needs no key:
# model = "openai/qwen2.5-7b-instruct"
# api_base = "http://localhost:8000/v1"
'''

CALIBRATION_README = """\
# Calibration sets

Hand-checked labels a judge is calibrated against before callgate lets it score (see the
callgate README, "The judge: cases with several valid answers"). Label judged attempts by hand
with `callgate judge label RUN_ID --set calibration/mine.jsonl`, then certify a judge on them
with `callgate judge calibrate judges/NAME.toml --set calibration/mine.jsonl`. The default
judge's own set ships with callgate: `--set tool_choice`.
"""

# The source `callgate init` fills in when it cannot tell where this callgate came from.
PLACEHOLDER_SOURCE = "git+https://github.com/OWNER/callgate@COMMIT"


def install_source() -> str:
    """Where this callgate came from, for the workflows' `uses:`: the git repository and commit
    it was installed from (pip and uv record them in direct_url.json), else PLACEHOLDER_SOURCE
    for the user to fill. A local path or an unpinned URL is no source a runner can reach, so
    it is not used."""
    from importlib import metadata

    try:
        text = metadata.distribution("callgate").read_text("direct_url.json")
        found = json.loads(text) if text else {}
    except (metadata.PackageNotFoundError, ValueError):
        return PLACEHOLDER_SOURCE
    vcs = found.get("vcs_info") if isinstance(found, dict) else None
    url = found.get("url") if isinstance(found, dict) else None
    if (isinstance(vcs, dict) and vcs.get("vcs") == "git" and isinstance(url, str)
            and url.startswith("https://") and isinstance(vcs.get("commit_id"), str)):
        return f"git+{url}@{vcs['commit_id']}"
    return PLACEHOLDER_SOURCE


def scaffold_files() -> dict[str, str]:
    """Relative path -> text of every file `callgate init` writes."""
    source = install_source()
    return {
        f"{SUITE}/suite.json": json.dumps({
            "name": "starter",
            "description": "A starter suite from `callgate init`: edit the tools and cases."},
            indent=2) + "\n",
        f"{SUITE}/tools.json": json.dumps(TOOLS, indent=2) + "\n",
        f"{SUITE}/cases.jsonl": "".join(json.dumps(case) + "\n" for case in CASES),
        RESPONSES: "".join(json.dumps(line) + "\n" for line in RECORDED),
        "callgate.toml": CONFIG,
        "releases/.gitkeep": "",
        "calibration/README.md": CALIBRATION_README,
        **workflows(action_ref(source), SUITE, RESPONSES),
    }


def write_scaffold(root: Path) -> list[Path]:
    """Write the project under root. Refuses, writing nothing, if any file already exists or a
    folder it needs is a file; a write that fails part-way takes back what it had written."""
    files = {root / relative: text for relative, text in scaffold_files().items()}
    existing = [path for path in files if path.exists()]
    if existing:
        raise CallgateError("not overwriting existing file(s): "
                            + ", ".join(str(path) for path in existing)
                            + "; choose another directory or move them away")
    for path in files:
        for folder in (path.parent, *path.parent.parents):
            if folder.exists() and not folder.is_dir():
                raise CallgateError(f"{folder}: is a file, and callgate init needs a folder "
                                    "there; choose another directory or move it away")
    written: list[Path] = []
    made: list[Path] = []
    try:
        for path, text in files.items():
            missing = [f for f in (path.parent, *path.parent.parents) if not f.exists()]
            path.parent.mkdir(parents=True, exist_ok=True)
            made.extend(reversed(missing))
            with path.open("x", encoding="utf-8") as handle:  # "x": never over a file
                written.append(path)
                handle.write(text)
    except OSError as exc:
        for path in reversed(written):
            path.unlink(missing_ok=True)
        for folder in reversed(made):
            with contextlib.suppress(OSError):
                folder.rmdir()
        raise CallgateError(f"{exc.filename or root}: cannot be written "
                            f"({exc.strerror or exc}); nothing was left behind") from None
    return list(files)
