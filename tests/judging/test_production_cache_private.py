"""Production traces are real users' data: `score --production --claims-judge` keeps none of
their values in the store (docs/traces.md, "What the store keeps of a production trace").
A trace recorded by the real instrumentation plants a fake card number, a name and an order
id in the user's message, a tool call's arguments, a tool result and the final answer; the
loopback judge's reason quotes them. After scoring (twice: the rerun asks the judge nothing)
and after `callgate merge` into another store, no text column of any table, and no byte of the
store's files, holds any of them. The CLI runs as a subprocess, the judge over real HTTP."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from importers.test_traces import TOOLS, _body, record
from live_judge import judged_responses, judged_suite, make_judge, run, shipped_judge_spec
from loopback import Loopback, Reply, ok, tool_call
from production_traces import write_folder

from callgate.judging.judge import load_judge
from callgate.judging.step import JudgeStep
from callgate.scoring.pipeline import score_file
from callgate.store.db import Store
from callgate.suites.suite import load_suite

CARD = "4929 7318 2046 5531"
NAME = "Wenceslas Quibbleworth"
ORDER = "ord_PX93KQ7"
# Every form a planted value could be stored in (the card also without its spaces).
PLANTED = (CARD, CARD.replace(" ", ""), NAME, ORDER)

PRIVATE = [
    # Answered from its tool result (wrongly: the result says Brno), judged unsupported.
    {"id": "private", "messages": [{"role": "user", "content": (
        f"Where is my order {ORDER}? I am {NAME} and paid with card {CARD}.")}],
     "tool_results": [{"tool": "lookup_order", "args": {"order_id": ORDER},
                       "result": {"holder": NAME, "card": CARD, "at": "Brno"}}]},
    # A schema-invalid call holding the values (order_id must be a string): a problem stored.
    {"id": "invalid", "messages": [{"role": "user", "content": (
        f"Track {ORDER} for {NAME}, card {CARD}")}]},
]
ANSWER = f"{NAME}, your order {ORDER} paid with card {CARD} is in Vienna."
REASON = f"the answer tells {NAME} that {ORDER} (card {CARD}) is in Vienna; the result: Brno"


def _script(server: Loopback) -> None:
    server.script_turns(f"order {ORDER}", Reply(body=_body(calls=[tool_call(
        "lookup_order", {"order_id": ORDER, "card": CARD.replace(" ", "")}, "c1")])),
        Reply(body=_body(content=ANSWER)))
    server.script_turns(f"Track {ORDER}", Reply(body=_body(calls=[tool_call(
        "track_shipment", {"order_id": [ORDER, f"{NAME} {CARD}"]}, "c1")])))


def _found(db: Path) -> list[str]:
    """Where a planted value is in the store: table.column of every text it is in."""
    found = []
    with sqlite3.connect(db) as conn:
        tables = [row[0] for row in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'")]
        assert "judge_cache" in tables and "production_samples" in tables
        for table in tables:
            cursor = conn.execute(f'SELECT * FROM "{table}"')
            columns = [d[0] for d in cursor.description]
            for row in cursor:
                for column, value in zip(columns, row, strict=True):
                    text = (value.decode("utf-8", "replace") if isinstance(value, bytes)
                            else value)
                    if isinstance(text, str) and any(v in text for v in PLANTED):
                        found.append(f"{table}.{column}")
    return found


def _in_files(folder: Path) -> list[str]:
    """The store's files (the database, its -wal and -shm) holding a planted value's bytes."""
    return [path.name for path in sorted(folder.iterdir()) if path.is_file()
            and any(v.encode() in path.read_bytes() for v in PLANTED)]


def _judge_requests(loopback: Loopback) -> int:
    return sum("judge" in str(r.body.get("model")) for r in loopback.requests
               if isinstance(r.body, dict))


@pytest.mark.slow
def test_no_value_of_a_production_trace_reaches_the_store_or_a_merged_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, loopback: Loopback,
        callgate_exe: str, cli_env: dict[str, str]) -> None:
    traces = record("openinference", monkeypatch, PRIVATE, _script).write(tmp_path / "t.jsonl")
    exported = traces.read_text()
    assert all(value in exported or json.dumps(value)[1:-1] in exported for value in PLANTED)
    folder = write_folder(tmp_path / "prod", tools=TOOLS, policies={})
    loopback.script("paid with card", ok(content=json.dumps(
        {"claim_support": "fail", "reason": REASON}), provider=None, cost=None))
    (tmp_path / "j").mkdir()
    spec = shipped_judge_spec(tmp_path / "j", "claim_support", loopback.base_url)
    (tmp_path / "store").mkdir()
    db = tmp_path / "store" / "s.db"
    args = ["score", str(folder), "--traces", str(traces), "--production", "--agent", "bot",
            "--db", str(db), "--claims-judge", str(spec), "--uncalibrated", "--json"]

    scored = run(callgate_exe, cli_env, tmp_path, *args)
    assert scored.returncode == 0, scored.stderr
    samples = json.loads(scored.stdout)["samples"]
    # The verdict and its reason as the judge gave them, to the person who ran the score.
    (judged,) = [s["claims"] for s in samples if s["claims"]["status"] == "unsupported"]
    assert judged["reason"] == REASON
    assert any(s["problems"] for s in samples)  # the invalid call: a problem was stored
    assert _judge_requests(loopback) == 1
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM judge_cache").fetchone() == (1,)
        stored = dict(conn.execute("SELECT claims, count(*) FROM production_samples "
                                   "GROUP BY claims").fetchall())
    assert stored == {"unsupported": 1, "no_text_answer": 1}
    assert _found(db) == [] and _in_files(db.parent) == []

    # A rerun: the verdict from the store's cache, no judge request, the same figures.
    again = run(callgate_exe, cli_env, tmp_path, *args)
    assert again.returncode == 0, again.stderr
    assert _judge_requests(loopback) == 1
    assert json.loads(again.stdout)["claims"] == json.loads(scored.stdout)["claims"]
    assert _found(db) == [] and _in_files(db.parent) == []
    table = run(callgate_exe, cli_env, tmp_path, *args[:-1])  # the table, from the cache
    assert table.returncode == 0, table.stderr
    assert ": claims: unsupported\n" in table.stdout  # the verdict, the reason not kept
    assert not any(value in table.stdout + table.stderr for value in PLANTED)

    (tmp_path / "merged").mkdir()
    out = tmp_path / "merged" / "out.db"
    merged = run(callgate_exe, cli_env, tmp_path, "merge", str(out), str(db))
    assert merged.returncode == 0, merged.stderr
    with sqlite3.connect(out) as conn:
        copied: Any = conn.execute("SELECT count(*) FROM judge_cache").fetchone()
        assert copied == (1,)
        assert conn.execute("SELECT count(*) FROM production_samples").fetchone() == (2,)
    assert _found(out) == [] and _in_files(out.parent) == []


def test_a_suites_judge_verdicts_keep_their_reasons_in_the_cache(tmp_path: Path) -> None:
    """The team's own suite data: suite mode caches the judge's reason as before (the review
    pages show it), and a rerun reads it back from the cache."""
    suite = load_suite(judged_suite(tmp_path / "suite"))
    responses = judged_responses(tmp_path / "r.jsonl")
    judge = load_judge(make_judge(tmp_path, "http://127.0.0.1:9/api/v1"))  # never called

    async def complete(messages: list[dict[str, Any]]) -> str:
        marker = next(m for m in ("[case-0]", "[case-1]", "[case-2]", "[case-3]")
                      if m in messages[0]["content"])
        return json.dumps({"tool_choice": "pass",
                           "arguments": "fail" if marker == "[case-1]" else "pass",
                           "reason": f"{marker} the summary names {NAME}"})

    with Store(tmp_path / "s.db") as store:
        first = JudgeStep(judge, complete, None)
        score_file(suite, responses, store, model="m", release="r1", judge=first)
        again = JudgeStep(judge, complete, None)
        rerun = score_file(suite, responses, store, model="m", release="r2", judge=again)
    assert first.calls == 4 and (again.calls, again.cache_hits) == (0, 4)
    with sqlite3.connect(tmp_path / "s.db") as conn:
        outputs = [json.loads(row[0]) for row in conn.execute("SELECT output FROM judge_cache")]
    assert len(outputs) == 4 and all(NAME in output["reason"] for output in outputs)
    (j1,) = [v for v in rerun.verdicts if v.case_id == "j1"]  # shown: from the cache
    assert j1.arguments == "wrong_value" and NAME in j1.arguments_reason
