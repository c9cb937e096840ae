"""`run --estimate`: the attempts a run would make (after the cache), their prompt tokens, the
completion tokens expected and the dollars, counted offline without calling anything; checked
against the usage a loopback server reports for the same run. The server counts the prompt it
receives itself, as OpenAI documents its chat format (tiktoken's cl100k_base over each message's
text, 3 tokens a message, 3 to prime the reply, and the tool definitions in the TypeScript-like
form OpenAI's models read them in), and the completion it sends."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from conftest import KEY, KEY_ENV, marker, write_suite
from live_runs import config, run, settings
from loopback import Loopback, Reply, completion

from callgate.models.config import Candidate
from callgate.running.estimate import DEFAULT_COMPLETION_TOKENS, estimate_run
from callgate.store.db import Store
from callgate.suites.suite import load_suite

SYSTEM = ("You are the support agent of an online shop. Look orders up before you answer "
          "anything about them, never cancel an order without the customer's confirmation, "
          "and answer questions about opening hours, returns and delivery times directly.")
ANSWER = "Your order left the warehouse this morning and should arrive within two days."


def _encoding() -> Any:
    from callgate.models.litellm_client import import_litellm

    import_litellm()
    # litellm's bundled copy of tiktoken's cl100k_base (tiktoken itself would download it)
    from litellm.litellm_core_utils.default_encoding import encoding

    return encoding


def _type(spec: dict[str, Any]) -> str:
    if "enum" in spec:
        return " | ".join(json.dumps(v) for v in spec["enum"])
    kind = spec.get("type", "any")
    return {"integer": "number", "array": "any[]", "object": "object"}.get(kind, kind)


def tools_text(tools: list[dict[str, Any]]) -> str:
    """The tool definitions as OpenAI's models are known to read them: a TypeScript namespace
    of functions, one typed argument object each, descriptions as comments."""
    lines = ["namespace functions {", ""]
    for tool in tools:
        function = tool["function"]
        if function.get("description"):
            lines.append(f"// {function['description']}")
        parameters = function.get("parameters") or {}
        required = set(parameters.get("required") or ())
        lines.append(f"type {function['name']} = (_: {{")
        for name, spec in (parameters.get("properties") or {}).items():
            if spec.get("description"):
                lines.append(f"// {spec['description']}")
            lines.append(f"{name}{'' if name in required else '?'}: {_type(spec)},")
        lines += ["}) => any;", ""]
    lines.append("} // namespace functions")
    return "\n".join(lines)


def counting_server() -> Loopback:
    encoding = _encoding()

    def reply(request: dict[str, Any]) -> Reply:
        prompt = 3 + sum(3 + len(encoding.encode(str(m.get("content") or "")))
                         for m in request["messages"])
        if request.get("tools"):
            prompt += len(encoding.encode(tools_text(request["tools"])))
        body = completion(content=ANSWER, cost=None)
        body["usage"] = {"prompt_tokens": prompt,
                         "completion_tokens": len(encoding.encode(ANSWER)),
                         "total_tokens": 0}
        return Reply(body=body)

    return Loopback(default=reply).start()


def _suite(tmp_path: Path, cases: int) -> Path:
    questions = ["Where is my order ord_{n}?", "Can you tell me when order ord_{n} arrives? "
                 "I ordered it last week and I need it for a birthday on Saturday.",
                 "What are your opening hours on Sunday?"]
    return write_suite(tmp_path / "suite", [
        {"id": f"c{n:02d}", "messages": [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": f"{marker(f'c{n:02d}')} "
                                        + questions[n % 3].format(n=n)}],
         "expect": {"type": "no_call"}} for n in range(cases)])


@pytest.fixture
def server() -> Any:
    loopback = counting_server()
    try:
        yield loopback
    finally:
        loopback.stop()


def _candidate(loopback: Loopback, model: str = "openrouter/test/model") -> Candidate:
    return Candidate(name="cand", model=model, api_base=loopback.base_url, api_key_env=KEY_ENV)


def test_the_estimate_is_within_ten_percent_of_the_tokens_a_run_reports(
    server: Loopback, tmp_path: Path
) -> None:
    suite = load_suite(_suite(tmp_path, 12))
    run_settings = settings(repeats=2)
    with Store(tmp_path / "callgate.db") as store:
        before = estimate_run(suite, _candidate(server), store, run_settings)
    assert server.requests == []  # nothing was called
    assert (before.attempts, before.cached, before.to_call) == (24, 0, 24)
    assert before.completion_tokens_per_attempt == DEFAULT_COMPLETION_TOKENS
    assert "default" in before.completion_source
    assert before.usd is None and "not in litellm's offline price map" in before.price_source

    live = run(tmp_path, suite, server, run_settings)
    reported = live.result.scores.prompt_tokens
    assert reported is not None and live.called == 24
    assert before.prompt_tokens is not None
    assert abs(before.prompt_tokens - reported) <= 0.10 * reported, (before.prompt_tokens,
                                                                     reported)

    # After the run: everything is in the store, and the completion tokens are the agent's own.
    with Store(tmp_path / "callgate.db") as store:
        after = estimate_run(suite, _candidate(server), store, settings(repeats=3))
    assert (after.attempts, after.cached, after.to_call) == (36, 24, 12)
    per = live.result.scores.completion_tokens / 24  # type: ignore[operator]
    assert after.completion_tokens_per_attempt == pytest.approx(per)
    assert after.completion_tokens == round(per * 12)
    assert after.prompt_tokens is not None
    assert abs(after.prompt_tokens - reported / 2) <= 0.10 * reported / 2


def test_the_estimate_prices_a_model_in_litellms_map(server: Loopback, tmp_path: Path) -> None:
    from callgate.models.litellm_client import import_litellm

    suite = load_suite(_suite(tmp_path, 3))
    with Store(tmp_path / "callgate.db") as store:
        found = estimate_run(suite, _candidate(server, "openai/gpt-4o-mini"), store,
                             settings(repeats=1))
    prices = import_litellm().model_cost["gpt-4o-mini"]
    assert found.prompt_tokens is not None and found.usd is not None
    assert found.usd == pytest.approx(found.prompt_tokens * prices["input_cost_per_token"]
                                      + found.completion_tokens
                                      * prices["output_cost_per_token"])
    assert found.price_source == "litellm's offline price map"


@pytest.mark.slow
def test_the_cli_estimate_calls_nothing_and_prints_json(
    server: Loopback, tmp_path: Path, callgate_exe: str, cli_env: dict[str, str]
) -> None:
    suite = _suite(tmp_path, 5)
    cfg = config(tmp_path, server)
    args = [callgate_exe, "run", str(suite), "-m", "router", "-k", "2", "--config", str(cfg),
            "--db", "c.db", "--estimate"]
    done = subprocess.run([*args, "--json"], env=cli_env, cwd=tmp_path, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert (doc["attempts"], doc["to_call"]) == (10, 10) and doc["prompt_tokens"] > 0
    assert server.requests == [] and KEY not in done.stdout + done.stderr
    text = subprocess.run(args, env=cli_env, cwd=tmp_path, capture_output=True, text=True,
                          timeout=600)
    assert text.returncode == 0, text.stderr
    assert "nothing was called" in text.stdout and "10 to make" in text.stdout
    assert server.requests == []


def test_a_target_is_counted_in_attempts_not_tokens(tmp_path: Path) -> None:
    suite = load_suite(_suite(tmp_path, 4))
    with Store(tmp_path / "callgate.db") as store:
        found = estimate_run(suite, Candidate(target="python:my_agent:answer"), store,
                             settings(repeats=3))
    assert (found.attempts, found.to_call, found.prompt_tokens, found.usd) == (12, 12, None,
                                                                               None)
    assert "its own loop" in found.notes[0] and "prompt tokens: unknown" in found.text()
