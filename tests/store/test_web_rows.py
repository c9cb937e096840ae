"""The web's reads at their edges, in process over a real SQLite store: the gate's decision is
kept under one key whichever page asked first."""

from __future__ import annotations

import sqlite3
from itertools import product
from pathlib import Path
from typing import Any

from factories import calls, case, line, message, tool_call, write_lines, write_suite

from callgate.cli.demo import example_path
from callgate.gating.release import decision_key
from callgate.scoring.exclusion import DEFAULT_MAX_EXCLUDED
from callgate.scoring.pipeline import score_file
from callgate.store.db import Store
from callgate.suites.suite import load_suite
from callgate.web.views import Views

EXAMPLE = example_path()


def demo_store(db: Path) -> Store:
    suite = load_suite(EXAMPLE)
    store = Store(db)
    for release in ("2026.10", "2026.11"):
        score_file(suite, EXAMPLE / f"responses-{release}.jsonl", store, model="agent",
                   release=release)
    return store


def test_a_decision_kept_by_the_history_is_the_one_the_release_page_reads(tmp_path: Path
                                                                         ) -> None:
    with demo_store(tmp_path / "store.db") as store:
        Views(store).history("agent", "order-support")  # decides and keeps both releases
        for run in store.stored_runs(suite_name="order-support"):
            key = decision_key(store, run, 2.0, DEFAULT_MAX_EXCLUDED)
            assert store.gate_decision(run.id, key) is not None, run.release


# --------------------------------------------------------------- the attempt filters' marks

TAGS = (["clean"], ["ambiguous", "clean"], [], ["parallel"])


def filter_cases() -> list[dict[str, Any]]:
    """Cases expecting one call, two calls, or none, with zero to two tags."""
    expects = [calls(("lookup_order", {"order_id": "ord_1"})),
               calls(("lookup_order", {"order_id": "ord_1"}), ("track_shipment",
                                                              {"order_id": "ord_1"}),
                     mode="unordered"),
               {"type": "no_call"},
               calls(("cancel_order", {"order_id": "ord_1", "reason": "duplicate"}))]
    return [case(f"c{i:02}", expects[i % 4], tags=TAGS[i % 3]) for i in range(40)]


def filter_lines() -> list[dict[str, Any]]:
    """Five attempts a case: one call, several calls, no call, a call only in a later turn,
    and a provider error."""
    lookup = tool_call("lookup_order", {"order_id": "ord_1"})
    track = tool_call("track_shipment", {"order_id": "ord_1"}, "call_2")
    cancel = tool_call("cancel_order", {"order_id": "ord_2", "reason": "duplicate"}, "call_3")
    out = []
    for i in range(40):
        case_id = f"c{i:02}"
        out += [line(case_id, message(lookup if i % 2 else cancel), repeat=0),
                line(case_id, message(lookup, track), repeat=1),
                line(case_id, {"role": "assistant", "content": "no tool needed"}, repeat=2,
                     finish_reason="stop"),
                {"case_id": case_id, "repeat": 3,
                 "turns": [{"role": "assistant", "content": "let me look"},
                           message(track if i % 3 else cancel),
                           {"role": "assistant", "content": "done"}]},
                {"case_id": case_id, "repeat": 4, "error": {"kind": "timeout"}}]
    return out


def called(item: dict[str, Any]) -> set[str]:
    """The tools a response line calls, in any turn."""
    messages = item.get("turns") or ([item["response"]] if item.get("response") else [])
    return {call["function"]["name"] for m in messages for call in m.get("tool_calls") or []}


def expected(item: dict[str, Any]) -> set[str]:
    return {call["tool"] for call in item["expect"].get("calls", [])}


def filter_store(tmp_path: Path) -> tuple[Store, int]:
    root = write_suite(tmp_path / "suite", filter_cases(), name="filters")
    responses = write_lines(tmp_path / "responses.jsonl", filter_lines())
    store = Store(tmp_path / "filters.db")
    result = score_file(load_suite(root), responses, store, model="agent", release="r1")
    return store, result.run_id


def brute_force(store: Store, run_id: int, verdict: str | None, tag: str | None,
                tool: str | None) -> list[tuple[str, int]]:
    """The attempts the filters keep, read off the lines as written and the stored verdicts."""
    cases = {c["id"]: c for c in filter_cases()}
    lines = {(item["case_id"], item["repeat"]): item for item in filter_lines()}
    kept = []
    for v in store.verdicts(run_id):
        key = (v["case_id"], v["repeat"])
        if verdict == "fail" and not (v["status"] == "scored" and not v["right_arguments"]):
            continue
        if verdict not in (None, "fail") and verdict not in (v["status"], v["tool"],
                                                             v["arguments"]):
            continue
        if tag and tag not in cases[key[0]]["tags"]:
            continue
        if tool and tool not in called(lines[key]) | expected(cases[key[0]]):
            continue
        kept.append(key)
    return sorted(kept)


