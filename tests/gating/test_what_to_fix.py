"""The gate names what to fix (issue 33): a suite of 6 tools whose release 2 rewrites one
description (get_forecast's, now "weather for a city, now or later") so that get_forecast takes
calls meant for get_weather. The gate names both tools and the moved cell in the console, the
JSON and the Markdown; the slice rule fails the get_weather slice while the overall figures
stay within the 2 points allowed."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from console80 import cli80
from factories import case, line, message, tool_call, write_lines, write_suite
from rich.console import Console

from callgate.gating.confusion import reading
from callgate.gating.holm import holm_adjusted, tarone_count, tarone_holm_adjusted
from callgate.gating.release import gate_release
from callgate.gating.slices import SliceRule
from callgate.gating.what_to_fix import slice_history
from callgate.report.console import gate_junit, gate_markdown, print_gate
from callgate.report.history import history_rows
from callgate.report.slice_history import slice_history_document, slice_history_tables
from callgate.scoring.pipeline import score_file
from callgate.store.db import Store
from callgate.suites.suite import load_suite

MOVED = "get_forecast took 25 calls meant for get_weather (baseline 1)"


def _tool(name: str, description: str, *params: str) -> dict[str, Any]:
    return {"type": "function", "function": {
        "name": name, "description": description,
        "parameters": {"type": "object", "properties": {p: {"type": "string"} for p in params},
                       "required": list(params), "additionalProperties": False}}}


def tools(forecast: str) -> list[dict[str, Any]]:
    return [_tool("get_weather", "The weather in a city right now.", "city"),
            _tool("get_forecast", forecast, "city"),
            _tool("get_air_quality", "Air quality index of a city.", "city"),
            _tool("set_reminder", "Remind the user at a time.", "time"),
            _tool("send_email", "Send an email.", "to", "subject"),
            _tool("search_web", "Search the web.", "query")]


# (tool, key argument, how many cases); no-call cases apart
PLAN = [("get_weather", "city", 60), ("get_forecast", "city", 40),
        ("get_air_quality", "city", 250), ("set_reminder", "time", 250),
        ("send_email", "to", 250), ("search_web", "query", 250)]
NO_CALL = 250


def cases() -> list[dict[str, Any]]:
    out = []
    for tool, key, count in PLAN:
        for i in range(count):
            args: dict[str, Any] = {key: f"{tool}-{i}"}
            expected = {"tool": tool, "args": args}
            out.append(case(f"{tool}-{i:03d}", {"type": "calls", "calls": [expected]},
                            tags=["weather" if "weather" in tool or "forecast" in tool
                                  else "other"]))
    out += [case(f"chat-{i:03d}", {"type": "no_call"}, tags=["chat"]) for i in range(NO_CALL)]
    return out


def answers(release: int) -> list[dict[str, Any]]:
    """Release 1 is right everywhere but one get_weather case (answered by get_forecast);
    release 2 sends 25 get_weather cases to get_forecast (the one of release 1 among them)
    and leaves send_email's subject out twice."""
    out = []
    for tool, key, count in PLAN:
        for i in range(count):
            name = tool
            if tool == "get_weather" and (i == 0 or (release == 2 and i < 25)):
                name = "get_forecast"
            args = {key: f"{tool}-{i}"}
            if tool == "send_email":
                args["subject"] = "hi"
                if release == 2 and i < 2:
                    del args["subject"]
            out.append(line(f"{tool}-{i:03d}", message(tool_call(name, args))))
    out += [line(f"chat-{i:03d}", message(content="Hello!"), finish_reason="stop")
            for i in range(NO_CALL)]
    return out


def project(root: Path) -> tuple[Path, Path]:
    """Both suites (release 2's with get_forecast's description rewritten) and answers."""
    for release, forecast in ((1, "The forecast for a city for the next days."),
                              (2, "Weather for a city, now or later.")):
        write_suite(root / f"suite{release}", cases(), tools(forecast), name="weather")
        write_lines(root / f"r{release}.jsonl", answers(release))
    return root / "suite1", root / "suite2"


