"""The claim_support judge on production traces (issue 39, "the judge's dimensions that need
no reference"; `score --traces --production --claims-judge`): each trace the real
instrumentations wrote is judged against its own tool results, with the payload a suite case
gets, by a scripted judge model on the loopback server over real HTTP."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from conftest import KEY, KEY_ENV
from factories import write_suite
from importers.test_traces import CASES, RESULTS, TOOLS, _body, own_format, record
from live_judge import shipped_judge_spec
from loopback import Loopback, Reply, error, ok, tool_call
from production_traces import (
    CONVERSATIONS,
    script,
    shifted,
    trace_ids,
    write_folder,
)
from typer.testing import CliRunner

from callgate.cli.main import app
from callgate.importers.traces import read_trace_file
from callgate.judging.payloads import judge_payloads
from callgate.judging.step import judge_step
from callgate.scoring.production import _answered, score_production
from callgate.scoring.production_claims import trace_payloads
from callgate.store.db import Store
from callgate.suites.responses import parse_response
from callgate.suites.suite import load_suite

# A conversation whose final answer contradicts its tool result (ord_2 is in Linz).
WRONG = {"id": "wrong", "messages": [{"role": "user", "content": "Where is my order ord_2?"}],
         "tool_results": RESULTS}
WRONG_SCRIPT = [_body(calls=[tool_call("lookup_order", {"order_id": "ord_2"}, "c1")]),
                _body(calls=[tool_call("track_shipment", {"order_id": "ord_2"}, "c2")]),
                _body(content="It is in Vienna and will arrive today.")]
PICKED = ("order", "wrong", "chat", "valid", "failed")


def _script(server: Loopback) -> None:
    script(server)
    server.script_turns("order ord_2", *(Reply(body=b) for b in WRONG_SCRIPT))


def _record(instrumentation: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
            name: str = "t.jsonl") -> tuple[Path, dict[str, str], Any]:
    conversations = [c for c in [*CONVERSATIONS, WRONG] if c["id"] in PICKED]
    traced = record(instrumentation, monkeypatch, conversations, _script)
    return traced.write(tmp_path / name), trace_ids(traced), traced


def _verdict(text: str, reason: str) -> Reply:
    return ok(content=json.dumps({"claim_support": text, "reason": reason}), provider=None,
              cost=None)


def _judge(loopback: Loopback) -> None:
    """The judge model: a fail where the answer says Vienna, a pass where it says Brno."""
    loopback.script("It is in Vienna", _verdict("fail", "Vienna: the result says Linz"))
    loopback.script("It is in Brno", _verdict("pass", "the result says Brno"))


def _judge_requests(loopback: Loopback) -> list[str]:
    return [r.body["messages"][0]["content"] for r in loopback.requests
            if "judge" in str(r.body.get("model"))]


def _rows(db: Path, sql: str) -> list[tuple[Any, ...]]:
    with sqlite3.connect(db) as conn:
        return conn.execute(sql).fetchall()


@pytest.mark.parametrize("instrumentation", ["openinference", "genai"])
def test_a_trace_whose_answer_contradicts_its_tool_result_is_flagged(
        instrumentation: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        loopback: Loopback) -> None:
    path, ids, _ = _record(instrumentation, monkeypatch, tmp_path)
    folder = write_folder(tmp_path / "prod")
    _judge(loopback)
    (tmp_path / "j").mkdir()
    spec = shipped_judge_spec(tmp_path / "j", "claim_support", loopback.base_url)
    db = tmp_path / "s.db"
    with Store(db) as store:
        step = judge_step(spec, store, uncalibrated=True, environ={KEY_ENV: KEY})
        result = score_production(folder, path, store, agent="bot", claims=step)
    by_id = {s.trace_id: s.claims for s in result.samples}
    wrong, right = by_id[ids["wrong"]], by_id[ids["order"]]
    assert wrong is not None and wrong.status == "unsupported" and "Linz" in str(wrong.reason)
    assert right is not None and right.status == "supported"
    assert by_id[ids["chat"]] is not None and by_id[ids["chat"]].status == "no_tool_result"
    assert by_id[ids["valid"]] is not None and by_id[ids["valid"]].status == "no_text_answer"
    assert by_id[ids["failed"]] is None  # a provider error: judged for nothing
    assert result.claims == {"claims_asked": 4, "claims_judged": 2, "claims_unsupported": 1,
                             "claims_not_judged": 2, "claims_judge_errors": 0}
    prompts = _judge_requests(loopback)
    assert len(prompts) == 2  # only the traces with a text answer and a tool result
    (wrong_prompt,) = [p for p in prompts if "Vienna" in p]
    assert '"content": "{\\"at\\": \\"Linz\\"}"' in wrong_prompt  # its own tool result
    assert "CANDIDATE_RESPONSE" in wrong_prompt  # the shipped prompt, not a fork
    stored = dict(_rows(db, "SELECT trace_id, claims FROM production_samples"))
    assert stored[ids["wrong"]] == "unsupported" and stored[ids["order"]] == "supported"
    assert stored[ids["failed"]] is None
    assert _rows(db, "SELECT claims_judge FROM production_batches") == [(step.fingerprint,)]

    # The same file again: every verdict from the store's cache, no judge request.
    seen = len(loopback.requests)
    with Store(db) as store:
        step = judge_step(spec, store, uncalibrated=True, environ={KEY_ENV: KEY})
        again = score_production(folder, path, store, agent="bot", claims=step)
    assert len(loopback.requests) == seen and step.calls == 0 and step.cache_hits == 2
    assert again.stored == 0 and again.claims == result.claims


@pytest.mark.parametrize("instrumentation", ["openinference", "genai"])
def test_the_trace_payload_is_the_suite_payload_of_the_same_conversation(
        instrumentation: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same conversations recorded in callgate's own format and judged in suite mode:
    the judge reads the very same documents (so the same prompt and the same cache key)."""
    cases = [c for c in CASES if c["id"] in ("order", "two-turns")]
    traced = record(instrumentation, monkeypatch, cases)
    traces = read_trace_file(traced.write(tmp_path / "t.jsonl"))
    suite = load_suite(write_suite(tmp_path / "s", cases, TOOLS))
    payloads = trace_payloads([(t, _answered(t)) for t in traces], TOOLS)
    assert len(payloads) == 2
    for index, case in enumerate(cases):
        response = parse_response(own_format(case))
        case_doc, response_doc = judge_payloads(suite, suite.cases[case["id"]], response)
        case_doc.pop("user_turns", None)  # the suite's own copy of them: a trace has none
        assert payloads[index] == (case_doc, response_doc)


