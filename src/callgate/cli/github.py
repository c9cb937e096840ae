"""GitHub Actions glue for the gate: the step outputs, the job summary and one pull-request
comment, kept up to date by a hidden marker. Only the standard library talks to the REST API
(no `gh` CLI): the base URL is `GITHUB_API_URL`, so a test points it at a loopback server.

Writing the comment is never the gate's failure: a token that cannot write (a pull request from
a fork gets a read-only one) or an API that is down gives a notice or a warning, and the gate's
own exit code is what the action passes on.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from callgate.errors import InputError

MARKER = "<!-- callgate:gate-comment"
COMMENT_LIMIT = 65_000  # GitHub refuses bodies over 65,536 characters
OUTCOMES = {0: "pass", 1: "regression", 2: "error", 3: "inconclusive"}
PULL_REQUEST_EVENTS = ("pull_request", "pull_request_target")

Echo = Callable[[str], None]


class ApiError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def marker(key: str) -> str:
    """The hidden line that finds this gate's comment again; the key tells several gates of
    one pull request (one per agent or suite) apart."""
    return f"{MARKER} {key} -->" if key else f"{MARKER} -->"


def figures(scores: Mapping[str, Any] | None) -> dict[str, str]:
    """The three figures of a scores file, as step outputs (empty where unknown)."""
    found = (scores or {}).get("figures") or {}
    tool, arguments = found.get("right_tool") or {}, found.get("right_arguments") or {}
    calls = found.get("calls_per_task")
    return {"right-tool": _number(tool.get("pct")),
            "right-arguments": _number(arguments.get("pct")),
            "calls-per-task": _number(calls)}


def _number(value: object) -> str:
    return f"{value:.1f}" if isinstance(value, int | float) else ""


def fold_cases(summary: str) -> str:
    """The gate's Markdown with each bold-headed list of cases folded into a <details> block:
    the figures stay in sight, the flipped cases one click away."""
    out: list[str] = []
    lines = summary.splitlines()
    index = 0
    while index < len(lines):
        line = lines[index]
        items_at = index + 2
        if (line.startswith("**") and index + 1 < len(lines) and not lines[index + 1].strip()
                and items_at < len(lines) and lines[items_at].startswith("- ")):
            end = items_at
            while end < len(lines) and lines[end].startswith("- "):
                end += 1
            out += [f"<details><summary>{line.strip('*').strip()}</summary>", "",
                    *lines[items_at:end], "", "</details>"]
            index = end
            continue
        out.append(line)
        index += 1
    return "\n".join(out) + "\n"


def comment_body(summary: str, key: str, exit_code: int, report_url: str | None) -> str:
    footer = f"Exit code {exit_code} ({OUTCOMES.get(exit_code, 'error')})"
    if report_url:
        footer += f"; the HTML report is an artifact of [this run]({report_url})"
    body = f"{marker(key)}\n{fold_cases(summary)}\n<sub>{footer}.</sub>\n"
    if len(body) > COMMENT_LIMIT:
        body = body[:COMMENT_LIMIT] + "\n\n… (cut: the job summary has it all)\n"
    return body


class Api:
    """The three REST calls the comment needs, on the base URL GitHub gives the job."""

    def __init__(self, base: str, repository: str, token: str) -> None:
        self.base = base.rstrip("/")
        self.repository = repository
        self.token = token

    def call(self, method: str, path: str, payload: dict[str, Any] | None = None) -> Any:
        data = json.dumps(payload).encode() if payload is not None else None
        request = urllib.request.Request(
            f"{self.base}/repos/{self.repository}{path}", data=data, method=method,
            headers={"Accept": "application/vnd.github+json", "User-Agent": "callgate",
                     "X-GitHub-Api-Version": "2022-11-28",
                     "Authorization": f"Bearer {self.token}",
                     "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                text = response.read()
        except urllib.error.HTTPError as exc:
            exc.close()
            raise ApiError(exc.code, f"{method} {path}: HTTP {exc.code}") from None
        except (urllib.error.URLError, OSError) as exc:
            raise ApiError(0, f"{method} {path}: {getattr(exc, 'reason', exc)}") from None
        return json.loads(text) if text else None

    def find_comment(self, number: int, tag: str) -> int | None:
        page = 1
        while True:
            found = self.call("GET", f"/issues/{number}/comments?per_page=100&page={page}")
            if not isinstance(found, list):
                return None
            for comment in found:
                if isinstance(comment, dict) and tag in str(comment.get("body") or ""):
                    return int(comment["id"])
            if len(found) < 100:
                return None
            page += 1

    def upsert(self, number: int, tag: str, body: str) -> str:
        existing = self.find_comment(number, tag)
        if existing is None:
            self.call("POST", f"/issues/{number}/comments", {"body": body})
            return "created"
        self.call("PATCH", f"/issues/comments/{existing}", {"body": body})
        return "updated"


def pull_request_number(env: Mapping[str, str]) -> int | None:
    if env.get("GITHUB_EVENT_NAME") not in PULL_REQUEST_EVENTS:
        return None
    path = env.get("GITHUB_EVENT_PATH")
    if not path or not Path(path).is_file():
        return None
    event = _json(Path(path))
    number = (event.get("pull_request") or {}).get("number") or event.get("number")
    return int(number) if number else None


def post_comment(env: Mapping[str, str], body: str, tag: str, echo: Echo) -> str:
    """Create or update the comment; says what happened as a workflow command. Never raises
    for the API: the comment is a courtesy, the gate is the exit code."""
    number = pull_request_number(env)
    if number is None:
        echo("::notice::callgate: not a pull request, no comment")
        return "skipped"
    token, repository = env.get("GITHUB_TOKEN", ""), env.get("GITHUB_REPOSITORY", "")
    if not token or not repository:
        echo("::notice::callgate: no token or repository, no pull-request comment")
        return "skipped"
    api = Api(env.get("GITHUB_API_URL") or "https://api.github.com", repository, token)
    try:
        done = api.upsert(number, tag, body)
    except ApiError as exc:
        if exc.status in (401, 403, 404):
            echo("::notice::callgate: the token cannot write to this pull request (a pull "
                 f"request from a fork gets a read-only one), no comment ({exc})")
            return "skipped"
        echo(f"::warning::callgate: the pull-request comment failed ({exc}); the gate's "
             "decision is in the job summary")
        return "failed"
    echo(f"callgate: pull-request comment {done} on #{number}")
    return done


def _json(path: Path) -> dict[str, Any]:
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(path, f"cannot be read ({exc})") from None
    except ValueError as exc:
        raise InputError(path, f"not JSON ({exc})", line=getattr(exc, "lineno", None)) from None
    if not isinstance(found, dict):
        raise InputError(path, "not a JSON object")
    return found


def _append(path: str | None, text: str) -> None:
    if path:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(text)


def publish(summary_path: Path, scores_path: Path | None, exit_code: int, key: str,
            comment: bool, env: Mapping[str, str] | None = None,
            echo: Echo = print) -> dict[str, str]:
    """Everything after the gate: step outputs, job summary, the comment. Returns the outputs."""
    env = os.environ if env is None else env
    summary = summary_path.read_text(encoding="utf-8") if summary_path.is_file() else (
        f"### callgate: no decision (exit code {exit_code}); see the job log\n")
    scores = _json(scores_path) if scores_path is not None and scores_path.is_file() else None
    outcome = OUTCOMES.get(exit_code, "error")
    outputs = {"outcome": outcome, "exit-code": str(exit_code), **figures(scores)}
    _append(env.get("GITHUB_OUTPUT"), "".join(f"{k}={v}\n" for k, v in outputs.items()))
    _append(env.get("GITHUB_STEP_SUMMARY"), summary)
    run_url = None
    if env.get("GITHUB_SERVER_URL") and env.get("GITHUB_RUN_ID"):
        run_url = (f"{env['GITHUB_SERVER_URL']}/{env.get('GITHUB_REPOSITORY', '')}"
                   f"/actions/runs/{env['GITHUB_RUN_ID']}")
    if comment:
        outputs["comment"] = post_comment(env, comment_body(summary, key, exit_code, run_url),
                                          marker(key), echo)
    return outputs
