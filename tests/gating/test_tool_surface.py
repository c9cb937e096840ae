"""What changed in the tool surface, named by the gate: a suite of six tools whose second
release rewrites one description (get_forecast then takes get_weather's calls), renames a tool
(same schema) and adds an enum value; one case's expectation changes too, and is not compared.
The diff is kept with each run (runs.tool_surface) and in the scores file."""

from __future__ import annotations

import copy
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from factories import line, message, tool_call, write_lines
from rich.console import Console

from callgate.gating.decision import decision_json
from callgate.gating.finding import with_cases
from callgate.gating.release import gate_release
from callgate.gating.scores_file import read_release_file, release_from_run
from callgate.gating.surface_diff import parameter_changes, surface_diff, word_diff
from callgate.report.console import gate_markdown, print_gate
from callgate.scoring.pipeline import score_file
from callgate.store.db import Store
from callgate.suites.suite import load_suite
from callgate.suites.surface import ToolSurface, surface_of

CALLGATE = str(Path(sys.executable).with_name("callgate"))


def fn(name: str, description: str, properties: dict[str, Any], required: list[str]
       ) -> dict[str, Any]:
    return {"type": "function", "function": {
        "name": name, "description": description,
        "parameters": {"type": "object", "properties": properties, "required": required}}}


