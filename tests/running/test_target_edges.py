"""A target at the edges: a key in its spec is refused and never stored or printed, what it
says goes through the one redaction rule (keys out, terminal control neutralised), an HTTP
target follows no redirect off its origin and reads no reply past the size cap or the timeout.
The CLI cases search stdout, stderr, the store and every written file for any 12-character
fragment of a marker key."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest
import target_agents
from conftest import lookup_case, write_suite
from loopback import Loopback, ok, tool_call
from paths import TESTS
from secret_search import leaks, marker_key
from target_runs import AGENT, callgate, run
from target_servers import Hostile

from callgate.errors import CallgateError
from callgate.models import bounded
from callgate.models.config import Candidate
from callgate.models.replies import ProviderFailure
from callgate.models.targets import parse_target
from callgate.redaction import clean, credential_in
from callgate.running.targets.kinds import HttpTarget, TargetFailure
from callgate.running.targets.session import TargetSession
from callgate.suites.suite import load_suite

CALL = tool_call("lookup_order", {"order_id": "ord_1"})
ESCAPES = "\x1b]0;owned\x07\x1b[2J\x1b[H\r\x9b"


def spec_with_key(kind: str, key: str, url: str) -> str:
    return {"env": f"cmd:env OPENAI_API_KEY={key} {sys.executable} {AGENT} jsonl",
            "header": f"{url}/agent -H 'Authorization: Bearer {key}'",
            "url": f"{url}/{key}/agent",
            "option": f"cmd:{sys.executable} {AGENT} jsonl --openai-key {key}"}[kind]


@pytest.mark.parametrize("kind", ["env", "header", "url", "option"])
def test_a_spec_holding_a_key_is_refused_without_echoing_it(kind: str) -> None:
    key = marker_key()
    spec = spec_with_key(kind, key, "http://127.0.0.1:9")
    with pytest.raises(ValueError, match="may carry no credential") as refused:
        parse_target(spec)
    assert not leaks(key, {"message": str(refused.value)})
    with pytest.raises(ValueError) as refused_too:
        Candidate(target=spec)
    assert not leaks(key, {"message": str(refused_too.value)})


def test_a_spec_holding_the_value_of_a_secret_named_variable_is_refused() -> None:
    key = marker_key(prefix="plain")  # no key shape: known only as the variable's value
    spec = f"cmd:{sys.executable} {AGENT} jsonl {key}"
    assert credential_in(spec) is None
    with pytest.raises(CallgateError, match="environment variable whose name") as refused:
        TargetSession(Candidate(target=spec), 1, environ={"AGENT_TOKEN": key})
    assert not leaks(key, {"message": str(refused.value)})


def test_the_one_rule_hides_keys_and_neutralises_terminal_control() -> None:
    key = marker_key()
    said = clean(f"boom {key} Authorization: Bearer abcdefgh12345 api_key=zz9zz9 "
                 f"max_tokens=5 {ESCAPES}\n\tnext", ["plainsecretvalue"])
    assert not leaks(key, {"said": said})
    assert "abcdefgh12345" not in said and "zz9zz9" not in said and "max_tokens=5" in said
    assert not any((ord(c) < 32 and c not in "\n\t") or 0x7f <= ord(c) <= 0x9f for c in said)
    assert "\\x1b]0;owned\\x07" in said and said.endswith("\n\tnext")


def test_a_python_targets_error_reaches_the_store_and_stderr_clean(
    loopback: Loopback, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    key = marker_key()
    monkeypatch.setenv("LOOPBACK_URL", loopback.base_url)
    monkeypatch.setattr(target_agents, "behave", lambda *_: (_ for _ in ()).throw(
        RuntimeError(f"the agent's key {key} was refused {ESCAPES}")))
    suite = load_suite(write_suite(tmp_path / "suite", [lookup_case("a")]))
    live = run(tmp_path, suite, "python:target_agents:answer")
    reason = live.result.verdicts[0].tool_reason
    assert "was refused" in reason and "\x1b" not in reason
    err = capsys.readouterr().err
    assert "was refused" in err and "\x1b" not in err
    assert not leaks(key, {"reason": reason, "stderr": err}, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["env", "header", "url"])
def test_run_refuses_a_key_in_the_target_and_writes_it_nowhere(
    kind: str, loopback: Loopback, tmp_path: Path, callgate_exe: str,
    cli_env: dict[str, str],
) -> None:
    key = marker_key()
    loopback.script("[", ok(calls=[CALL]))
    env = {**cli_env, "LOOPBACK_URL": loopback.base_url, "PYTHONPATH": str(TESTS)}
    suite = write_suite(tmp_path / "suite", [lookup_case("a")])
    server = Hostile()
    try:
        done = callgate(callgate_exe, env, tmp_path, "run", str(suite), "--target",
                        spec_with_key(kind, key, server.url), "--target-version", "1",
                        "--db", "t.db", "--json")
    finally:
        server.stop()
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.startswith("error: ") and len(done.stderr.strip().splitlines()) == 1
    assert "may carry no credential" in done.stderr and not server.asked
    assert not leaks(key, {"stdout": done.stdout, "stderr": done.stderr}, tmp_path)


@pytest.mark.slow
def test_an_import_error_quoting_a_key_is_one_clean_line(
    tmp_path: Path, callgate_exe: str, cli_env: dict[str, str]
) -> None:
    key = marker_key()
    agents, work = tmp_path / "agents", tmp_path / "work"
    agents.mkdir()
    (agents / "leaky_agent.py").write_text(
        f"raise ImportError({f'no module for key {key} {ESCAPES}'!r})\n")
    suite = write_suite(work / "suite", [lookup_case("a")])
    done = callgate(callgate_exe, {**cli_env, "PYTHONPATH": str(agents)}, work, "run",
                    str(suite), "--target", "python:leaky_agent:answer", "--db", "t.db")
    assert done.returncode == 2
    assert done.stderr.startswith("error: --target python:leaky_agent:answer: cannot import")
    assert len(done.stderr.strip().splitlines()) == 1 and "\x1b" not in done.stderr
    assert not leaks(key, {"stdout": done.stdout, "stderr": done.stderr}, work)


def ask(target: HttpTarget, timeout: float = 10) -> object:
    async def once() -> object:
        try:
            return await target.ask({"messages": [], "tools": [], "metadata": {}}, timeout)
        finally:
            await target.aclose()
    return asyncio.run(once())


@pytest.fixture
def hostile() -> object:
    servers = [Hostile(), Hostile()]
    yield servers
    for server in servers:
        server.stop()


def test_an_http_target_follows_no_redirect_off_its_origin(hostile: list[Hostile]) -> None:
    here, elsewhere = hostile
    here.redirect_to = f"{elsewhere.url}/agent"
    with pytest.raises(TargetFailure, match=r"HTTP 307 to http://127\.0\.0\.1:") as refused:
        ask(HttpTarget(parse_target(f"{here.url}/away"), 1))
    assert "off the target's origin" in str(refused.value) and not refused.value.retryable
    assert elsewhere.asked == []  # the case's messages never reached the other listener
    assert ask(HttpTarget(parse_target(f"{here.url}/here"), 1)) == {
        "message": {"content": "hello"}}  # on its own origin, followed
    assert here.asked[-2:] == ["/here", "/answer"]


def test_an_http_targets_reply_is_capped_after_decompression(
    hostile: list[Hostile], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bounded, "REPLY_LIMIT", 1 << 20)
    server = hostile[0]
    for path in ("/bomb", "/endless"):
        with pytest.raises(TargetFailure, match=r"over 1 MiB \(after decompression\)"):
            ask(HttpTarget(parse_target(f"{server.url}{path}"), 1))
    server.bomb_size = 512 << 10  # under the cap: read whole
    with pytest.raises(ValueError, match="not JSON"):  # read whole, then found not JSON
        ask(HttpTarget(parse_target(f"{server.url}/bomb"), 1))


def test_an_http_target_gets_the_key_api_key_env_names(tmp_path: Path) -> None:
    session = TargetSession(Candidate(target="http://127.0.0.1:9/agent",
                                      api_key_env="AGENT_KEY"), 1,
                            environ={"AGENT_KEY": "k-123456789"})
    assert session.target._headers["Authorization"] == "Bearer k-123456789"  # type: ignore[attr-defined]
    assert "k-123456789" not in session.request_record({"messages": []})
    with pytest.raises(CallgateError, match="AGENT_KEY: the variable is not set"):
        TargetSession(Candidate(target="http://127.0.0.1:9/agent", api_key_env="AGENT_KEY"), 1,
                      environ={})


def test_an_endpoints_failure_message_goes_through_the_rule_too() -> None:
    """A model's or judge's endpoint error (ProviderFailure), as every client builds it."""
    key = marker_key()
    failure = ProviderFailure("server_error", f"upstream said {key} {ESCAPES}")
    assert not leaks(key, {"message": failure.message}) and "\x1b" not in failure.message