def test_the_attempt_filters_keep_what_a_brute_force_filter_keeps(tmp_path: Path) -> None:
    store, run_id = filter_store(tmp_path)
    with store:
        assert store.marked_tools(run_id) == ["cancel_order", "lookup_order", "track_shipment"]
        seen = {value for v in store.verdicts(run_id)
                for value in (v["status"], v["tool"], v["arguments"]) if value}
        verdicts = [None, "fail", *sorted(seen), "no_such_verdict"]
        tags = [None, "clean", "ambiguous", "parallel", "no_such_tag"]
        tools = [None, "lookup_order", "track_shipment", "cancel_order", "no_such_tool"]
        checked = 0
        for verdict, tag, tool in product(verdicts, tags, tools):
            want = brute_force(store, run_id, verdict, tag, tool)
            total, rows = store.attempt_rows(run_id, verdict=verdict, tag=tag, tool=tool,
                                             limit=1000)
            assert (total, [(r["case_id"], r["repeat"]) for r in rows]) == (len(want), want), (
                verdict, tag, tool)
            checked += bool(want)
        assert checked > 100  # most combinations keep some attempts
        # a page of them, and one case's
        total, rows = store.attempt_rows(run_id, verdict="fail", tool="track_shipment",
                                         limit=7, offset=5)
        want = brute_force(store, run_id, "fail", None, "track_shipment")
        assert total == len(want) and [(r["case_id"], r["repeat"]) for r in rows] == want[5:12]
        _, rows = store.attempt_rows(run_id, tag="clean", tool="track_shipment",
                                     case_ids=["c03"], limit=1000)
        assert [(r["case_id"], r["repeat"]) for r in rows] == [
            k for k in brute_force(store, run_id, None, "clean", "track_shipment")
            if k[0] == "c03"]


def test_a_run_without_marks_is_filtered_the_same_by_reading_its_lines(tmp_path: Path
                                                                      ) -> None:
    store, run_id = filter_store(tmp_path)
    with store:
        marked = {args: store.attempt_rows(run_id, limit=1000, **dict(args))
                  for args in (((("tool", "track_shipment"),)),
                               (("verdict", "fail"), ("tag", "clean")),
                               (("verdict", "wrong_tool"), ("tool", "lookup_order")))}
        store.db.execute("DELETE FROM attempt_tool_runs")  # as a run before m011, unmigrated
        assert store.marked_tools(run_id) is None
        for args, found in marked.items():
            assert store.attempt_rows(run_id, limit=1000, **dict(args)) == found


def marks_of(db: Path) -> tuple[list[tuple], list[tuple], list[tuple]]:
    with sqlite3.connect(db) as conn:
        return tuple(sorted(conn.execute(f"SELECT * FROM {table}").fetchall())
                     for table in ("case_marks", "attempt_tools", "attempt_tool_runs"))


def test_a_store_from_before_the_marks_gets_them_on_opening(tmp_path: Path) -> None:
    store, run_id = filter_store(tmp_path)
    store.close()
    db = tmp_path / "filters.db"
    written = marks_of(db)
    assert all(written) and len(written[1]) > 100
    with sqlite3.connect(db) as conn:  # the store as m010 left it
        for table in ("case_marks", "attempt_tools", "attempt_tool_runs"):
            conn.execute(f"DROP TABLE {table}")
        conn.execute("DELETE FROM _callgate_migrations WHERE name = 'm011_attempt_marks'")
        conn.execute("PRAGMA user_version = 10")
    notices: list[str] = []
    with Store(db, notify=notices.append) as reopened:
        assert reopened.marked_tools(run_id) == ["cancel_order", "lookup_order",
                                                 "track_shipment"]
    assert "m011_attempt_marks" in notices[0]
    assert marks_of(db) == written


def test_a_catalogue_not_shaped_as_function_tools_names_nothing_and_does_not_crash() -> None:
    """A store written by another program may hold any JSON list as a suite's tools (merge
    checks only that it is a list): what is not a function tool names no tool."""
    from callgate.store.web_rows import tool_names

    tools = [1, "x", {"function": "x"}, {"function": {"name": 3}}, {"function": {}},
             {"function": {"name": "b"}}, {"function": {"name": "a"}}]
    assert tool_names(tools) == ["a", "b"]  # type: ignore[arg-type]


def test_many_tools_are_found_in_a_line_as_a_search_for_each_finds_them() -> None:
    """With many tools a line's quoted pieces are looked up instead of searching the line for
    each name: the same tools are found, escaped quotes, a quote in a name, a name inside a
    longer string and a name in a key included."""
    from callgate.store.web_rows import ToolNeedles, tool_needle

    tools = [f"t{i}" for i in range(30)] + ['say "hi"', "cd", "ls", "ünï", "a\\b", "", "x y"]
    needles = [(tool, tool_needle(tool)) for tool in tools]
    bodies = [
        '{"name": "cd", "arguments": "{\\"folder\\": \\"ls\\"}"}',  # ls only as \"ls\"
        '{"t3": 1, "text": "t4 and \\"t5\\"", "say \\"hi\\"": "cd"}',
        '{"content": "\\"t7\\"", "x": "\\u00fcn\\u00ef", "y": "ünï", "z": "x y"}',
        '{"a": "a\\\\b", "b": "", "c": "t1t2", "d": "t10"}', '"', '""', "", "t2",
    ]
    found = ToolNeedles(tools)
    for body in bodies:
        assert found.named(body) == [t for t, n in needles if n in body], body
    assert found.named(bodies[0]) == ["cd"]