def test_an_uncertified_judge_is_refused_with_nothing_stored_unless_uncalibrated(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, loopback: Loopback) -> None:
    path, _, _ = _record("openinference", monkeypatch, tmp_path)
    folder = write_folder(tmp_path / "prod")
    _judge(loopback)
    (tmp_path / "j").mkdir()
    spec = shipped_judge_spec(tmp_path / "j", "claim_support", loopback.base_url)
    db = tmp_path / "c.db"
    args = ["score", str(folder), "--traces", str(path), "--production", "--agent", "bot",
            "--db", str(db), "--claims-judge", str(spec)]
    refused = CliRunner().invoke(app, args, env={KEY_ENV: KEY})
    assert refused.exit_code == 2, refused.output
    assert "certificate" in refused.output
    assert loopback.requests == []
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM production_samples").fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM production_batches").fetchone()[0] == 0

    done = CliRunner().invoke(app, [*args, "--uncalibrated", "--json"], env={KEY_ENV: KEY})
    assert done.exit_code == 0, done.output
    document = json.loads(done.stdout)
    assert document["claims"]["judged"] == 2 and document["claims"]["unsupported"]["n"] == 2
    assert document["claims"]["not_judged"] == 2
    stored = _rows(db, "SELECT count(*), count(claims) FROM production_samples")
    assert stored == [(5, 4)]


