"""Runs a GitHub Actions job locally, as far as callgate's workflows and action need: `run:`
steps under bash with the GITHUB_* variables, GITHUB_OUTPUT, GITHUB_STEP_SUMMARY and the event
file; `${{ }}` expressions (context look-ups, ==, !=, &&, ||, !, always(), success(),
failure()); `if:`; composite actions (callgate's own, run from its action.yml with its
inputs' defaults and its outputs); actions/checkout as a clone of a local "remote" checked out
at the ref GitHub would check out. Other actions (setup-python, artifacts) are recorded and
skipped, and so is the action's install step: callgate is this checkout's, on PATH."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from paths import ROOT

BIN = str(Path(sys.executable).parent)
TOKEN = re.compile(r"\s*(?:('[^']*')|(&&|\|\||==|!=|!|\(|\)|,)|([A-Za-z_][\w.-]*))")


def lookup(context: dict[str, Any], name: str) -> Any:
    value: Any = context
    for part in name.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return "" if value is None else value


def evaluate(expression: str, context: dict[str, Any], status: str) -> Any:
    """One `${{ }}` expression, translated to Python over the context."""
    out, pos = [], 0
    calls = {"always": "True", "success": repr(status == "success"),
             "failure": repr(status == "failure")}
    while pos < len(expression.rstrip()):
        match = TOKEN.match(expression, pos)
        assert match, f"unsupported expression: {expression!r}"
        string, operator, name = match.groups()
        pos = match.end()
        if string is not None:
            out.append(repr(string[1:-1]))
        elif operator:
            out.append({"&&": " and ", "||": " or ", "!": " not "}.get(operator, operator))
        elif name in calls and expression[pos:pos + 2] == "()":
            out.append(calls[name])
            pos += 2
        elif name in ("true", "false"):
            out.append(str(name == "true"))
        else:
            out.append(repr(lookup(context, name)))
    return eval("".join(out))  # the expression's names were replaced by their values


def substitute(text: str, context: dict[str, Any], status: str = "success") -> str:
    def one(match: re.Match[str]) -> str:
        value = evaluate(match[1], context, status)
        return str(value).lower() if isinstance(value, bool) else str(value)

    return re.sub(r"\$\{\{(.*?)\}\}", one, str(text))


def condition(text: Any, context: dict[str, Any], status: str) -> bool:
    if text is None:
        return status == "success"
    expression = str(text).strip()
    if expression.startswith("${{"):
        expression = expression[3:-2]
    uses_status = re.search(r"\b(always|success|failure)\(\)", expression)
    result = bool(evaluate(expression, context, status))
    return result if uses_status else result and status == "success"


@dataclass
class Job:
    """One job's run: its workspace, event and what happened."""

    workspace: Path
    remote: Path
    event_name: str
    event: dict[str, Any]
    sha: str
    ref: str
    env: dict[str, str] = field(default_factory=dict)
    log: list[str] = field(default_factory=list)
    skipped_actions: list[str] = field(default_factory=list)
    summary: str = ""
    status: str = "success"

    def __post_init__(self) -> None:
        self.temp = self.workspace.parent / f"{self.workspace.name}-runner-temp"
        self.temp.mkdir(parents=True)
        self.event_path = self.temp / "event.json"
        self.event_path.write_text(json.dumps(self.event))
        self.summary_path = self.temp / "step-summary.md"
        self.summary_path.touch()

    def base_env(self) -> dict[str, str]:
        keep = {k: v for k, v in os.environ.items()
                if k in ("HOME", "LANG", "TMPDIR", "UV_CACHE_DIR", "SYSTEMROOT")}
        return {**keep, "PATH": f"{BIN}:/usr/bin:/bin", "CI": "true", "GITHUB_ACTIONS": "true",
                "GITHUB_EVENT_NAME": self.event_name, "GITHUB_EVENT_PATH": str(self.event_path),
                "GITHUB_SHA": self.sha, "GITHUB_REF": self.ref,
                "GITHUB_REF_NAME": self.ref.rsplit("/", 1)[-1],
                "GITHUB_WORKSPACE": str(self.workspace), "RUNNER_TEMP": str(self.temp),
                "GITHUB_STEP_SUMMARY": str(self.summary_path), "NO_COLOR": "1",
                "COLUMNS": "100", "GIT_CONFIG_NOSYSTEM": "1", **self.env}

    def context(self, token: str) -> dict[str, Any]:
        return {"github": {"event": self.event, "sha": self.sha, "ref": self.ref,
                           "token": token, "event_name": self.event_name,
                           "workspace": str(self.workspace)},
                "runner": {"temp": str(self.temp)}, "env": {}, "secrets": {}, "steps": {},
                "matrix": {}}

    def run_steps(self, steps: list[dict[str, Any]], context: dict[str, Any],
                  extra_env: dict[str, str]) -> None:
        for step in steps:
            if not condition(step.get("if"), context, self.status):
                continue
            outputs: dict[str, str] = {}
            if "uses" in step:
                outputs = self.uses(step, context, extra_env)
            else:
                outputs = self.run(step, context, extra_env)
            if step.get("id"):
                context["steps"][step["id"]] = {"outputs": outputs}

    def run(self, step: dict[str, Any], context: dict[str, Any],
            extra_env: dict[str, str]) -> dict[str, str]:
        output = self.temp / "github-output"
        output.write_text("")
        env = {**self.base_env(), **extra_env, "GITHUB_OUTPUT": str(output)}
        env.update({k: substitute(v, context, self.status)
                    for k, v in (step.get("env") or {}).items()})
        script = substitute(step["run"], context, self.status)
        shell = ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c"] \
            if step.get("shell") == "bash" else ["bash", "-e", "-c"]
        done = subprocess.run([*shell, script], cwd=self.workspace, env=env,
                              capture_output=True, text=True, timeout=300)
        self.log.append(f"$ {step.get('name', script[:40])}\n{done.stdout}{done.stderr}"
                        f"[exit {done.returncode}]")
        if done.returncode != 0:
            self.status = "failure"
        return dict(line.split("=", 1) for line in output.read_text().splitlines() if line)

    def uses(self, step: dict[str, Any], context: dict[str, Any],
             extra_env: dict[str, str]) -> dict[str, str]:
        action = step["uses"]
        if not re.match(r"actions/checkout@|[\w.-]+/callgate@", action):
            self.skipped_actions.append(action)
            return {}
        given = {k: substitute(v, context, self.status)
                 for k, v in (step.get("with") or {}).items()}
        if action.startswith("actions/checkout@"):
            self.checkout(given.get("ref") or self.sha)
            return {}
        spec = yaml.safe_load((ROOT / "action.yml").read_text())
        inputs = {name: substitute(str(given.get(name, meta.get("default", ""))),
                                   context, self.status)
                  for name, meta in spec["inputs"].items()}
        inner = {**context, "inputs": inputs, "steps": {},
                 "github": {**context["github"], "action_path": str(ROOT)}}
        steps = [s for s in spec["runs"]["steps"] if s.get("id") != "install"]
        self.run_steps(steps, inner, {**extra_env, "GITHUB_ACTION_PATH": str(ROOT)})
        return {name: substitute(meta["value"], inner, self.status)
                for name, meta in spec["outputs"].items()}

    def checkout(self, ref: str) -> None:
        if not (self.workspace / ".git").exists():
            git("clone", "-q", str(self.remote), str(self.workspace), cwd=self.remote)
        git("fetch", "-q", "origin", ref, cwd=self.workspace)
        if self.event_name == "push":  # on a push, checkout leaves the branch checked out
            git("checkout", "-q", "-B", self.ref.rsplit("/", 1)[-1], "FETCH_HEAD",
                cwd=self.workspace)
        else:
            git("checkout", "-q", "--detach", "FETCH_HEAD", cwd=self.workspace)


def git(*args: str, cwd: Path) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com",
           "PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/tmp"),
           "GIT_CONFIG_NOSYSTEM": "1"}
    done = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True)
    assert done.returncode == 0, (args, done.stderr)
    return done.stdout.strip()


def run_job(workflow: Path, job: Job, token: str = "", job_name: str | None = None) -> Job:
    spec = yaml.safe_load(workflow.read_text())
    name = job_name or next(iter(spec["jobs"]))
    context = job.context(token)
    job.run_steps(spec["jobs"][name]["steps"], context, {})
    job.summary = job.summary_path.read_text()
    return job