S = {"type": "string"}
TOOLS_1 = [
    fn("get_weather", "Current weather in a city.",
       {"city": S, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, ["city"]),
    fn("get_forecast", "The forecast for the coming days in a city.",
       {"city": S, "days": {"type": "integer"}}, ["city", "days"]),
    fn("search_flights", "Search flights between two airports.",
       {"origin": S, "destination": S}, ["origin", "destination"]),
    fn("book_hotel", "Book a hotel room.", {"city": S, "nights": {"type": "integer"}},
       ["city", "nights"]),
    fn("convert_currency", "Convert an amount between currencies.",
       {"amount": {"type": "number"}, "to": S}, ["amount", "to"]),
    fn("send_email", "Send an email.", {"to": S, "body": S}, ["to", "body"]),
]


def tools_2() -> list[dict[str, Any]]:
    tools = copy.deepcopy(TOOLS_1)
    tools[0]["function"]["parameters"]["properties"]["unit"]["enum"].append("kelvin")
    tools[1]["function"]["description"] = ("The weather in a city: now, or the forecast "
                                           "for the coming days.")
    tools[5]["function"]["name"] = "send_message"
    return tools


def case(case_id: str, tool: str | None, args: dict[str, Any] | None = None) -> dict:
    expect = ({"type": "no_call"} if tool is None
              else {"type": "calls", "calls": [{"tool": tool, "args": copy.deepcopy(args or {})}]})
    return {"id": case_id, "messages": [{"role": "user", "content": f"please {case_id}"}],
            "expect": expect}


CASES: list[tuple[str, str | None, dict[str, Any]]] = [
    *((f"weather-{i}", "get_weather", {"city": f"c{i}"}) for i in range(4)),
    ("forecast-0", "get_forecast", {"city": "Oslo", "days": 3}),
    ("flight-0", "search_flights", {"origin": "OSL", "destination": "BER"}),
    ("hotel-0", "book_hotel", {"city": "Rome", "nights": 2}),
    ("hotel-1", "book_hotel", {"city": "Nice", "nights": 3}),
    ("money-0", "convert_currency", {"amount": 10, "to": "EUR"}),
    ("email-0", "send_email", {"to": "a@b.c"}),
    ("email-1", "send_email", {"to": "d@e.f"}),
    ("hello", None, {}),
]
SYSTEM_1, SYSTEM_2 = "You are a travel helper.", "You are a careful travel helper."


def write(root: Path, release: int) -> Path:
    root.mkdir(parents=True)
    rename = {"send_email": "send_message"} if release == 2 else {}
    cases = [case(cid, rename.get(tool, tool) if tool else None, args)
             for cid, tool, args in CASES]
    if release == 2:  # the checker changed: hotel-1 now expects 4 nights
        cases[7]["expect"]["calls"][0]["args"]["nights"] = 4
    (root / "tools.json").write_text(json.dumps(TOOLS_1 if release == 1 else tools_2()))
    (root / "cases.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cases))
    (root / "suite.json").write_text(json.dumps({
        "name": "travel", "system": SYSTEM_1 if release == 1 else SYSTEM_2,
        "source": {"mcp_server": {"name": "travel-mcp",
                                  "version": "1.0" if release == 1 else "1.1"}}}))
    return root


def answers(release: int) -> list[dict[str, Any]]:
    out = []
    for cid, tool, args in CASES:
        if tool is None:
            out.append(line(cid, message(content="Hello!")))
            continue
        name, sent = tool, dict(args)
        if release == 2 and tool == "send_email":
            name = "send_message"
        if release == 2 and tool == "get_weather":  # the new description took these
            name, sent = "get_forecast", {"city": args["city"], "days": 1}
        out.append(line(cid, message(tool_call(name, {**sent, "body": "hi"}
                                               if "email" in cid else sent))))
    return out


@pytest.fixture
def two_releases(tmp_path: Path) -> Path:
    db = tmp_path / "callgate.db"
    with Store(db) as store:
        for release in (1, 2):
            suite = load_suite(write(tmp_path / f"suite{release}", release))
            responses = write_lines(tmp_path / f"r{release}.jsonl", answers(release))
            score_file(suite, responses, store, model="m", release=f"r{release}")
            if release == 1:
                gate_release(store, "m", "r1")
    return db


def test_the_surface_is_kept_with_the_run(two_releases: Path) -> None:
    with Store(two_releases) as store:
        run = store.find_stored_run("travel", "m", "r2")
        assert run is not None
        kept = ToolSurface.model_validate_json(run.row["tool_surface"])
    assert sorted(kept.tools) == sorted(t["function"]["name"] for t in tools_2())
    assert kept.system == SYSTEM_2 and kept.mcp_server == {"name": "travel-mcp", "version": "1.1"}
    assert kept.expectations == {}  # made from the cases the store keeps, when needed
    with Store(two_releases) as store:
        scores = with_cases(store, run, release_from_run(run, ()))
    assert scores.tool_surface is not None
    assert scores.tool_surface.expectations["email-0"][1:] == ["send_message"]
    assert scores.tool_surface.expectations["hello"][1:] == []


def test_the_gate_names_each_change(two_releases: Path) -> None:
    with Store(two_releases) as store:
        decision, scores = gate_release(store, "m", "r2")
    assert decision.outcome == "regression"
    diff = decision.tool_surface
    assert diff is not None and diff.added == [] and diff.removed == []
    by_tool = {change.tool: change for change in diff.tools}
    assert set(by_tool) == {"get_weather", "get_forecast", "send_message"}
    assert by_tool["send_message"].was == "send_email"
    assert by_tool["send_message"].parameters == [] and by_tool["send_message"].description is None
    assert by_tool["get_weather"].parameters == ['enum of unit: + "kelvin"']
    assert by_tool["get_forecast"].description == (
        "The {+weather in a city: now, or the+} forecast for the coming [-days in a city.-] "
        "{+days.+}")
    assert (by_tool["get_forecast"].cases, by_tool["get_forecast"].worse) == (1, 0)
    assert (by_tool["get_weather"].cases, by_tool["get_weather"].worse) == (4, 4)
    assert diff.system == "You are a {+careful+} travel helper."
    assert diff.mcp_server == "travel-mcp 1.0 → travel-mcp 1.1"
    # the checker changed for hotel-1 (not the release): left out, and listed; the renamed
    # tool's cases are compared (their expectation is the same under the new name)
    assert diff.expectation_changed == ["hotel-1"]
    assert decision.shared_cases == len(CASES) - 1
    assert [c.case_id for c in decision.worse] == [f"weather-{i}" for i in range(4)]
    warning = next(w for w in decision.warnings if w.startswith("the suite changed"))
    assert ("1 tool(s) renamed, 1 tool(s) with a new description, 1 tool(s) with parameters "
            "changed, the system prompt changed, MCP server travel-mcp 1.0 → travel-mcp 1.1; "
            "1 case(s) changed their expectation (not compared)") in warning
    assert scores.tool_surface is not None and "send_message" in scores.tool_surface.tools


def console_text(decision: Any) -> str:
    out = io.StringIO()
    print_gate(decision, Console(file=out, width=200, color_system=None))
    return out.getvalue()


def test_console_json_and_markdown_name_them(two_releases: Path) -> None:
    with Store(two_releases) as store:
        decision, _ = gate_release(store, "m", "r2")
    text = console_text(decision)
    assert "tool surface since r1:" in text
    assert "tool renamed: send_email → send_message (same schema) [2 compared case(s)" in text
    assert ("get_forecast: description: The {+weather in a city: now, or the+} forecast for "
            "the coming [-days in a city.-] {+days.+} [1 compared case(s) expect it: 0 worse, "
            "0 better]") in text
    assert 'get_weather: enum of unit: + "kelvin" [4 compared case(s) expect it: 4 worse' in text
    assert "system prompt: You are a {+careful+} travel helper." in text
    assert "expectation changed, not compared (1): hotel-1" in text
    doc = json.loads(json.dumps(decision_json(decision)))
    assert doc["tool_surface"]["expectation_changed"] == ["hotel-1"]
    assert {t["tool"]: t.get("was") for t in doc["tool_surface"]["tools"]}["send_message"] == (
        "send_email")
    markdown = gate_markdown(decision)
    assert "**What changed: tool surface since r1**" in markdown
    assert "- get_forecast: description: The `{+weather in a city: now, or the+}`" in markdown
    assert '- get_weather: enum of unit: + "kelvin"' in markdown
    assert "- expectation changed, not compared (1): hotel-1" in markdown


def test_a_baseline_without_a_surface_says_so(two_releases: Path) -> None:
    with Store(two_releases) as store:
        store.db.execute("UPDATE runs SET tool_surface = NULL WHERE release = 'r1'")
        decision, _ = gate_release(store, "m", "r2")
    assert decision.tool_surface is not None
    assert decision.tool_surface.unrecorded == (
        "the baseline's tool surface was not recorded (scored by an older callgate): what "
        "changed in it is not named")
    assert decision.shared_cases == len(CASES)  # nothing to leave out: all compared
    assert "tool surface since r1:" in console_text(decision)


def test_the_same_suite_says_nothing(tmp_path: Path) -> None:
    db = tmp_path / "callgate.db"
    with Store(db) as store:
        suite = load_suite(write(tmp_path / "suite", 1))
        for release in ("r1", "r2"):
            score_file(suite, write_lines(tmp_path / "a.jsonl", answers(1)), store, model="m",
                       release=release)
            decision, _ = gate_release(store, "m", release)
    assert decision.outcome == "pass" and decision.tool_surface is None
    assert "tool surface" not in console_text(decision)


def test_words_of_the_diff() -> None:
    assert word_diff("Look up an order by id.", "Look up one order by its id.") == (
        "Look up [-an-] {+one+} order by {+its+} id.")
    long = " ".join(f"w{i}" for i in range(30))
    assert word_diff(long, long.replace("w15", "x")) == "… w12 w13 w14 [-w15-] {+x+} w16 w17 w18 …"
    before = {"type": "object", "required": ["a", "b"], "properties": {
        "a": {"type": "string"}, "b": {"type": "integer", "minimum": 0},
        "c": {"type": "object", "properties": {"d": {"type": "string", "enum": ["x", "y"]}}}}}
    after = {"type": "object", "required": ["a"], "properties": {
        "a": {"type": "array", "items": {"type": "string"}}, "b": {"type": "integer"},
        "c": {"type": "object", "properties": {"d": {"type": "string", "enum": ["y", "z"]}}},
        "e": {"type": "boolean", "description": "new"}}}
    assert parameter_changes(before, after) == [
        "required: − b",
        "parameter a retyped: string → array",
        "parameter b: minimum changed",
        'enum of c.d: + "z"; − "x"',
        "parameter e added (boolean)",
    ]


def test_a_renamed_tool_with_a_new_schema_is_removed_and_added() -> None:
    then = surface_of(TOOLS_1, {})
    tools = copy.deepcopy(TOOLS_1)
    tools[3]["function"]["name"] = "reserve_room"
    tools[3]["function"]["parameters"]["properties"]["guests"] = {"type": "integer"}
    diff = surface_diff(then, surface_of(tools, {}), "r1")
    assert (diff.added, diff.removed, diff.tools) == (["reserve_room"], ["book_hotel"], [])


def test_an_old_scores_file_is_read_without_a_surface() -> None:
    from paths import FIXTURES

    old = read_release_file(FIXTURES / "release_2026.10_c15e4bf.json")
    assert old.tool_surface is None


@pytest.mark.slow
def test_the_cli_names_the_changes_against_a_scores_file(tmp_path: Path) -> None:
    env = {**os.environ, "COLUMNS": "200"}
    env.pop("CALLGATE_DB", None)

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([CALLGATE, *args], cwd=tmp_path, capture_output=True, text=True,
                              env=env, timeout=120)

    for release in (1, 2):
        write(tmp_path / f"suite{release}", release)
        write_lines(tmp_path / f"r{release}.jsonl", answers(release))
        scored = cli("score", f"suite{release}", "-r", f"r{release}.jsonl", "-m", "m",
                     "--release", f"r{release}", "--db", f"s{release}.db")
        assert scored.returncode == 0, scored.stderr
    first = cli("gate", "-m", "m", "--release", "r1", "--db", "s1.db",
                "--scores-out", "releases/r1.json")
    assert first.returncode == 0, first.stdout + first.stderr
    kept = json.loads((tmp_path / "releases/r1.json").read_text())
    assert kept["tool_surface"]["tools"]["send_email"]["description"] == "Send an email."
    gate = cli("gate", "-m", "m", "--release", "r2", "--db", "s2.db", "--baseline",
               "releases", "--json", "--markdown", "summary.md")
    assert gate.returncode == 1, gate.stdout + gate.stderr
    doc = json.loads(gate.stdout)
    assert doc["tool_surface"]["expectation_changed"] == ["hotel-1"]
    assert doc["tool_surface"]["mcp_server"] == "travel-mcp 1.0 → travel-mcp 1.1"
    summary = (tmp_path / "summary.md").read_text()
    assert "- tool renamed: send_email → send_message (same schema)" in summary
    console = cli("gate", "-m", "m", "--release", "r2", "--db", "s2.db", "--baseline",
                  "releases/r1.json")
    assert "get_forecast: description: The {+weather in a city" in console.stdout