def test_history_shows_the_share_of_unsupported_claims_per_day(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, loopback: Loopback) -> None:
    folder = write_folder(tmp_path / "prod")
    _judge(loopback)
    (tmp_path / "j").mkdir()
    spec = shipped_judge_spec(tmp_path / "j", "claim_support", loopback.base_url)
    db = tmp_path / "h.db"
    today, _, _ = _record("openinference", monkeypatch, tmp_path, "today.jsonl")
    # Another day's traffic: only the agreeing order and the chat (other trace ids).
    traced = record("openinference", monkeypatch,
                    [c for c in CONVERSATIONS if c["id"] in ("order", "chat")], _script)
    earlier = shifted(traced, -3).write(tmp_path / "earlier.jsonl")
    for path in (earlier, today):
        scored = CliRunner().invoke(app, [
            "score", str(folder), "--traces", str(path), "--production", "--agent", "bot",
            "--db", str(db), "--claims-judge", str(spec), "--uncalibrated"],
            env={KEY_ENV: KEY})
        assert scored.exit_code == 0, scored.output
    # The file's share, and the unsupported claim's reason with its trace id.
    assert "unsup. %" in scored.output and "50.0" in scored.output
    assert ": claims: unsupported: Vienna: the result says Linz" in scored.output
    shown = CliRunner().invoke(app, ["history", "--agent", "bot", "--production", "--db",
                                     str(db), "--json"])
    assert shown.exit_code == 0, shown.output
    groups = json.loads(shown.stdout)["groups"]
    assert len(groups) == 2
    first, second = (g["claims"] for g in groups)
    assert (first["judged"], first["unsupported"]["successes"], first["not_judged"]) == (1, 0, 1)
    assert first["unsupported"]["pct"] == 0.0
    assert (second["judged"], second["unsupported"]["successes"]) == (2, 1)
    assert second["unsupported"]["pct"] == 50.0 and second["not_judged"] == 2
    assert second["judge_errors"] == 0
    table = CliRunner().invoke(app, ["history", "--agent", "bot", "--production", "--db",
                                     str(db)], env={"COLUMNS": "80"})
    assert table.exit_code == 0, table.output
    assert "unsup. %" in table.output and "50.0" in table.output
    assert all(len(line) <= 80 for line in table.output.splitlines())


def test_a_judge_fault_is_retried_then_counted_as_the_judges_not_the_agents(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, loopback: Loopback) -> None:
    path, ids, _ = _record("openinference", monkeypatch, tmp_path)
    folder = write_folder(tmp_path / "prod")
    # Brno: one server error, then the verdict (retried); Vienna: the endpoint keeps failing.
    loopback.script("It is in Brno", error(500, "judge overloaded"),
                    _verdict("pass", "the result says Brno"))
    loopback.script("It is in Vienna", *[error(500, "judge down")] * 20)
    (tmp_path / "j").mkdir()
    spec = shipped_judge_spec(tmp_path / "j", "claim_support", loopback.base_url)
    with Store(tmp_path / "f.db") as store:
        step = judge_step(spec, store, uncalibrated=True, environ={KEY_ENV: KEY})
        result = score_production(folder, path, store, agent="bot", claims=step)
    by_id = {s.trace_id: s for s in result.samples}
    right, wrong = by_id[ids["order"]], by_id[ids["wrong"]]
    assert right.claims is not None and right.claims.status == "supported"
    assert wrong.claims is not None and wrong.claims.status == "judge_error"
    assert not wrong.provider_error and wrong.schema_valid  # the agent's figures untouched
    assert result.claims is not None
    assert (result.claims["claims_judged"], result.claims["claims_judge_errors"]) == (1, 1)


def test_traces_stored_before_without_the_judge_get_its_verdicts_and_nothing_else(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, loopback: Loopback) -> None:
    path, ids, _ = _record("openinference", monkeypatch, tmp_path)
    folder = write_folder(tmp_path / "prod")
    _judge(loopback)
    (tmp_path / "j").mkdir()
    spec = shipped_judge_spec(tmp_path / "j", "claim_support", loopback.base_url)
    db = tmp_path / "u.db"
    with Store(db) as store:
        first = score_production(folder, path, store, agent="bot")
        assert first.claims is None and first.stored == 5
        before = _rows(db, "SELECT trace_id, batch, schema_valid, policy_clean, claims "
                       "FROM production_samples ORDER BY trace_id")
        assert {row[4] for row in before} == {None}
        step = judge_step(spec, store, uncalibrated=True, environ={KEY_ENV: KEY})
        again = score_production(folder, path, store, agent="bot", claims=step)
    assert again.stored == 0  # not counted twice
    after = _rows(db, "SELECT trace_id, batch, schema_valid, policy_clean, claims "
                  "FROM production_samples ORDER BY trace_id")
    assert [row[:4] for row in after] == [row[:4] for row in before]  # kept as first stored
    claims = {row[0]: row[4] for row in after}
    assert claims[ids["wrong"]] == "unsupported" and claims[ids["order"]] == "supported"
