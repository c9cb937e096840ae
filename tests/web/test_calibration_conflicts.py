"""What a calibration session shows about agreement: an item people disagree on says so on its
page (not "the set's label"), Cohen's kappa over too few shared items is "not enough items"
(not 0.00), the queue header counts one thing (the person's items left, and this one's place
among them), and a set with two items of one id is refused in one line naming file and line."""

from __future__ import annotations

import html
import json
import re
import shutil
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import copy_demo_store
from paths import ROOT
from webserver import Server, callgate_script

from callgate.errors import InputError
from callgate.judging.calibration_set import read_journal
from callgate.judging.certificates import Confusion

MIN_KAPPA_ITEMS = 10  # callgate.judging.calibration.MIN_KAPPA_ITEMS, as docs/labelling.md says

SET = ROOT / "calibration" / "tool_choice.jsonl"


def test_kappa_over_too_few_shared_items_is_not_enough_items_not_a_figure() -> None:
    from callgate.judging import calibration
    from callgate.judging.calibration import cohen_kappa, kappa, kappa_text

    assert calibration.MIN_KAPPA_ITEMS == MIN_KAPPA_ITEMS
    assert kappa([("pass", "fail")]) is None  # was 0.0
    assert kappa([("pass", "pass")]) is None  # was 1.0
    assert kappa_text(kappa([("pass", "fail")]), 1) == (
        f"not enough items (1; needs {MIN_KAPPA_ITEMS})")
    assert cohen_kappa(Confusion(tp=1)) is None and cohen_kappa(Confusion(fn=1)) is None
    pairs = [("pass", "pass")] * 6 + [("fail", "fail")] * 3 + [("pass", "fail")]
    # po = 0.9; pe = (7·6 + 3·4) / 100 = 0.54
    assert kappa(pairs) == pytest.approx((0.9 - 0.54) / (1 - 0.54))
    assert kappa_text(kappa(pairs), len(pairs)) == "0.78"
    assert kappa_text(kappa([("pass", "pass")] * 10), 10) == "undefined (one label only)"


def lines_of(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


@pytest.mark.parametrize("how", ["copied", "relabelled"])
def test_two_items_of_one_id_by_the_files_own_labeller_are_refused_naming_the_line(
        tmp_path: Path, how: str) -> None:
    lines = lines_of(SET)
    second = json.loads(lines[0])
    if how == "relabelled":  # the assistant's label changed by hand, the old line kept
        second["label"] = {"tool_choice": "fail", "arguments": "n/a"}
    duplicated = tmp_path / "dup.jsonl"
    duplicated.write_text("\n".join([*lines, json.dumps(second)]) + "\n", encoding="utf-8")
    with pytest.raises(InputError) as raised:
        read_journal(duplicated)
    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith(f"{duplicated}:{len(lines) + 1}: id: duplicate item id "
                              f"{second['id']!r}")
    assert "the first is on line 1" in message


def test_a_persons_relabel_of_an_item_is_still_a_relabel(tmp_path: Path) -> None:
    lines = lines_of(SET)
    first = json.loads(lines[0])
    relabels = [{**first, "labeller": "ana", "label": {"tool_choice": "fail",
                                                       "arguments": "n/a"}},
                {**first, "labeller": "ana", "label": {"tool_choice": "pass",
                                                       "arguments": "n/a"}}]
    grown = tmp_path / "grown.jsonl"
    grown.write_text("\n".join([*lines, *map(json.dumps, relabels)]) + "\n", encoding="utf-8")
    journal = read_journal(grown)
    assert [i.labeller for i in journal.items if i.id == first["id"]] == ["ana"]
    assert journal.conflicts == []


@pytest.mark.slow
def test_judge_calibrate_refuses_a_set_with_two_items_of_one_id_in_one_line(
        tmp_path: Path) -> None:
    lines = lines_of(SET)
    duplicated = tmp_path / "dup.jsonl"
    duplicated.write_text("\n".join([*lines, lines[5]]) + "\n", encoding="utf-8")
    # a judge endpoint on loopback where nothing listens: no call may leave the machine
    done = subprocess.run([callgate_script(), "judge", "calibrate", "tool_choice", "--set",
                           str(duplicated), "--db", str(tmp_path / "c.db"), "--api-base",
                           "http://127.0.0.1:9/v1"],
                          capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "OPENAI_API_KEY": "sk-test-none",
                               "HOME": str(tmp_path)})
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1, done.stderr  # no progress bar, no second line
    assert done.stderr.startswith(f"error: {duplicated}:{len(lines) + 1}: id: duplicate item id")
    assert not (tmp_path / "c.db").exists()


