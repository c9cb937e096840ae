"""The live-run stage in process, against the loopback server: verdicts, retries, what is
stored per attempt, the cache, offline mode, stopping and resuming."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any

import pytest
from conftest import KEY, KEY_ENV, lookup_case, marker, no_call_case, write_suite
from loopback import Loopback, Reply, completion, error, ok, tool_call

from callgate.errors import CallgateError
from callgate.models.config import Candidate
from callgate.models.retry import RetryPolicy
from callgate.running.run import LiveRun, LiveRunner, OfflineMiss, run_live
from callgate.running.settings import RunSettings
from callgate.store.db import Store
from callgate.suites.suite import Suite, load_suite

CALL = tool_call("lookup_order", {"order_id": "ord_1"})


def settings(**changes: Any) -> RunSettings:
    retry = {"base_delay": 0.01, **changes.pop("retry", {})}
    values: dict[str, Any] = {
        "repeats": 1,
        "concurrency": 4,
        "timeout": 2,
        "progress": False,
        "retry": RetryPolicy(**retry),
        **changes,
    }
    return RunSettings(**values)


def candidate(loopback: Loopback, **changes: Any) -> Candidate:
    values: dict[str, Any] = {
        "name": "cand",
        "model": "openrouter/test/model",
        "api_base": loopback.base_url,
        "api_key_env": KEY_ENV,
        **changes,
    }
    return Candidate(**values)


def suite_of(tmp_path: Path, *case_ids: str, no_call: tuple[str, ...] = ()) -> Suite:
    cases = [no_call_case(c) if c in no_call else lookup_case(c) for c in case_ids]
    return load_suite(write_suite(tmp_path / "suite", cases))


def run(
    tmp_path: Path,
    suite: Suite,
    cand: Candidate,
    run_settings: RunSettings,
    environ: dict[str, str] | None = None,
    release: str = "r1",
) -> LiveRun:
    with Store(tmp_path / "callgate.db") as store:
        return run_live(
            suite,
            cand,
            store,
            release=release,
            settings=run_settings,
            environ={KEY_ENV: KEY} if environ is None else environ,
        )


def rows(tmp_path: Path, sql: str, params: tuple = ()) -> list[dict[str, Any]]:
    with Store(tmp_path / "callgate.db") as store:
        return list(store.db.query(sql, params))


def seen(loopback: Loopback, case_id: str) -> list[Any]:
    return [s for s in loopback.requests if s.marker.startswith(marker(case_id))]


def test_verdicts_retries_and_what_is_stored(loopback: Loopback, tmp_path: Path) -> None:
    loopback.script("[ok]", ok(calls=[CALL], provider="Fireworks", cost=0.0031))
    loopback.script(
        "[limited]", error(429, "slow down", **{"Retry-After": "0.3"}), ok(calls=[CALL])
    )
    loopback.script("[flaky]", error(500, "boom"), error(502, "boom"), ok(calls=[CALL]))
    held = threading.Event()  # the first answer to [slow] comes after the run: a timeout
    loopback.script("[slow]", Reply(body=completion(calls=[CALL]), hold=held), ok(calls=[CALL]))
    loopback.script("[broken]", Reply(raw='{"choices": [{"mess'), ok(calls=[CALL]))
    loopback.script(
        "[cut]", ok(calls=[tool_call("lookup_order", '{"order_id": "or')], finish_reason="length")
    )
    loopback.script("[chat]", ok(content="It ships tomorrow."))
    loopback.script("[hours]", ok(content="Nine to five."))
    suite = suite_of(
        tmp_path,
        "ok",
        "limited",
        "flaky",
        "slow",
        "broken",
        "cut",
        "chat",
        "hours",
        no_call=("hours",),
    )
    try:  # 2 s: a loaded machine's answers come well within it, so only [slow] times out
        live = run(tmp_path, suite, candidate(loopback), settings(timeout=2))
    finally:
        held.set()
    verdicts = {v.case_id: v for v in live.result.verdicts}
    for case_id in ("ok", "limited", "flaky", "slow", "broken"):
        assert verdicts[case_id].right_arguments, verdicts[case_id]
    assert verdicts["cut"].status == "truncated"
    assert verdicts["chat"].tool == "missing_call"
    assert verdicts["hours"].right_tool and verdicts["hours"].calls == 0
    assert live.provider_errors == 0 and live.retries == 5 and live.requests == 13
    # Retry-After honoured: the retry came no sooner than the server asked.
    first, second = seen(loopback, "limited")
    assert second.at - first.at >= 0.3
    assert len(seen(loopback, "flaky")) == 3 and len(seen(loopback, "slow")) == 2

    stored = {r["case_id"]: r for r in rows(tmp_path, "SELECT * FROM responses")}
    assert stored["ok"]["provider"] == "Fireworks" and stored["ok"]["cost"] == 0.0031
    assert stored["ok"]["finish_reason"] == "tool_calls"
    assert stored["ok"]["prompt_tokens"] == 42 and stored["ok"]["completion_tokens"] == 7
    assert 0 < stored["ok"]["latency_ms"] < 2000
    assert stored["cut"]["finish_reason"] == "length"
    raw = json.loads(stored["ok"]["body"])["response"]  # the completion as the server sent it
    assert raw["provider"] == "Fireworks" and raw["usage"]["cost"] == 0.0031

    cache = {r["case_id"]: r for r in rows(tmp_path, "SELECT * FROM live_responses")}
    assert cache["flaky"]["tries"] == 3 and cache["ok"]["tries"] == 1
    request = json.loads(cache["ok"]["request"])
    assert request["client"] == "lean" and request["api_key_env"] == KEY_ENV
    assert request["url"] == loopback.base_url + "/chat/completions"
    assert request["body"] == seen(loopback, "ok")[0].body  # exactly what went over the wire
    links = rows(tmp_path, "SELECT * FROM run_requests WHERE run = ?", (live.result.run_id,))
    assert {r["cache_key"] for r in links} == set(cache_key for cache_key in _keys(tmp_path))
    run_row = rows(tmp_path, "SELECT status, source FROM runs")[0]
    assert run_row == {"status": "done", "source": "live"}


def _keys(tmp_path: Path) -> list[str]:
    return [r["key"] for r in rows(tmp_path, "SELECT key FROM live_responses")]


def test_what_goes_over_the_wire(loopback: Loopback, tmp_path: Path) -> None:
    suite = suite_of(tmp_path, "a", "b")
    cand = candidate(
        loopback,
        provider={"order": ["fireworks", "together"], "allow_fallbacks": False},
        extra={"temperature": 0},
    )
    run(tmp_path, suite, cand, settings(repeats=2))
    tools = json.loads((tmp_path / "suite" / "tools.json").read_text())
    assert len(loopback.requests) == 4
    for request in loopback.requests:
        body = request.body
        assert request.path == "/api/v1/chat/completions"
        assert request.headers["Authorization"] == f"Bearer {KEY}"
        assert body["model"] == "test/model"
        assert body["reasoning_effort"] == "low"
        assert body["provider"] == {
            "order": ["fireworks", "together"],
            "allow_fallbacks": False,
            "require_parameters": True,
        }
        assert body["tools"] == tools  # exactly as given, key order included
        assert list(body["tools"][1]["function"]) == list(tools[1]["function"])
        assert not {"max_tokens", "max_completion_tokens", "max_output_tokens"} & set(body)
        assert body["temperature"] == 0 and body["usage"] == {"include": True}
        assert "stream" not in body
    assert KEY.encode() not in (tmp_path / "callgate.db").read_bytes()


def test_failures_are_recorded_never_scored(loopback: Loopback, tmp_path: Path) -> None:
    loopback.script("[down]", error(503, "overloaded"))
    loopback.script("[bad]", error(400, f"bad request from {KEY}"))
    loopback.script("[fine]", ok(calls=[CALL]))
    suite = suite_of(tmp_path, "down", "bad", "fine")
    live = run(tmp_path, suite, candidate(loopback), settings(retry={"max_retries": 2}))
    verdicts = {v.case_id: v for v in live.result.verdicts}
    assert verdicts["down"].status == "provider_error"
    assert "server_error" in verdicts["down"].reason and "after 3 tries" in verdicts["down"].reason
    assert verdicts["bad"].status == "provider_error" and "bad_request" in verdicts["bad"].reason
    assert len(seen(loopback, "down")) == 3 and len(seen(loopback, "bad")) == 1
    scores = live.result.scores
    assert scores.excluded["provider_error"] == 2 and scores.figures.scored == 1
    assert scores.figures.right_arguments.pct == 100.0
    errors = {r["case_id"]: r["error_kind"] for r in rows(tmp_path, "SELECT * FROM responses")}
    assert errors == {"down": "server_error", "bad": "bad_request", "fine": None}
    for path in tmp_path.glob("callgate.db*"):
        assert KEY.encode() not in path.read_bytes()


def test_the_retry_budget_is_shared_by_the_run(loopback: Loopback, tmp_path: Path) -> None:
    loopback.script("[", error(500, "down"))
    suite = suite_of(tmp_path, "a", "b", "c")
    live = run(tmp_path, suite, candidate(loopback), settings(retry={"budget": 2}))
    assert live.retries == 2 and live.requests == 5 and live.provider_errors == 3
    assert any("retry budget" in v.reason for v in live.result.verdicts)


def test_a_retry_after_past_the_wait_limit_is_not_waited_for(
    loopback: Loopback, tmp_path: Path
) -> None:
    loopback.script("[a]", error(429, "come back tomorrow", **{"Retry-After": "86400"}))
    live = run(tmp_path, suite_of(tmp_path, "a"), candidate(loopback), settings())
    assert live.requests == 1
    assert "wait limit" in live.result.verdicts[0].reason


def test_an_auth_failure_stops_the_run(loopback: Loopback, tmp_path: Path) -> None:
    loopback.script("[", error(401, f"invalid key {KEY}"))
    suite = suite_of(tmp_path, *(f"c{i}" for i in range(20)))
    live = run(tmp_path, suite, candidate(loopback), settings(concurrency=1))
    assert live.stopped is not None and live.stopped.startswith("auth")
    assert len(loopback.requests) == 1
    assert rows(tmp_path, "SELECT status FROM runs") == [{"status": "interrupted"}]
    assert KEY not in live.stopped
    for path in tmp_path.glob("callgate.db*"):
        assert KEY.encode() not in path.read_bytes()


def test_a_missing_key_variable_is_a_usage_error(loopback: Loopback, tmp_path: Path) -> None:
    with pytest.raises(CallgateError, match=f"{KEY_ENV} is not set"):
        run(tmp_path, suite_of(tmp_path, "a"), candidate(loopback), settings(), environ={})
    assert loopback.requests == []


def test_cache_no_cache_and_offline(loopback: Loopback, tmp_path: Path) -> None:
    suite = suite_of(tmp_path, "a", "b", "c", no_call=("c",))
    cand = candidate(loopback)
    first = run(tmp_path, suite, cand, settings(repeats=2))
    assert first.called == 6 and len(loopback.requests) == 6
    loopback.reset()
    again = run(tmp_path, suite, cand, settings(repeats=2), environ={})  # no key needed
    assert again.cached == 6 and again.called == 0 and loopback.requests == []
    assert again.client is None
    assert again.result.verdicts == first.result.verdicts
    assert again.result.scores == first.result.scores
    offline = run(tmp_path, suite, cand, settings(repeats=2, offline=True), environ={})
    assert offline.cached == 6 and loopback.requests == []
    with pytest.raises(OfflineMiss, match="3 of 9 attempts have no stored response"):
        run(tmp_path, suite, cand, settings(repeats=3, offline=True), environ={})
    more = run(tmp_path, suite, cand, settings(repeats=3))  # only the new repeat index is called
    assert more.cached == 6 and more.called == 3 and len(loopback.requests) == 3
    loopback.reset()
    fresh = run(tmp_path, suite, cand, settings(repeats=3, cache=False))
    assert fresh.called == 9 and len(loopback.requests) == 9
    changed = run(tmp_path, suite, candidate(loopback, reasoning_effort="high"), settings())
    assert changed.called == 3  # other parameters, other cache keys
    with pytest.raises(CallgateError, match="cannot go with --no-cache"):
        run(tmp_path, suite, cand, settings(offline=True, cache=False))


def test_stored_failures_are_retried_online_and_reproduced_offline(
    loopback: Loopback, tmp_path: Path
) -> None:
    loopback.script("[a]", error(400, "nope"), ok(calls=[CALL]))
    suite = suite_of(tmp_path, "a")
    cand = candidate(loopback)
    assert run(tmp_path, suite, cand, settings()).provider_errors == 1
    offline = run(tmp_path, suite, cand, settings(offline=True), environ={})
    assert offline.provider_errors == 1 and len(loopback.requests) == 1
    online = run(tmp_path, suite, cand, settings())
    assert online.called == 1 and online.provider_errors == 0
    # A later failure never replaces the stored answer.
    loopback.script("[a]", error(400, "nope again"))
    failed = run(tmp_path, suite, cand, settings(cache=False))
    assert failed.provider_errors == 1
    assert run(tmp_path, suite, cand, settings(offline=True), environ={}).provider_errors == 0


def test_cost_unknown_is_null_not_zero(loopback: Loopback, tmp_path: Path) -> None:
    loopback.script("[a]", ok(calls=[CALL], cost=None))
    live = run(tmp_path, suite_of(tmp_path, "a"), candidate(loopback), settings())
    assert live.spend is None and live.cost_unknown == 1
    assert rows(tmp_path, "SELECT cost FROM responses") == [{"cost": None}]
    assert live.result.scores.cost_usd is None and live.result.scores.cost_unknown == 1


def test_stopping_keeps_what_finished_and_a_rerun_resumes(
    loopback: Loopback, tmp_path: Path
) -> None:
    loopback.latency = 0.1
    suite = suite_of(tmp_path, *(f"c{i:02d}" for i in range(12)))
    cand = candidate(loopback)

    async def stop_midway() -> LiveRun:
        with Store(tmp_path / "callgate.db") as store:
            runner = LiveRunner(
                suite,
                cand,
                store,
                "r1",
                settings=settings(concurrency=2),
                environ={KEY_ENV: KEY},
            )
            task = asyncio.create_task(runner.run())
            while runner.counters.called < 4:
                await asyncio.sleep(0.01)
            runner.stop()
            return await task

    stopped = asyncio.run(stop_midway())
    assert stopped.stopped == "interrupted" and 4 <= stopped.called < 12
    assert rows(tmp_path, "SELECT status FROM runs") == [{"status": "interrupted"}]
    answered = {r["case_id"] for r in rows(tmp_path, "SELECT case_id FROM live_responses")}
    assert len(answered) == stopped.called
    assert len(stopped.result.missing) == 12 - stopped.called
    loopback.reset()
    loopback.latency = 0
    resumed = run(tmp_path, suite, cand, settings())
    assert resumed.cached == stopped.called and resumed.stopped is None
    assert sorted(s.marker[1:4] for s in loopback.requests) == sorted(set(suite.cases) - answered)
    assert rows(tmp_path, "SELECT status FROM runs") == [{"status": "done"}]


def test_a_rerun_keeps_the_finished_release_until_it_finishes(
    loopback: Loopback, tmp_path: Path
) -> None:
    suite = suite_of(tmp_path, "a", "b")
    cand = candidate(loopback)
    first = run(tmp_path, suite, cand, settings())
    with Store(tmp_path / "callgate.db") as store:
        before = store.find_run(suite.name, "cand", "r1")
    assert before is not None and before["id"] == first.result.run_id

    # A re-run of the same release that stops on a fatal provider error keeps the earlier run.
    loopback.script("[", error(401, "bad key"))
    stopped = run(tmp_path, suite, cand, settings(cache=False, concurrency=1))
    assert stopped.stopped is not None and stopped.stopped.startswith("auth")
    with Store(tmp_path / "callgate.db") as store:
        assert store.find_run(suite.name, "cand", "r1") == before
        assert [r["id"] for r in store.runs("cand")] == [first.result.run_id]
        assert len(list(store.verdicts(first.result.run_id))) == 2
    statuses = rows(tmp_path, "SELECT id, status FROM runs ORDER BY id")
    assert statuses == [{"id": first.result.run_id, "status": "done"},
                        {"id": stopped.result.run_id, "status": "interrupted"}]

    # A re-run that finishes replaces both, and keeps the release's place in the history.
    loopback.reset()
    again = run(tmp_path, suite, cand, settings(cache=False))
    assert again.stopped is None
    with Store(tmp_path / "callgate.db") as store:
        after = store.find_run(suite.name, "cand", "r1")
        assert after is not None and after["id"] == again.result.run_id
        assert after["created_at"] == before["created_at"]
        assert [r["id"] for r in store.runs()] == [again.result.run_id]
    assert rows(tmp_path, "SELECT id FROM runs") == [{"id": again.result.run_id}]
    assert {r["run"] for r in rows(tmp_path, "SELECT run FROM verdicts")} == {
        again.result.run_id}


def test_a_store_made_with_one_row_per_release_is_upgraded(
    loopback: Loopback, tmp_path: Path
) -> None:
    import sqlite3

    from callgate.store.schema import SCHEMA

    db = tmp_path / "callgate.db"
    with sqlite3.connect(db) as conn:  # the runs table as callgate made it before
        conn.execute(
            "CREATE TABLE runs (id INTEGER PRIMARY KEY, suite_name TEXT NOT NULL, "
            "suite TEXT NOT NULL REFERENCES suites(fingerprint), model TEXT NOT NULL, "
            "release TEXT NOT NULL, source TEXT NOT NULL, created_at TEXT NOT NULL, "
            "callgate_version TEXT NOT NULL, judge_fingerprint TEXT, status TEXT NOT NULL, "
            "scores TEXT, UNIQUE (suite_name, model, release))"
        )
        conn.executescript(SCHEMA)  # the other tables, as that callgate made them too
    suite = suite_of(tmp_path, "a")
    first = run(tmp_path, suite, candidate(loopback), settings())
    loopback.script("[", error(401, "bad key"))
    run(tmp_path, suite, candidate(loopback), settings(cache=False))  # a second row: allowed
    with Store(db) as store:
        assert [r["id"] for r in store.runs()] == [first.result.run_id]
        assert store.db.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    assert len(rows(tmp_path, "SELECT id FROM runs")) == 2
    loopback.reset()
    last = run(tmp_path, suite, candidate(loopback), settings(cache=False))
    assert rows(tmp_path, "SELECT id FROM runs") == [{"id": last.result.run_id}]
    assert rows(tmp_path, "SELECT DISTINCT run FROM verdicts") == [{"run": last.result.run_id}]


def test_run_settings_refuse_a_repeat_count_that_is_surely_a_typo() -> None:
    assert RunSettings(repeats=100).repeats == 100
    with pytest.raises(ValueError, match="repeats"):
        RunSettings(repeats=101)
