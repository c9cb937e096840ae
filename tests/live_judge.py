"""The judge over real HTTP, for the tests that need one: a loopback model scripted with the
judge's verdicts, a judge spec pointed at it, a calibration set it certifies on (and the
`certified` fixture), a judged suite with its recorded responses, and the CLI as a
subprocess."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import KEY_ENV
from loopback import Loopback, ok
from paths import ROOT

TOOLS = [{"type": "function", "function": {
    "name": "escalate", "description": "Hand the conversation to a person.",
    "parameters": {"type": "object", "properties": {"summary": {"type": "string"}},
                   "required": ["summary"], "additionalProperties": False}}}]


def verdict(tool: str, args: str, reason: str = "scripted") -> str:
    return json.dumps({"tool_choice": tool, "arguments": args, "reason": reason})


def make_judge(root: Path, base_url: str) -> Path:
    shutil.copy(ROOT / "judges" / "tool_choice.md", root / "tool_choice.md")
    spec = root / "tool_choice.toml"
    spec.write_text(
        'name = "tool_choice"\nmodel = "openai/judge-2026-01-01"\n'
        f'api_base = "{base_url}"\napi_key_env = "{KEY_ENV}"\nprompt = "tool_choice.md"\n'
        "[parameters]\ntemperature = 0\nsamples = 1\n"
        "[thresholds]\ntpr = 0.9\ntnr = 0.9\nmin_items_per_class = 4\n")
    return spec


def shipped_judge_spec(root: Path, name: str, base_url: str, min_items: int = 3) -> Path:
    """A copy of a shipped judge's prompt (judges/NAME.md) with its model at the loopback and
    low thresholds; no certificate."""
    shutil.copy(ROOT / "judges" / f"{name}.md", root / f"{name}.md")
    path = root / f"{name}.toml"
    path.write_text(
        f'name = "{name}"\nmodel = "openai/judge-2026-01-01"\napi_base = "{base_url}"\n'
        f'api_key_env = "{KEY_ENV}"\nprompt = "{name}.md"\ndimensions = ["{name}"]\n'
        "[parameters]\ntemperature = 0\nsamples = 1\n"
        f"[thresholds]\ntpr = 0.9\ntnr = 0.9\nmin_items_per_class = {min_items}\n")
    return path


LABELS = [("pass", "pass")] * 5 + [("pass", "fail")] * 5 + [("fail", "n/a")] * 5


def make_set(path: Path) -> list[tuple[str, str, str]]:
    """15 test items and 2 dev items; returns (marker, tool label, arguments label)."""
    rows = []
    lines = []
    for index, (tool, args) in enumerate([*LABELS, ("pass", "pass"), ("fail", "n/a")]):
        marker = f"[item-{index:02d}]"
        lines.append(json.dumps({
            "id": f"i{index:02d}", "split": "test" if index < 15 else "dev",
            "category": "crafted",
            "case": {"messages": [{"role": "user", "content": f"{marker} I need a person."}],
                     "tools": TOOLS, "rubric": "Escalate with a faithful summary."},
            "response": {"content": None, "tool_calls": [
                {"name": "escalate", "arguments": json.dumps({"summary": f"{marker} help"})}]},
            "label": {"tool_choice": tool, "arguments": args}, "note": "crafted"}))
        rows.append((marker, tool, args))
    path.write_text("\n".join(lines) + "\n")
    return rows


def run(exe: str, env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([exe, *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=120)


def script_judge(loopback: Loopback, labels: list, wrong: set[str] = frozenset()) -> None:
    for marker, tool, args in labels:
        if marker in wrong:  # the judge gets this one wrong: it passes what a person failed
            tool, args = "pass", "pass"
        loopback.script(marker, ok(content=verdict(tool, args), provider=None, cost=None))


def calibrate_perfect_judge(loopback: Loopback, labels: list, exe: str, env: dict,
                            cwd: Path, spec: Path, calib: Path) -> None:
    """Certify the judge with a loopback model that agrees with every label."""
    script_judge(loopback, labels)
    assert run(exe, env, cwd, "judge", "calibrate", str(spec), "--set", str(calib), "--db",
               "c.db").returncode == 0


def judged_suite(root: Path) -> Path:
    root.mkdir()
    (root / "tools.json").write_text(json.dumps(TOOLS))
    cases = [{"id": f"j{n}", "messages": [{"role": "user", "content": f"[case-{n}] a person"}],
              "tags": ["free-text"], "expect": {"type": "judge", "rubric": "Escalate faithfully."}}
             for n in range(4)]
    cases.append({"id": "plain", "messages": [{"role": "user", "content": "hours?"}],
                  "expect": {"type": "no_call"}})
    (root / "cases.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cases))
    return root


def judged_responses(path: Path) -> Path:
    def call(arguments: str) -> dict:
        return {"role": "assistant", "tool_calls": [
            {"id": "c", "type": "function",
             "function": {"name": "escalate", "arguments": arguments}}]}

    lines = [
        {"case_id": "j0", "response": call('{"summary": "[case-0] ok"}')},
        {"case_id": "j1", "response": call('{"summary": "[case-1] wrong order"}')},
        # schema-invalid: an undeclared parameter; the judge will say pass, and must not win
        {"case_id": "j2", "response": call('{"summary": "[case-2] x", "priority": 1}')},
        {"case_id": "j3", "response": {"role": "assistant", "content": "[case-3] no"}},
        {"case_id": "plain", "response": {"role": "assistant", "content": "9 to 5"}},
    ]
    path.write_text("".join(json.dumps({**item, "finish_reason": "stop"}) + "\n"
                            for item in lines))
    return path


@pytest.fixture
def certified(tmp_path: Path, loopback: Loopback, callgate_exe: str, cli_env: dict) -> Path:
    spec = make_judge(tmp_path, loopback.base_url)
    labels = make_set(tmp_path / "set.jsonl")
    calibrate_perfect_judge(loopback, labels, callgate_exe, cli_env, tmp_path, spec,
                            tmp_path / "set.jsonl")
    return spec