@pytest.fixture(scope="module")
def demo_db(demo_store: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copy_demo_store(demo_store, tmp_path_factory.mktemp("demo"))


@pytest.fixture
def session(tmp_path: Path, demo_db: Path) -> Iterator[tuple[Server, str]]:
    db = tmp_path / "c.db"
    shutil.copyfile(demo_db, db)
    labels = tmp_path / "tool_choice.jsonl"
    shutil.copyfile(SET, labels)
    server = Server(db, "--set", str(labels), "--labellers", "ana,bo", "--second-label", "25",
                    "--seed", "7")
    try:
        yield server, labels.name
    finally:
        server.stop()


def text_of(page: str, element_id: str) -> str:
    found = re.search(rf'id="{element_id}"[^>]*>(.*?)</(?:span|p)>', page, re.DOTALL)
    assert found, f"no #{element_id} on the page"
    return " ".join(html.unescape(re.sub(r"<[^>]+>", "", found.group(1))).split())


@pytest.mark.slow
def test_an_item_people_disagree_on_shows_the_conflict_not_the_sets_label(
        session: tuple[Server, str]) -> None:
    server, name = session
    left = server.json(f"/api/calibration/{name}/progress")["still_to_label"]
    shared = sorted(set(left["ana"]) & set(left["bo"]))[0]
    for who, tool in (("ana", "pass"), ("bo", "fail")):
        assert server.post_json(f"/api/calibration/{name}/labels", {
            "item_id": shared, "labeller": who, "tool_choice": tool, "arguments": "n/a"}
        )[0] == 201
    progress = server.json(f"/api/calibration/{name}/progress")
    assert [c["item_id"] for c in progress["conflicts"]] == [shared]
    status, page = server.get(f"/calibration/{name}?labeller=ana&item={shared}")
    assert status == 200
    assert "The set's label" not in page
    conflict = text_of(page, "conflict")
    assert "People disagree on this item (ana: pass / n/a; bo: fail / n/a)" in conflict
    assert "counts for nothing in calibration" in conflict
    # Still blind for a person who has not labelled it: no conflict, no label.
    blind = server.get(f"/calibration/{name}?labeller=cy&item={shared}")[1]
    assert 'id="conflict"' not in blind and "The set's label" not in blind
    # Agreement over one shared item: not a kappa.
    page = server.get(f"/calibration/{name}/progress")[1]
    row = re.search(r"<td>ana &amp; bo</td>(.*?)</tr>", page, re.DOTALL)
    assert row is not None
    cells = [html.unescape(c) for c in re.findall(r'<td class="num">(.*?)</td>', row.group(1))]
    assert cells == ["1", f"not enough items (1; needs {MIN_KAPPA_ITEMS})",
                     f"not enough items (1; needs {MIN_KAPPA_ITEMS})"]
    assert "0.00" not in row.group(1)
    with sqlite3.connect(server_db(server)) as conn:
        assert conn.execute("SELECT count(*) FROM calibration_items WHERE item_id = ?",
                            [shared]).fetchone() == (0,)  # left out, as the page says


def server_db(server: Server) -> str:
    args = server.process.args
    return str(args[args.index("--db") + 1])


@pytest.mark.slow
def test_the_queue_header_counts_the_persons_items_and_this_ones_place_among_them(
        session: tuple[Server, str]) -> None:
    server, name = session
    progress = server.json(f"/api/calibration/{name}/progress")
    mine, total = progress["still_to_label"]["ana"], progress["total"]
    header = text_of(server.get(f"/calibration/{name}?labeller=ana")[1], "queue-place")
    assert header == f"{len(mine)} of {total} items left for ana · this is 1 of those {len(mine)}"
    third = text_of(server.get(f"/calibration/{name}?labeller=ana&item={mine[2]}")[1],
                    "queue-place")
    assert third.endswith(f"this is 3 of those {len(mine)}")
    others = [i for i in progress["still_to_label"]["bo"] if i not in mine]
    elsewhere = text_of(server.get(f"/calibration/{name}?labeller=ana&item={others[0]}")[1],
                        "queue-place")
    assert elsewhere == f"{len(mine)} of {total} items left for ana · not one of those {len(mine)}"
    assert server.post_json(f"/api/calibration/{name}/labels", {
        "item_id": mine[0], "labeller": "ana", "tool_choice": "pass", "arguments": "n/a"}
    )[0] == 201
    done = text_of(server.get(f"/calibration/{name}?labeller=ana&item={mine[0]}")[1],
                   "queue-place")
    assert done == (f"{len(mine) - 1} of {total} items left for ana · labelled by ana already")
