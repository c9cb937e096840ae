"""People's adjudications of calibration items (serve's sessions, `adjudications`) come through
`callgate merge` as their labels (`person_labels`) do, each copied once."""

from __future__ import annotations

from pathlib import Path

from callgate.merging.merge import merge_stores
from callgate.store.db import Store


def test_adjudications_are_merged_once(tmp_path: Path) -> None:
    source = tmp_path / "in.db"
    label = ("i1", "ann", "pass", "right", "agrees", "2026-01-01T00:00:00+00:00", '{"a": 1}')
    settled = ("i1", "bob", "fail", "wrong", "the call was refused", "2026-01-02T00:00:00+00:00",
               '{"b": 2}')
    with Store(source) as store:
        store.replace_set_labels("set.jsonl", [label], [settled])
    merge_stores(tmp_path / "out.db", [source])
    merge_stores(tmp_path / "out.db", [source])  # again: nothing new
    with Store(tmp_path / "out.db") as store:
        kept = [(r["item_id"], r["labeller"], r["tool_choice"], r["arguments"], r["why"],
                 r["created_at"], r["line"]) for r in store.adjudications("set.jsonl")]
        labels = store.person_labels("set.jsonl")
    assert kept == [settled]
    assert [r["labeller"] for r in labels] == ["ann"]
