"""Two stored releases with kept tallies are paired in the store (only the cases whose tallies
differ are read out), and decided exactly as when every case's record is read and paired."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import lookup_case, no_call_case, write_suite
from factories import line, message, tool_call, write_lines

from callgate.gating.cases import Paired
from callgate.gating.decision import CaseChange, GateDecision
from callgate.gating.finding import find_current, stored_release
from callgate.gating.release import decide_release
from callgate.scoring.pipeline import score_file
from callgate.store.db import Store
from callgate.suites.suite import load_suite

RIGHT = message(tool_call("lookup_order", {"order_id": "ord_1"}))
WRONG = message(tool_call("lookup_order", {"order_id": "ord_9"}))
WORDS = message(content="9-5")


def three_releases(tmp_path: Path) -> Path:
    """r1 and r2 on one suite, r3 on a changed one (f removed, g added). r2: a flips both ways
    over its repeats, b fixed, c cut short (excluded, no scored attempt), d not answered, e
    the same, f broken; r3 on the changed suite."""
    cases = [lookup_case(c) for c in "abcdef"]
    first = load_suite(write_suite(tmp_path / "1" / "orders", cases))
    changed = load_suite(write_suite(tmp_path / "2" / "orders",
                                     [*cases[:5], no_call_case("g")]))
    answers = {
        "r1": (first, [line("a", RIGHT), line("a", RIGHT, 1), line("a", WRONG, 2),
                       line("b", WRONG), line("b", WORDS, 1), line("c", RIGHT),
                       line("d", RIGHT), line("e", WRONG), line("f", RIGHT)]),
        "r2": (first, [line("a", WRONG), line("a", RIGHT, 1), line("a", WRONG, 2),
                       line("b", RIGHT), line("b", RIGHT, 1),
                       line("c", RIGHT, finish_reason="length"), line("e", WRONG),
                       line("f", WORDS)]),
        "r3": (changed, [line("a", RIGHT), line("b", WRONG), line("c", RIGHT), line("e", RIGHT),
                         line("g", WORDS)]),
    }
    db = tmp_path / "callgate.db"
    with Store(db) as store:
        for release, (suite, lines) in answers.items():
            score_file(suite, write_lines(tmp_path / f"{release}.jsonl", lines), store,
                       model="m", release=release, max_excluded=1.0)
    return db


def decisions(store: Store) -> list[GateDecision]:
    return [decide_release(store, find_current(store, "m", release, None))[0]
            for release in ("r2", "r3")]


def test_the_store_pairs_kept_tallies_as_the_records_pair(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    db = three_releases(tmp_path)
    with Store(db) as store:
        with monkeypatch.context() as patch:  # neither release's cases are read out whole
            for reader in ("case_tallies", "gate_rows"):
                patch.setattr(Store, reader, lambda *_, name=reader: pytest.fail(f"{name} read"))
            paired = decisions(store)
        with store.atomic():  # as runs finished before tallies were kept: records paired
            store.db.execute("DELETE FROM case_tallies")
        from_records = decisions(store)
    assert [d.model_dump_json() for d in paired] == [d.model_dump_json() for d in from_records]
    same, changed = paired
    assert (same.shared_cases, same.suite_changed) == (4, False)
    assert [c.case_id for c in same.worse] == ["a", "f"]
    assert [c.case_id for c in same.better] == ["b"]
    assert any("2 of 6 cases the baseline scored have no scored attempt now (first: c, d)" in m
               for m in same.messages), same.messages
    assert changed.suite_changed and changed.added_cases == ["g"]
    assert changed.removed_cases == ["f"]


def test_pairs_counted_by_the_store_equal_pairs_of_records(tmp_path: Path) -> None:
    db = three_releases(tmp_path)
    with Store(db) as store:
        r1, r2 = (find_current(store, "m", r, None) for r in ("r1", "r2"))
        counted = Paired.counted(*store.paired_tallies(r1["id"], r2["id"]))
        records = Paired.of(stored_release(store, r1).cases, stored_release(store, r2).cases)
    assert counted == records
    assert counted.unscored == ["c", "d"] and counted.shared == 4
    assert [row[0] for row in counted.changed] == ["a", "b", "f"]


def test_a_decisions_flipped_cases_are_objects_in_its_json(tmp_path: Path) -> None:
    from pydantic import ValidationError

    same, _ = decisions(Store(three_releases(tmp_path)))
    document = json.loads(same.model_dump_json())
    assert document["worse"][0] == {"case_id": "a", "reason": same.worse[0].reason}
    assert GateDecision.model_validate_json(same.model_dump_json()) == same
    document["worse"][0] = ["a", "a list"]
    with pytest.raises(ValidationError, match="a case change is an object"):
        GateDecision.model_validate(document)


def test_a_kept_decision_reads_back_and_dumps_as_pydantic_would(tmp_path: Path) -> None:
    """kept_decision and decision_json skip pydantic's per-case work on the flipped cases
    (the pages' cold time at 100,000 attempts): the same decision and the same JSON."""
    from callgate.gating.decision import decision_json, kept_decision

    for decision in decisions(Store(three_releases(tmp_path))):
        kept = kept_decision(decision.model_dump_json())
        assert kept == decision
        assert all(type(c) is CaseChange for c in (*kept.worse, *kept.better))
        assert decision_json(kept) == decision.model_dump(mode="json")
        assert json.dumps(decision_json(decision)) == json.dumps(
            decision.model_dump(mode="json"))
    assert decisions(Store(three_releases(tmp_path / "again")))[0].worse  # cases to read


def test_the_pages_find_the_decision_the_gate_kept(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The key of a kept decision is the same whether the suite's runs were read by the gate
    or handed over by the pages (typed rows): a page shows `callgate gate`'s decision without
    deciding again."""
    from callgate.gating import release as releasing

    with Store(three_releases(tmp_path)) as store:
        decision, _ = releasing.gate_release(store, "m", "r2")
        run = find_current(store, "m", "r2", None)
        key = releasing.decision_key(store, run, 2.0, 0.05,
                                     store.stored_runs(suite_name=run.suite_name))
        monkeypatch.setattr(releasing, "decide_release",
                            lambda *_, **__: pytest.fail("decided again"))
        kept, _ = releasing.recorded_decision(store, run, key=key)
    assert kept == decision