@pytest.fixture(scope="module")
def store_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("what-to-fix")
    project(root)
    db = root / "callgate.db"
    with Store(db) as store:
        for release in (1, 2):
            suite = load_suite(root / f"suite{release}")
            score_file(suite, root / f"r{release}.jsonl", store, model="m",
                       release=f"r{release}", agent="weather-bot")
        gate_release(store, "weather-bot", "r1")
    return db


def _console(decision: Any) -> str:
    console = Console(record=True, width=80, color_system=None)
    print_gate(decision, console)
    return console.export_text()


def test_the_gate_names_the_tool_that_took_another_tools_calls(store_path: Path) -> None:
    with Store(store_path) as store:
        decision, current = gate_release(store, "weather-bot", "r2")
    assert decision.outcome == "pass"  # overall: right tool 1.8 points down, within 2
    fix = decision.what_to_fix
    assert fix is not None and fix.confusion is not None
    assert [m.words for m in fix.confusion.moved] == [MOVED]
    cell = next(c for c in fix.confusion.cells
                if (c.expected, c.called) == ("get_weather", "get_forecast"))
    assert (cell.baseline, cell.current) == (1, 25)
    weather = next(s for s in fix.slices if s.kind == "tool" and s.name == "get_weather")
    assert weather.cases == 60 and weather.right_tool.worse == 24
    assert weather.right_tool.baseline == pytest.approx(100 * 59 / 60)
    assert weather.right_tool.current == pytest.approx(100 * 35 / 60)
    assert weather.right_tool.mcnemar_p == pytest.approx(2 * 0.5 ** 24)
    chat = next(s for s in fix.slices if s.name == "no call")
    assert chat.right_tool.change == 0 and chat.calls_per_task == 0
    email = [(p.key, p.how, p.current, p.baseline) for p in fix.confusion.arguments
             if p.tool == "send_email"]
    assert email == [("subject", "missing (schema)", 2, 0)]

    text = _console(decision)
    lead = text.index(f"what to fix: {MOVED}")
    assert lead < text.index("right tool fell")  # at the top of the explanation
    assert "get_weather" in text and "get_forecast" in text
    assert "send_email.subject: missing (schema) in 2 attempt(s) (baseline 0)" in text

    doc = json.loads(decision.model_dump_json())
    assert doc["what_to_fix"]["confusion"]["moved"][0]["words"] == MOVED
    markdown = gate_markdown(decision)
    assert markdown.splitlines()[2:5] == ["**What to fix**", "", f"- {MOVED}"]
    assert "| tool get_weather | 60 | 60 | 58.3 | -40.0 |" in markdown
    assert "| get_weather |  | 25 (1) | 35 (59) |" in markdown
    junit = ET.fromstring(gate_junit(decision, current))
    assert not junit.findall(".//testcase[@classname='callgate.gate.slices']")  # not gated


def test_the_slice_rule_adds_the_failure_the_overall_rule_lets_pass(store_path: Path) -> None:
    with Store(store_path) as store:
        decision, current = gate_release(store, "weather-bot", "r2",
                                         slice_rule=SliceRule(per_tool=True, per_tag=["chat"]))
    assert decision.outcome == "regression" and decision.exit_code == 1
    assert not any(c.failed for c in decision.checks)  # the overall rule passes
    fix = decision.what_to_fix
    assert fix is not None and fix.slice_gate is not None
    assert fix.slice_gate.failed == ["tool get_weather"]
    assert fix.slice_gate.gated == 8 and fix.slice_gate.tests == 16  # 6 tools, no call, chat
    # only get_weather's two tests have flips enough to reject (send_email's 2: p 1/4 at best)
    assert fix.slice_gate.corrected == 2
    assert "at most 5%" in fix.slice_gate.statement
    verdicts = {s.label: s.verdict for s in fix.slices if s.gated}
    assert "tag weather" not in verdicts
    # 250 cases cannot see a 2-point drop at 5% / 16 (5 of 250 flipping worse and none
    # better, a 2-point drop, has one-sided p 0.031 even alone): they cannot tell
    assert {label for label, verdict in verdicts.items() if verdict == "cannot tell"} == (
        set(verdicts) - {"tool get_weather"})
    assert gate_markdown(decision).splitlines()[4:6] == [
        "- slice tool get_weather failed the slice rule", f"- {MOVED}"]
    junit = ET.fromstring(gate_junit(decision, current))
    failed = junit.findall(".//testcase[@name='tool get_weather']/failure")
    assert len(failed) == 1 and "Holm" in failed[0].get("message", "")
    assert len(junit.findall(".//testcase[@name='tool get_forecast']/skipped")) == 1


