"""A release whose only regression is on quarantined cases: a suite of 3 tools (80 cases)
whose release r2 rewrites get_forecast's description ("weather for a city, now or later") and
sends get_weather-000..009 to get_forecast. With those 10 cases quarantined, r2 passes and
nothing is left to fix; without, right tool falls 12.5 points and get_weather's slice fails.
Shared by the quarantine's what-to-fix, web and JUnit tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from factories import case, line, message, tool_call, write_lines, write_suite

from callgate.gating.quarantine import Quarantined
from callgate.scoring.pipeline import score_file
from callgate.store.db import Store
from callgate.suites.suite import load_suite

AGENT = "weather-bot"
QUARANTINED = [f"get_weather-{i:03d}" for i in range(10)]
FORECAST_THEN = "The forecast for a city for the next days."
FORECAST_NOW = "Weather for a city, now or later."
MOVED = "get_forecast took 10 calls meant for get_weather (baseline 0)"
PLAN = [("get_weather", 20), ("get_forecast", 20), ("send_email", 40)]


def _tool(name: str, description: str) -> dict[str, Any]:
    return {"type": "function", "function": {
        "name": name, "description": description,
        "parameters": {"type": "object", "properties": {"to": {"type": "string"}},
                       "required": ["to"], "additionalProperties": False}}}


def tools(forecast: str) -> list[dict[str, Any]]:
    return [_tool("get_weather", "The weather in a city right now."),
            _tool("get_forecast", forecast), _tool("send_email", "Send an email.")]


def cases() -> list[dict[str, Any]]:
    return [case(f"{tool}-{i:03d}", {"type": "calls", "calls": [
        {"tool": tool, "args": {"to": f"{tool}-{i}"}}]}, tags=[tool.split("_")[0]])
        for tool, count in PLAN for i in range(count)]


def answers(release: int) -> list[dict[str, Any]]:
    out = []
    for tool, count in PLAN:
        for i in range(count):
            name = ("get_forecast" if release == 2 and f"{tool}-{i:03d}" in QUARANTINED
                    else tool)
            out.append(line(f"{tool}-{i:03d}", message(tool_call(name, {"to": f"{tool}-{i}"}))))
    return out


def entries() -> list[Quarantined]:
    return [Quarantined(case=c, reason="the weather service answers at random", by="ops")
            for c in QUARANTINED]


def quarantine_file(root: Path) -> Path:
    """The quarantine as `callgate gate --quarantine FILE` takes it."""
    path = root / "quarantine.toml"
    path.write_text("".join(f'[[quarantine]]\ncase = "{q.case}"\nreason = "{q.reason}"\n'
                            f'by = "{q.by}"\n' for q in entries()), encoding="utf-8")
    return path


def scored_store(root: Path) -> Path:
    """Both releases scored into root/callgate.db, r1 gated (a first release)."""
    from callgate.gating.release import gate_release

    db = root / "callgate.db"
    with Store(db) as store:
        for release, forecast in ((1, FORECAST_THEN), (2, FORECAST_NOW)):
            write_suite(root / f"suite{release}", cases(), tools(forecast), name="weather")
            write_lines(root / f"r{release}.jsonl", answers(release))
            score_file(load_suite(root / f"suite{release}"), root / f"r{release}.jsonl", store,
                       model="m", release=f"r{release}", agent=AGENT)
        gate_release(store, AGENT, "r1")
    return db
