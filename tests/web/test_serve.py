"""`callgate serve` over HTTP: the app under uvicorn on 127.0.0.1, reached through real sockets,
over the demo's store; `callgate report --html`; the labels people write."""

from __future__ import annotations

import html
import json
import re
import shutil
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlencode

import pytest
from conftest import build_demo_store
from paths import ROOT
from webserver import Server, callgate_script

from callgate.judging.calibration_set import read_journal, read_set

SET = ROOT / "calibration" / "tool_choice.jsonl"
MODEL, SUITE = "example-agent", "order-support"


def callgate(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([callgate_script(), *args], capture_output=True, text=True, cwd=cwd,
                          timeout=120)


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # Its own demo store, not a copy: the gate kept by `callgate demo` names the store's path
    # as the baseline's source, which the /api/gate test compares with a fresh `gate --json`.
    return build_demo_store(tmp_path_factory.mktemp("demo"))


@pytest.fixture(scope="module")
def server(demo_db: Path) -> Iterator[Server]:
    running = Server(demo_db)
    try:
        yield running
    finally:
        running.stop()


def run_id(demo_db: Path, release: str) -> int:
    with sqlite3.connect(demo_db) as conn:
        return conn.execute("SELECT id FROM runs WHERE model = ? AND suite_name = ? AND "
                            "release = ? AND status = 'done'", [MODEL, SUITE, release]
                            ).fetchone()[0]


@pytest.mark.slow
def test_another_address_than_loopback_needs_a_token(demo_db: Path) -> None:
    done = callgate("serve", "--db", str(demo_db), "--host", "0.0.0.0", "--port", "1")
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "--token" in lines[0] and "0.0.0.0" in lines[0]
    assert "Traceback" not in done.stderr


@pytest.mark.slow
def test_the_demo_tells_the_user_to_serve(tmp_path: Path) -> None:
    done = callgate("demo", "--db", str(tmp_path / "c.db"))
    last = done.stdout.strip().splitlines()[-1]
    assert f"callgate serve --db {tmp_path / 'c.db'}" in last
    # It gates each release as CI would, so the store keeps the decisions `history` shows.
    with sqlite3.connect(tmp_path / "c.db") as conn:
        gates = conn.execute("SELECT suite_name, release, json_extract(gate, '$.outcome') "
                             "FROM runs ORDER BY suite_name, release").fetchall()
    assert gates == [("order-store", "2026.10", "first_release"),
                     ("order-store", "2026.11", "regression"),
                     ("order-support", "2026.10", "first_release"),
                     ("order-support", "2026.11", "regression")]


@pytest.mark.slow
def test_releases_carry_the_gates_marks(server: Server) -> None:
    data = server.json("/api/releases?" + urlencode({"model": MODEL, "suite": SUITE}))
    history = data["suites"][SUITE]
    assert [(h["release"], h["outcome"]) for h in history] == [
        ("2026.10", "first_release"), ("2026.11", "regression")]
    status, page = server.get("/releases?" + urlencode({"model": MODEL, "suite": SUITE}))
    assert status == 200
    svg = page[page.index("<svg"):page.index("</svg>")]
    assert 'data-release="2026.10"' in svg and 'data-release="2026.11"' in svg
    assert 'class="release mark mark-regression" data-release="2026.11"' in svg
    # the gate line: the baseline's share on shared cases minus 2 points, for both figures
    checks = history[1]["checks"]
    for name in ("right_tool", "right_arguments"):
        floor = checks[name]["baseline"]["pct"] - 2
        assert f"gate {floor:.1f}" in svg


@pytest.mark.slow
def test_the_gate_api_prints_what_callgate_gate_json_prints(server: Server,
                                                              demo_db: Path) -> None:
    done = callgate("gate", "--model", MODEL, "--release", "2026.11", "--suite", SUITE,
                    "--db", str(demo_db), "--json")
    assert done.returncode == 1
    api = server.json("/api/gate?" + urlencode({"model": MODEL, "release": "2026.11",
                                                  "suite": SUITE}))
    assert api == json.loads(done.stdout)
    status, body = server.get("/api/gate?model=nobody&release=1")
    assert status == 404 and "no finished run" in json.loads(body)["error"]


@pytest.mark.slow
def test_the_gate_api_and_gate_json_agree_on_a_release_missing_shards(
        tmp_path: Path, demo_db: Path) -> None:
    db = tmp_path / "c.db"
    shutil.copyfile(demo_db, db)
    example = ROOT / "src" / "callgate" / "examples" / "order_support"
    done = callgate("score", str(example), "-r", str(example / "responses-2026.10.jsonl"),
                    "-m", MODEL, "--release", "2026.12", "--shard", "2/2", "--db", str(db))
    assert done.returncode == 0, done.stderr
    printed = callgate("gate", "--model", MODEL, "--release", "2026.12", "--suite", SUITE,
                       "--db", str(db), "--json")
    assert printed.returncode == 3, printed.stderr
    server = Server(db)
    try:
        served = server.json("/api/gate?" + urlencode({"model": MODEL, "release": "2026.12",
                                                        "suite": SUITE}))
    finally:
        server.stop()
    assert served["outcome"] == "inconclusive" and "shard(s) 1/2" in served["messages"][0]
    assert served == json.loads(printed.stdout)


def test_one_release_flipped_cases_and_filters(server: Server, demo_db: Path) -> None:
    rid = run_id(demo_db, "2026.11")
    release = server.json(f"/api/runs/{rid}")
    worse = {c["case_id"]: c["reason"] for c in release["worse"]}
    assert worse["clean-001"] == 'lookup_order.order_id: expected "ord_7281", got "ord_7282"'
    assert release["excluded"]["truncated"] == 1
    status, page = server.get(f"/runs/{rid}")
    assert status == 200 and "clean-001" in page and "Passed before, fail now" in page

    everything = server.json(f"/api/runs/{rid}/attempts?limit=1000")
    assert everything["total"] == release["attempts"] == len(everything["attempts"])
    wrong_value = server.json(f"/api/runs/{rid}/attempts?verdict=wrong_value&limit=1000")
    assert wrong_value["total"] == sum(a["arguments"] == "wrong_value"
                                       for a in everything["attempts"]) > 0
    assert {a["arguments"] for a in wrong_value["attempts"]} == {"wrong_value"}
    parallel = server.json(f"/api/runs/{rid}/attempts?tag=parallel&limit=1000")
    assert parallel["total"] == sum("parallel" in a["tags"] for a in everything["attempts"]) > 0
    assert all("parallel" in a["tags"] for a in parallel["attempts"])
    cancels = server.json(f"/api/runs/{rid}/attempts?tool=cancel_order&limit=1000")
    assert 0 < cancels["total"] < everything["total"]
    page_two = server.json(f"/api/runs/{rid}/attempts?limit=10&offset=10")
    assert [a["case_id"] for a in page_two["attempts"]] == [
        a["case_id"] for a in everything["attempts"][10:20]]


def test_the_attempt_page_marks_the_blamed_argument(server: Server, demo_db: Path) -> None:
    rid = run_id(demo_db, "2026.11")
    status, page = server.get(f"/runs/{rid}/attempts/clean-009/0")
    assert status == 200
    marked = re.findall(r'<mark class="blame">(.*?)</mark>', page, re.DOTALL)
    assert [html.unescape(m.strip()) for m in marked] == ['"reason": "too slow"']
    status, page = server.get(f"/runs/{rid}/attempts/clean-001/0")
    marked = re.findall(r'<mark class="blame">(.*?)</mark>', page, re.DOTALL)
    assert [html.unescape(m.strip()) for m in marked] == ['"order_id": "ord_7282"']
    assert server.get(f"/runs/{rid}/attempts/no-such-case/0")[0] == 404


def set_copy(tmp_path: Path) -> Path:
    copy = tmp_path / "tool_choice.jsonl"
    shutil.copyfile(SET, copy)
    return copy


def person_rows(db: Path) -> list[tuple]:
    with sqlite3.connect(db) as conn:
        if not conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'person_labels'").fetchone():
            return []
        return conn.execute("SELECT item_id, labeller, tool_choice, arguments FROM "
                            "person_labels ORDER BY id").fetchall()


@pytest.mark.slow
def test_labels_are_stored_appended_and_compared(tmp_path: Path, demo_db: Path) -> None:
    db = tmp_path / "c.db"
    shutil.copyfile(demo_db, db)
    labels = set_copy(tmp_path)
    before = labels.read_text().splitlines()
    server = Server(db, "--set", str(labels))
    try:
        url = f"/api/calibration/{labels.name}/labels"
        assert server.post_json(url, {"item_id": "tc-001", "labeller": "ana",
                                      "tool_choice": "fail", "arguments": "n/a"})[0] == 201
        assert server.post_json(url, {"item_id": "tc-001", "labeller": "bo",
                                      "tool_choice": "pass", "arguments": "pass"})[0] == 201
        assert server.post_json(url, {"item_id": "tc-002", "labeller": "ana",
                                      "tool_choice": "pass", "arguments": "pass"})[0] == 201
        status, error = server.post_json(url, {"item_id": "tc-003", "labeller": "ana",
                                               "tool_choice": "maybe", "arguments": "pass"})
        assert status == 400 and "tool_choice" in error["error"]
        progress = server.json(f"/api/calibration/{labels.name}/progress")
        status, index = server.get("/")
        assert status == 200
        # ana and bo disagree on tc-001: until a person adjudicates it, it counts for nothing
        # (the store holds the items calibration uses)
        assert re.search(rf"{labels.name}</td><td class=\"num\">{len(before) - 1}</td>", index)
    finally:
        server.stop()
    assert person_rows(db) == [("tc-001", "ana", "fail", "n/a"), ("tc-001", "bo", "pass", "pass"),
                               ("tc-002", "ana", "pass", "pass")]
    after = labels.read_text().splitlines()
    assert after[:len(before)] == before and len(after) == len(before) + 3
    items = {item.id: item for item in read_set(labels)[0]}
    assert len(items) == len(before) - 1 and "tc-001" not in items  # in conflict
    assert items["tc-002"].label.model_dump() == {"tool_choice": "pass", "arguments": "pass"}
    # Who gave the label is in the file too, so a person's label is told from an assistant's.
    assert items["tc-002"].labeller == "ana" and items["tc-002"].labelled_at
    assert progress["labelled"] == 2 and progress["total"] == len(before)
    assert progress["labellers"] == ["ana", "bo"]
    assert progress["agreement"][0]["items"] == 1
    assert [c["item_id"] for c in progress["conflicts"]] == ["tc-001"]


def form_post(server: Server, path: str, fields: dict[str, str]) -> tuple[int, str]:
    status, body, _ = server.request(
        path, method="POST", data=urlencode(fields).encode(),
        headers={"content-type": "application/x-www-form-urlencoded"})
    return status, body


def effective(labels: Path) -> dict[str, tuple[str, str]]:
    """The labels calibration uses, read from the set file."""
    return {i.id: (i.label.tool_choice, i.label.arguments) for i in read_set(labels)[0]}


def assert_file_and_store_agree(db: Path, labels: Path) -> None:
    """The set file replayed and the store hold the same people's labels, the same
    adjudications and the same labels that count."""
    journal = read_journal(labels)
    with sqlite3.connect(db) as conn:
        stored = conn.execute("SELECT item_id, label_tool_choice, label_arguments FROM "
                              "calibration_items WHERE set_name = ?", [labels.name]).fetchall()
        settled = conn.execute("SELECT item_id, labeller, tool_choice, arguments, why FROM "
                               "adjudications WHERE set_name = ? ORDER BY id",
                               [labels.name]).fetchall()
    assert {i: (t, a) for i, t, a in stored} == effective(labels)
    assert person_rows(db) == [(i.id, i.labeller, i.label.tool_choice, i.label.arguments)
                               for i in journal.people]
    assert settled == [(a.adjudicate, a.labeller, a.label.tool_choice, a.label.arguments, a.why)
                       for a in journal.adjudications]


@pytest.mark.slow
def test_undo_withdraws_the_label_from_the_file_and_the_store(tmp_path: Path,
                                                              demo_db: Path) -> None:
    db = tmp_path / "c.db"
    shutil.copyfile(demo_db, db)
    labels = set_copy(tmp_path)
    original = effective(labels)
    server = Server(db, "--set", str(labels))
    try:
        status, _ = form_post(server, f"/calibration/{labels.name}/label",
                              {"item_id": "tc-004", "labeller": "ana", "tool_choice": "pass",
                               "arguments": "fail"})
        assert status == 200  # followed the redirect to the next item
        assert person_rows(db) == [("tc-004", "ana", "pass", "fail")]
        assert effective(labels)["tc-004"] == ("pass", "fail")
        assert_file_and_store_agree(db, labels)
        status, _ = form_post(server, f"/calibration/{labels.name}/undo", {"labeller": "ana"})
        assert status == 200
    finally:
        server.stop()
    assert person_rows(db) == []
    assert effective(labels) == original
    assert_file_and_store_agree(db, labels)
    # the label and its withdrawal stay in the file, in that order
    assert [json.loads(line).get("withdraw") for line in labels.read_text().splitlines()[-2:]
            ] == [None, "tc-004"]


@pytest.mark.slow
def test_two_labellers_undo_and_relabel_keep_file_store_and_calibration_equal(
        tmp_path: Path, demo_db: Path) -> None:
    """A labels, B labels, A undoes: A's label is gone from the file's labels and from the
    store, and calibration uses B's; relabels replace a person's own label only."""
    import asyncio

    from callgate.judging.calibration import calibrate
    from callgate.judging.judge import load_judge
    from callgate.store.db import Store

    db = tmp_path / "c.db"
    shutil.copyfile(demo_db, db)
    labels = set_copy(tmp_path)
    original = effective(labels)
    assert original["tc-001"] == ("pass", "pass")
    server = Server(db, "--set", str(labels))
    url = f"/api/calibration/{labels.name}/labels"

    def label(who: str, item: str, tool: str, args: str) -> None:
        assert server.post_json(url, {"item_id": item, "labeller": who, "tool_choice": tool,
                                      "arguments": args})[0] == 201
        assert_file_and_store_agree(db, labels)

    def undo(who: str) -> None:
        assert form_post(server, f"/calibration/{labels.name}/undo",
                         {"labeller": who})[0] == 200
        assert_file_and_store_agree(db, labels)

    try:
        label("ana", "tc-001", "fail", "n/a")
        assert effective(labels)["tc-001"] == ("fail", "n/a")
        label("bo", "tc-001", "pass", "fail")
        assert "tc-001" not in effective(labels)  # they disagree: it counts for nothing
        undo("ana")
        assert effective(labels)["tc-001"] == ("pass", "fail")  # bo's, alone
        assert [r[1] for r in person_rows(db)] == ["bo"]
        status, page = server.get(f"/calibration/{labels.name}?labeller=bo&item=tc-001")
        assert status == 200 and "ana" not in page
        # relabel, then undo the relabel: bo's first label stands again
        label("bo", "tc-001", "fail", "fail")
        label("ana", "tc-002", "pass", "fail")
        label("bo", "tc-001", "pass", "pass")
        undo("bo")
        assert effective(labels)["tc-001"] == ("fail", "fail")
        undo("bo")
        assert effective(labels)["tc-001"] == ("pass", "fail")
        undo("bo")  # bo's last label on it withdrawn: the file's own label counts again
        assert effective(labels)["tc-001"] == original["tc-001"] and person_rows(db) == [
            ("tc-002", "ana", "pass", "fail")]
        assert effective(labels)["tc-002"] == ("pass", "fail")
        label("bo", "tc-003", "fail", "n/a")
    finally:
        server.stop()
    judge = load_judge(ROOT / "judges" / "tool_choice.toml").model_copy(
        update={"spec_path": tmp_path / "tool_choice.toml"})

    async def always_pass(messages: list[dict]) -> str:
        return '{"tool_choice": "pass", "arguments": "pass", "reason": "stub"}'

    with Store(db) as store:
        certificate, _, _ = asyncio.run(calibrate(judge, labels, store, always_pass, 4))
    used = certificate.labels
    assert used["tc-001"].endswith("pass/pass") and used["tc-002"].endswith("pass/fail")
    assert used["tc-003"].endswith("fail/n/a")
    assert_file_and_store_agree(db, labels)


@pytest.mark.slow
def test_a_fail_then_pass_slip_is_refused_with_the_reason_not_a_500(
        tmp_path: Path, demo_db: Path) -> None:
    db = tmp_path / "c.db"
    shutil.copyfile(demo_db, db)
    labels = set_copy(tmp_path)
    before = labels.read_bytes()
    server = Server(db, "--set", str(labels))
    slip = {"item_id": "tc-001", "labeller": "ana", "tool_choice": "fail", "arguments": "pass"}
    try:
        status, error = server.post_json(f"/api/calibration/{labels.name}/labels", slip)
        assert status == 400
        assert error["error"] == "arguments: cannot pass when tool_choice fails (use n/a or fail)"
        for path, fields in ((f"/calibration/{labels.name}/label", slip),
                             (f"/calibration/{labels.name}/label", {**slip, "back": "review"}),
                             (f"/calibration/{labels.name}/adjudicate", {**slip, "why": "x"})):
            status, page = form_post(server, path, fields)
            assert status == 400 and "cannot pass when tool_choice fails" in page
        status, page = form_post(server, f"/calibration/{labels.name}/label", slip)
        assert 'id="back"' in page and "item=tc-001" in page  # back to the same item
        assert server.get("/")[0] == 200
    finally:
        server.stop()
    assert labels.read_bytes() == before and person_rows(db) == []


@pytest.mark.slow
def test_the_labelling_page_is_blind_until_the_person_has_labelled(
        tmp_path: Path, demo_db: Path) -> None:
    db = tmp_path / "c.db"
    shutil.copyfile(demo_db, db)
    labels = set_copy(tmp_path)
    item = read_set(labels)[0][0]
    server = Server(db, "--set", str(labels))
    page_of = f"/calibration/{labels.name}?labeller=bo&item={item.id}"
    try:
        assert server.post_json(f"/api/calibration/{labels.name}/labels", {
            "item_id": item.id, "labeller": "ana", "tool_choice": "fail", "arguments": "n/a",
            "note": "ana-thinks-so"})[0] == 201
        status, page = server.get(page_of)
        assert status == 200 and item.case.rubric in html.unescape(page)
        for given_away in (item.category, "ana", "ana-thinks-so", item.note):
            assert given_away not in html.unescape(page), given_away
        assert "Blind:" in page
        assert server.post_json(f"/api/calibration/{labels.name}/labels", {
            "item_id": item.id, "labeller": "bo", "tool_choice": "pass",
            "arguments": "pass"})[0] == 201
        status, page = server.get(page_of)
        assert item.category in page and "ana" in page  # shown once bo has labelled it
    finally:
        server.stop()


def first_item_shown(page: str) -> str:
    return re.search(r"<h1>(\S+) ", page).group(1)  # type: ignore[union-attr]


@pytest.mark.slow
def test_each_person_has_a_queue_of_their_own(tmp_path: Path, demo_db: Path) -> None:
    db = tmp_path / "c.db"
    shutil.copyfile(demo_db, db)
    labels = set_copy(tmp_path)
    ids = [i.id for i in read_set(labels)[0]]
    server = Server(db, "--set", str(labels))
    try:
        for item in ids[:2]:
            assert form_post(server, f"/calibration/{labels.name}/label", {
                "item_id": item, "labeller": "ana", "tool_choice": "pass",
                "arguments": "pass"})[0] == 200
        assert first_item_shown(server.get(f"/calibration/{labels.name}?labeller=ana")[1]
                                ) == ids[2]
        # bo's queue opens at bo's first unlabelled item, not after ana's work
        assert first_item_shown(server.get(f"/calibration/{labels.name}?labeller=bo")[1]
                                ) == ids[0]
        _status, page = form_post(server, f"/calibration/{labels.name}/label", {
            "item_id": ids[0], "labeller": "bo", "tool_choice": "pass", "arguments": "pass"})
        assert first_item_shown(page) == ids[1]  # bo's next
    finally:
        server.stop()


@pytest.mark.slow
def test_a_session_plan_shares_items_asks_second_labels_and_conflicts_are_adjudicated(
        tmp_path: Path, demo_db: Path) -> None:
    from callgate.judging.labelling import SessionPlan

    db = tmp_path / "c.db"
    shutil.copyfile(demo_db, db)
    labels = set_copy(tmp_path)
    ids = [i.id for i in read_set(labels)[0]]
    server = Server(db, "--set", str(labels), "--labellers", "ana,bo", "--second-label", "25",
                    "--seed", "7")
    try:
        progress = server.json(f"/api/calibration/{labels.name}/progress")
        left = progress["still_to_label"]
        assert set(left) == {"ana", "bo"}
        doubled = SessionPlan(labellers=("ana", "bo"), second_share=0.25, seed=7).doubled(ids)
        assert len(doubled) == 46  # ceil(0.25 × 182)
        assert doubled == set(left["ana"]) & set(left["bo"])
        assert len(left["ana"]) + len(left["bo"]) == len(ids) + len(doubled)
        # each queue opens at that person's first item
        for who in ("ana", "bo"):
            page = server.get(f"/calibration/{labels.name}?labeller={who}")[1]
            assert first_item_shown(page) == left[who][0]
        shared = sorted(doubled)[0]
        for who, tool in (("ana", "pass"), ("bo", "fail")):
            assert server.post_json(f"/api/calibration/{labels.name}/labels", {
                "item_id": shared, "labeller": who, "tool_choice": tool,
                "arguments": "n/a"})[0] == 201
        progress = server.json(f"/api/calibration/{labels.name}/progress")
        assert shared not in progress["still_to_label"]["ana"] + progress["still_to_label"]["bo"]
        assert [c["item_id"] for c in progress["conflicts"]] == [shared]
        assert shared not in effective(labels)
        assert form_post(server, f"/calibration/{labels.name}/adjudicate", {
            "item_id": shared, "labeller": "cy", "tool_choice": "fail", "arguments": "n/a",
            "why": "the order id is wrong"})[0] == 200
        assert_file_and_store_agree(db, labels)
        progress = server.json(f"/api/calibration/{labels.name}/progress")
        assert progress["conflicts"] == []
        assert [(a["item_id"], a["labeller"], a["why"]) for a in progress["adjudications"]] == [
            (shared, "cy", "the order id is wrong")]
        # a later label by the last saver does not unsettle it
        assert server.post_json(f"/api/calibration/{labels.name}/labels", {
            "item_id": shared, "labeller": "ana", "tool_choice": "pass",
            "arguments": "pass"})[0] == 201
        assert effective(labels)[shared] == ("fail", "n/a")
        assert form_post(server, f"/calibration/{labels.name}/adjudicate", {
            "item_id": shared, "labeller": "cy", "tool_choice": "fail", "arguments": "n/a",
            "why": ""})[0] == 400  # no reason, no adjudication
    finally:
        server.stop()
    settled = [json.loads(line) for line in labels.read_text().splitlines()
               if '"adjudicate"' in line]
    assert [(s["adjudicate"], s["labeller"], s["why"]) for s in settled] == [
        (shared, "cy", "the order id is wrong")]


@pytest.mark.slow
def test_with_a_token_every_write_needs_it(tmp_path: Path, demo_db: Path) -> None:
    db = tmp_path / "c.db"
    shutil.copyfile(demo_db, db)
    labels = set_copy(tmp_path)
    original = labels.read_bytes()
    server = Server(db, "--set", str(labels), "--token", "s3cret-token")
    try:
        url = f"/api/calibration/{labels.name}/labels"
        label = {"item_id": "tc-001", "labeller": "ana", "tool_choice": "pass",
                 "arguments": "pass"}
        assert server.post_json(url, label)[0] == 403
        assert server.post_json(url, label, {"x-callgate-token": "wrong"})[0] == 403
        status, _, _ = server.request(
            f"/calibration/{labels.name}/label", method="POST",
            data=urlencode({**label, "token": "nope"}).encode(),
            headers={"content-type": "application/x-www-form-urlencoded"})
        assert status == 403
        assert person_rows(db) == [] and labels.read_bytes() == original
        assert server.get("/")[0] == 200  # reading needs no token
        assert server.post_json(url, label, {"x-callgate-token": "s3cret-token"})[0] == 201
        status, _, _ = server.request(
            f"/calibration/{labels.name}/label", method="POST",
            data=urlencode({**label, "item_id": "tc-002", "token": "s3cret-token"}).encode(),
            headers={"content-type": "application/x-www-form-urlencoded"})
        assert status == 200
    finally:
        server.stop()
    assert [row[0] for row in person_rows(db)] == ["tc-001", "tc-002"]


@pytest.mark.slow
def test_report_html_is_one_self_contained_file(tmp_path: Path, demo_db: Path) -> None:
    out = tmp_path / "report.html"
    done = callgate("report", "--html", str(out), "--model", MODEL, "--suite", SUITE,
                    "--db", str(demo_db))
    assert done.returncode == 0, done.stderr
    text = out.read_text()
    assert "<svg" in text and 'data-release="2026.10"' in text and "mark-regression" in text
    assert "clean-001" in text and "Passed before, fail now" in text
    assert not re.search(r'(src|href)=["\']?(https?:)?//', text)
    assert "<script" not in text and "<link" not in text
    assert 'font: 15px/1.45 system-ui, -apple-system, "Segoe UI"' in text  # CSS not escaped
    assert callgate("report", "--html", str(out), "--model", "nobody",
                    "--db", str(demo_db)).returncode == 2


@pytest.mark.slow
def test_review_and_certificate_after_calibration(tmp_path: Path, demo_db: Path) -> None:
    """Calibrate the real judge spec through the real code path with a judge model that says
    pass to everything: every item a person labelled fail is a disagreement, and the
    certificate is void with the reason."""
    import asyncio

    from callgate.judging.calibration import calibrate
    from callgate.judging.judge import load_judge
    from callgate.store.db import Store

    db = tmp_path / "c.db"
    shutil.copyfile(demo_db, db)
    labels = set_copy(tmp_path)
    # a certificate, were one earned, would be written beside spec_path: keep it in tmp_path
    judge = load_judge(ROOT / "judges" / "tool_choice.toml").model_copy(
        update={"spec_path": tmp_path / "tool_choice.toml"})

    async def always_pass(messages: list[dict]) -> str:
        return '{"tool_choice": "pass", "arguments": "pass", "reason": "the stub passes all"}'

    with Store(db) as store:
        certificate, disagreements, _ = asyncio.run(
            calibrate(judge, labels, store, always_pass, 4))
    assert not certificate.certified
    fails = {d.item for d in disagreements}
    server = Server(db, "--set", str(labels))
    try:
        status, page = server.get(f"/calibration/{labels.name}/review")
        assert status == 200
        listed = set(re.findall(r'<tr id="tc-\d+"><td>(tc-\d+) <span', page))
        assert listed == fails and len(listed) > 10
        assert "the stub passes all" in page
        # relabel in place: the person now agrees with the judge on one item
        first = sorted(fails)[0]
        status, _, _ = server.request(
            f"/calibration/{labels.name}/label", method="POST",
            data=urlencode({"item_id": first, "labeller": "ana", "tool_choice": "pass",
                            "arguments": "pass", "back": "review"}).encode(),
            headers={"content-type": "application/x-www-form-urlencoded"})
        assert status == 200
        status, page = server.get(f"/calibration/{labels.name}/review?labeller=ana")
        assert set(re.findall(r'<tr id="tc-\d+"><td>(tc-\d+) <span', page)) == fails - {first}
        status, page = server.get(f"/certificates/{certificate.fingerprint}")
        assert status == 200 and ">void<" in page and "TNR 0.0 below" in page
        api = server.json(f"/api/certificates/{certificate.fingerprint}")
        assert api["status"] == "void"
        assert api["certificate"]["dimensions"]["tool_choice"]["confusion"]["tn"] == 0
        # the label-budget plan: a judge that never agrees on a fail item cannot be certified
        # by more items of that class, and the page says so
        assert "Labels still needed" in page
        assert any(line.startswith("  tool_choice: fail items (TNR): cannot certify")
                   for line in api["plan"]), api["plan"]
        # the progress page measures the session against the same plan
        needed = server.json(f"/api/calibration/{labels.name}/progress")["labels_needed"]
        assert needed["plan"] == api["plan"] and needed["labels_since"] == 1  # ana's relabel
        status, page = server.get(f"/calibration/{labels.name}/progress")
        assert "Labels needed to certify" in page and "1 label(s) given since" in page
    finally:
        server.stop()


@pytest.mark.slow
def test_labelling_a_runs_judged_attempts_grows_a_set_as_judge_label_does(
    tmp_path: Path, loopback, callgate_exe: str, cli_env: dict) -> None:
    """A run scored with a judge (a loopback server plays the judge model); its judged attempts
    labelled through the page land in a new set file as `callgate judge label` writes them."""
    from live_judge import judged_responses, judged_suite, make_judge, verdict
    from loopback import ok

    spec = make_judge(tmp_path, loopback.base_url)
    for n in range(4):
        loopback.script(f"[case-{n}]", ok(content=verdict("pass", "pass", f"case {n}"),
                                           provider=None, cost=None))
    suite = judged_suite(tmp_path / "suite")
    responses = judged_responses(tmp_path / "r.jsonl")
    scored = subprocess.run(
        [callgate_exe, "score", str(suite), "-r", str(responses), "-m", "m", "--release", "r1",
         "--db", "c.db", "--judge", str(spec), "--uncalibrated", "--json"],
        cwd=tmp_path, env=cli_env, capture_output=True, text=True, timeout=120)
    assert scored.returncode in (0, 3), scored.stderr
    run = json.loads(scored.stdout)["run_id"]
    grown = tmp_path / "grown.jsonl"  # does not exist yet: the first label creates it
    server = Server(tmp_path / "c.db", "--set", str(grown))
    try:
        status, page = server.get(f"/runs/{run}")
        assert f'href="/runs/{run}/label"' in page
        status, page = server.get(f"/runs/{run}/label?labeller=ana")
        assert status == 200 and f"run{run}-j0-r0" in page and "Escalate faithfully." in page
        for item_id, tool, args in ((f"run{run}-j0-r0", "pass", "pass"),
                                    (f"run{run}-j3-r0", "fail", "n/a")):
            status, _, _ = server.request(
                f"/runs/{run}/label", method="POST",
                data=urlencode({"set": grown.name, "item_id": item_id, "labeller": "ana",
                                "tool_choice": tool, "arguments": args, "split": "test",
                                "note": "by hand"}).encode(),
                headers={"content-type": "application/x-www-form-urlencoded"})
            assert status == 200
    finally:
        server.stop()
    items, _ = read_set(grown)
    assert [(i.id, i.split, i.label.tool_choice, i.label.arguments, i.note) for i in items] == [
        (f"run{run}-j0-r0", "test", "pass", "pass", "by hand"),
        (f"run{run}-j3-r0", "test", "fail", "n/a", "by hand")]
    assert items[0].case.rubric == "Escalate faithfully." and items[0].category == \
        "labelled_from_run"
    assert [row[:2] for row in person_rows(tmp_path / "c.db")] == [
        (f"run{run}-j0-r0", "ana"), (f"run{run}-j3-r0", "ana")]


@pytest.mark.slow
def test_a_releases_audit_sample_is_labelled_in_the_serve_queue_blind(
    tmp_path: Path, loopback, callgate_exe: str, cli_env: dict) -> None:
    """`callgate judge audit RUN --n 2` draws the sample; /runs/RUN/audit shows its items in
    sample order without the judge's verdict and stores each label as `judge label --audit`
    does."""
    from live_judge import judged_responses, judged_suite, make_judge, verdict
    from loopback import ok

    spec = make_judge(tmp_path, loopback.base_url)
    for n in range(4):
        loopback.script(f"[case-{n}]", ok(content=verdict("pass", "pass", f"judge-says-{n}"),
                                           provider=None, cost=None))
    suite = judged_suite(tmp_path / "suite")
    responses = judged_responses(tmp_path / "r.jsonl")

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([callgate_exe, *args, "--db", "c.db"], cwd=tmp_path, env=cli_env,
                              capture_output=True, text=True, timeout=120)

    scored = cli("score", str(suite), "-r", str(responses), "-m", "m", "--release", "r1",
                 "--judge", str(spec), "--uncalibrated", "--json")
    assert scored.returncode in (0, 3), scored.stderr
    run = json.loads(scored.stdout)["run_id"]
    assert cli("judge", "audit", str(run), "--n", "2", "--seed", "5").returncode == 0
    with sqlite3.connect(tmp_path / "c.db") as conn:
        sample = conn.execute("SELECT case_id, repeat FROM audit_items WHERE run = ? "
                              "ORDER BY position", [run]).fetchall()
    server = Server(tmp_path / "c.db")
    try:
        for case_id, repeat in sample:
            status, page = server.get(f"/runs/{run}/audit?labeller=ana")
            assert status == 200 and f"run{run}-{case_id}-r{repeat}" in page
            assert "judge-says" not in page
            status, page = form_post(server, f"/runs/{run}/audit", {
                "case_id": case_id, "repeat": str(repeat), "labeller": "ana",
                "tool_choice": "fail", "arguments": "pass"})
            assert status == 400 and "cannot pass when tool_choice fails" in page
            assert form_post(server, f"/runs/{run}/audit", {
                "case_id": case_id, "repeat": str(repeat), "labeller": "ana",
                "tool_choice": "pass", "arguments": "fail"})[0] == 200
        status, page = server.get(f"/runs/{run}/audit?labeller=ana")
        assert "every item" in page
        assert form_post(server, f"/runs/{run}/audit", {
            "case_id": "nope", "repeat": "0", "labeller": "ana", "tool_choice": "pass",
            "arguments": "pass"})[0] == 400
    finally:
        server.stop()
    with sqlite3.connect(tmp_path / "c.db") as conn:
        stored = conn.execute("SELECT case_id, repeat, label_tool_choice, label_arguments, "
                              "labeller FROM audit_items WHERE run = ? ORDER BY position",
                              [run]).fetchall()
    assert stored == [(c, r, "pass", "fail", "ana") for c, r in sample]
    report = cli("judge", "audit", str(run), "--json")
    assert json.loads(report.stdout)["labelled"] == 2


@pytest.mark.slow
def test_other_sites_can_neither_write_nor_rebind(tmp_path: Path, demo_db: Path) -> None:
    db = tmp_path / "c.db"
    shutil.copyfile(demo_db, db)
    labels = set_copy(tmp_path)
    server = Server(db, "--set", str(labels))
    try:
        url = f"/api/calibration/{labels.name}/labels"
        label = {"item_id": "tc-001", "labeller": "ana", "tool_choice": "pass",
                 "arguments": "pass"}
        assert server.post_json(url, label, {"origin": "http://evil.example"})[0] == 403
        assert server.post_json(url, label, {"origin": "null"})[0] == 403
        status, _, _ = server.request(
            f"/calibration/{labels.name}/label", method="POST",
            data=urlencode(label).encode(),
            headers={"content-type": "application/x-www-form-urlencoded",
                     "origin": "https://evil.example"})
        assert status == 403 and person_rows(db) == []
        assert server.get("/")[0] == 200
        assert server.request("/", headers={"host": "evil.example"})[0] == 400
        own = f"http://127.0.0.1:{server.port}"
        assert server.post_json(url, label, {"origin": own})[0] == 201
    finally:
        server.stop()
    assert len(person_rows(db)) == 1


@pytest.mark.slow
def test_the_served_decision_follows_the_gates_recorded_on_earlier_releases(
        tmp_path: Path, demo_db: Path) -> None:
    """Only a released run is a baseline, and `callgate gate` records what it decided: once
    2026.11 is gated (a regression), 2026.12 is compared with 2026.10, also by the server that
    had computed the earlier answer."""
    db = tmp_path / "c.db"
    shutil.copyfile(demo_db, db)
    with sqlite3.connect(db) as conn:  # as if 2026.11 had been scored but not gated yet
        conn.execute("UPDATE runs SET gate = NULL WHERE release = '2026.11' AND suite_name = ?",
                     [SUITE])
    example = ROOT / "src" / "callgate" / "examples" / "order_support"
    done = callgate("score", str(example), "-r", str(example / "responses-2026.10.jsonl"),
                    "-m", MODEL, "--release", "2026.12", "--db", str(db))
    assert done.returncode == 0, done.stderr
    query = "/api/gate?" + urlencode({"model": MODEL, "release": "2026.12", "suite": SUITE})
    server = Server(db)
    try:
        assert server.json(query)["baseline_release"] == "2026.11"
        gated = callgate("gate", "--model", MODEL, "--release", "2026.11", "--suite", SUITE,
                         "--db", str(db))
        assert gated.returncode == 1
        served = server.json(query)
    finally:
        server.stop()
    printed = callgate("gate", "--model", MODEL, "--release", "2026.12", "--suite", SUITE,
                       "--db", str(db), "--json")
    assert served["baseline_release"] == "2026.10"
    assert served == json.loads(printed.stdout)