@pytest.mark.slow
def test_the_cli_names_what_to_fix(tmp_path: Path) -> None:
    suite1, suite2 = project(tmp_path)
    for release, suite in (("r1", suite1), ("r2", suite2)):
        done = cli80("score", str(suite), "--responses", f"r{release[1]}.jsonl", "-m", "m",
                     "--agent", "weather-bot", "--release", release, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
    assert cli80("gate", "--agent", "weather-bot", "--release", "r1",
                 cwd=tmp_path).returncode == 0
    shown = cli80("gate", "--agent", "weather-bot", "--release", "r2", "--markdown", "pr.md",
                  cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert f"what to fix: {MOVED}" in " ".join(shown.stdout.split())
    assert f"- {MOVED}" in (tmp_path / "pr.md").read_text()
    as_json = cli80("gate", "--agent", "weather-bot", "--release", "r2", "--json",
                    cwd=tmp_path)
    moved = json.loads(as_json.stdout)["what_to_fix"]["confusion"]["moved"]
    assert [(m["expected"], m["called"], m["words"]) for m in moved] == [
        ("get_weather", "get_forecast", MOVED)]
    (tmp_path / "callgate.toml").write_text("[gate]\nper_tool = true\n")
    gated = cli80("gate", "--agent", "weather-bot", "--release", "r2", cwd=tmp_path)
    assert gated.returncode == 1, gated.stdout
    assert "slice tool get_weather — REGRESSION (slice rule)" in " ".join(gated.stdout.split())
    (tmp_path / "callgate.toml").write_text("[gate]\nper_tool = true\nalpha = 2\n")
    bad = cli80("gate", "--agent", "weather-bot", "--release", "r2", cwd=tmp_path)
    assert bad.returncode == 2
    assert bad.stderr.startswith("error: callgate.toml:3: gate.alpha: ")


def test_history_by_tool_pairs_each_release_with_the_one_before(store_path: Path) -> None:
    with Store(store_path) as store:
        runs = store.stored_runs("weather-bot", None)
        rows = history_rows(runs)
        slices = slice_history(store, runs)
    first, second = ({s.name: s for s in found if s.kind == "tool"} for found in slices)
    assert first["get_weather"].right_tool.current == pytest.approx(100 * 59 / 60)
    assert first["get_weather"].right_tool.change is None  # nothing before it
    weather = second["get_weather"].right_tool
    assert weather.change == pytest.approx(-40.0) and (weather.worse, weather.better) == (24, 0)
    assert weather.mcnemar_p == pytest.approx(2 * 0.5 ** 24)
    console = Console(record=True, width=80, color_system=None)
    for table in slice_history_tables("weather-bot", rows, slices, "tool"):
        console.print(table)
    text = console.export_text()
    assert max(map(len, text.splitlines())) <= 80
    block = text[text.index("get_weather"):text.index("search_web")]
    assert "-40.0" in block and "1.2e-07" in block
    doc = slice_history_document("weather-bot", rows, slices, "tag")
    assert [s["name"] for s in doc["releases"][1]["slices"]] == ["chat", "other", "weather"]


def test_the_html_report_leads_with_what_to_fix(store_path: Path) -> None:
    from callgate.web.report_html import html_report_text

    with Store(store_path) as store:
        page = html_report_text(store, "weather-bot", "r2", None)
    section = page[page.index('<section id="what-to-fix">'):]
    section = section[:section.index("</section>")]
    assert f"<li>{MOVED}</li>" in section
    assert "<td>get_weather</td><td class=\"num\">60</td>" in section
    assert "<code>send_email.subject</code>: missing (schema) in 2 attempt(s)" in section
    assert page.index("what-to-fix") < page.index("Per tag</h2>")


def test_holm_steps_down_and_tarone_leaves_out_tests_that_cannot_reject() -> None:
    assert holm_adjusted([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    # 3 flips give p 1/8 at best: above 5% / K for any K, never tested
    assert tarone_count([2 ** -20, 2 ** -3, 2 ** -3, 1.0], 0.05) == 1
    adjusted, tested = tarone_holm_adjusted([0.001, 0.2, 0.03], [2 ** -20, 2 ** -3, 2 ** -6],
                                            0.05)
    assert tested == 2 and adjusted == pytest.approx([0.002, 1.0, 0.03])


@pytest.mark.parametrize(("verdict", "kind", "reason", "read"), [
    ("wrong_value", None, 'get_weather.city: expected "Paris", got "Lyon"',
     ("get_weather", "city", "wrong value")),
    ("wrong_value", None, "get_weather.city: expected \"Paris\", got nothing (left out)",
     ("get_weather", "city", "missing")),
    ("schema_violation", "missing_required",
     "turn 2: send_email: missing required argument 'subject'",
     ("send_email", "subject", "missing (schema)")),
    ("schema_violation", "unknown_param", "send_email: 'cc' is not a parameter of send_email",
     ("send_email", "cc", "schema: unknown parameter")),
    ("schema_violation", "bad_enum", "cancel_order.reason: 'x' is not one of ['a']",
     ("cancel_order", "reason", "schema: bad enum")),
    ("invalid_json", None, "call 1 (start_return): arguments are not valid JSON: Expecting",
     ("start_return", "(arguments)", "invalid JSON")),
    ("wrong_value", None, "no matching call", None),
    # a final state's path is the state's, not a tool named 'orders' with a key 'ord_7409...'
    ("wrong_value", None, "final state d71cb5317869 is not the reference's 5a54b409235d: "
     'orders.ord_7409.cancel_reason: unexpected "duplicate"',
     ("(final state)", "orders.ord_7409.cancel_reason", "final state")),
    ("wrong_value", None, "after user turn 2, state 0a1b2c3d4e5f is not the reference's "
     'ffeeddccbbaa: orders.ord_1.status: expected "cancelled", got "placed"',
     ("(final state)", "orders.ord_1.status", "final state")),
])
def test_an_argument_reason_reads_as_tool_key_and_how(verdict: str, kind: str | None,
                                                      reason: str, read: Any) -> None:
    assert reading(verdict, kind, reason) == read


LONG_MODEL = "openrouter/anthropic/claude-sonnet-4.5-20250929-with-a-long-route-name"


@pytest.fixture(scope="module")
def two_agents(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, int]]:
    """weather-bot's r1 (model m) and r2 (model m2, the rewritten description), and a second
    agent with a long model id, on one suite."""
    root = tmp_path_factory.mktemp("two-agents")
    project(root)
    db = root / "callgate.db"
    ids = {}
    with Store(db) as store:
        for release, model, agent in (("r1", "m", "weather-bot"), ("r2", "m2", "weather-bot"),
                                       ("v1", LONG_MODEL, "customer-support-assistant")):
            suite = load_suite(root / ("suite1" if release != "r2" else "suite2"))
            ids[release] = score_file(suite, root / f"r{1 if release != 'r2' else 2}.jsonl",
                                      store, model=model, release=release,
                                      agent=agent).run_id
        gate_release(store, "weather-bot", "r1")
    return db, ids


@pytest.mark.slow
def test_the_compare_pages_name_releases_by_agent_with_the_model_beside(
        two_agents: tuple[Path, dict[str, int]]) -> None:
    from urllib.parse import urlencode

    from webserver import Server

    db, ids = two_agents
    server = Server(db)
    try:
        status, page = server.get("/compare?" + urlencode({"run": [ids["r1"], ids["r2"]]},
                                                          doseq=True))
        assert status == 200
        head = page[page.index("<h1>"):page.index("</h1>")]
        assert "weather-bot r2" in head and "(m2)" in head and "weather-bot r1" in head
        assert f"<li>{MOVED}</li>" in page  # the comparison names what moved
        agents = server.json("/api/compare?suite=weather")["models"]
        assert [(a["agent"], a["model"], a["release"]) for a in agents] == [
            ("customer-support-assistant", LONG_MODEL, "v1"), ("weather-bot", "m2", "r2")]
        status, page = server.get("/compare?suite=weather")
        link = "/compare?" + urlencode({"run": [agents[0]["run_id"], agents[1]["run_id"]]},
                                       doseq=True)
        assert f'href="{link.replace("&", "&amp;")}"' in page
        assert "weather-bot</a> <span class=\"muted small\">(m2)</span>" in page
    finally:
        server.stop()


@pytest.mark.slow
@pytest.mark.browser
@pytest.mark.skipif(not (Path("/usr/bin/chromium").exists()
                         and Path("/usr/bin/chromedriver").exists()),
                    reason="needs /usr/bin/chromium and /usr/bin/chromedriver")
def test_the_index_reads_on_a_390_px_phone(two_agents: tuple[Path, dict[str, int]],
                                           tmp_path: Path) -> None:
    from browser_driver import start_browser
    from webserver import Server

    db, _ = two_agents
    browser: Any = start_browser(tmp_path / "profile")
    server = Server(db)
    try:
        browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
            "width": 390, "height": 844, "deviceScaleFactor": 2, "mobile": False})
        browser.get(server.base + "/")
        scroll, client = browser.execute_script(
            "const e = document.scrollingElement; return [e.scrollWidth, e.clientWidth]")
        assert scroll <= client  # no sideways scrolling
        # every cell of the table is a line across the screen, not a letter-wide column
        widths = browser.execute_script(
            "return [...document.querySelectorAll('table.index td')].map("
            "c => c.getBoundingClientRect().width)")
        assert widths and min(widths) > 300
        text = browser.execute_script(
            "return document.querySelector('table.index').innerText")
        assert LONG_MODEL in text and "customer-support-assistant" in text
        label = browser.execute_script(  # the header is a label before each cell
            "return getComputedStyle(document.querySelector('table.index td'), '::before')"
            ".content")
        assert label == '"agent: "'

    finally:
        server.stop()
        browser.quit()


def test_the_kept_slice_counts_pair_the_cases_as_counting_every_case_does(
        store_path: Path) -> None:
    from collections import Counter

    from callgate.gating.cases import Paired
    from callgate.gating.what_to_fix import kept_slice_pairs

    with Store(store_path) as store:
        runs = {r.release: r for r in store.stored_runs("weather-bot", None)}
        before, after = runs["r1"], runs["r2"]
        assert before.suite != after.suite  # the description changed: another fingerprint
        counted, differing = store.paired_tallies(before.id, after.id,
                                                  (before.suite, after.suite))
        kept = kept_slice_pairs(store, before, Paired.counted(counted, differing))
        every: dict[str, Counter[Any]] = {}
        for mark, *tallies, cases in store.slice_pairs(before.id, after.id, after.suite):
            every.setdefault(mark, Counter())[tuple(tallies[:3]), tuple(tallies[3:])] += cases
    assert kept == every
    assert kept["expect:get_weather"][(1, 1, 1), (1, 0, 0)] == 24
