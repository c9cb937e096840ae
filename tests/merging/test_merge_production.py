"""`callgate merge` over stores holding production samples (score --traces --production):
the merged store's history equals one store that scored every file, each agent's trace kept
once."""

from __future__ import annotations

from pathlib import Path

import pytest
from production_traces import CONVERSATIONS, record_production, shifted, write_folder

from callgate.merging.merge import merge_stores
from callgate.scoring.production import score_production
from callgate.store.db import Store


def _history(db: Path) -> tuple[list[dict[str, object]], dict[str, dict[str, int]], int]:
    with Store(db) as store:
        counts = [dict(row) for row in store.production_counts("bot", "day")]
        violations = store.production_violations("bot", "day")
        stored = sum(row["stored"] for row in store.db.query(
            "SELECT stored FROM production_batches"))
    return counts, violations, stored


def test_merged_production_samples_equal_one_store_that_scored_every_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = write_folder(tmp_path / "folder", tools=None)
    first = shifted(record_production("openinference", monkeypatch), -1).write(
        tmp_path / "d1.jsonl")
    second = record_production("openinference", monkeypatch, [
        c for c in CONVERSATIONS if c["id"] in ("valid", "policy")]).write(tmp_path / "d2.jsonl")
    with Store(tmp_path / "one.db") as store:
        score_production(folder, first, store, agent="bot", release="r1")
        score_production(folder, second, store, agent="bot", release="r2")
    with Store(tmp_path / "a.db") as store:
        score_production(folder, first, store, agent="bot", release="r1")
    with Store(tmp_path / "b.db") as store:  # yesterday's file scored here too: kept once
        score_production(folder, first, store, agent="bot", release="r1")
        score_production(folder, second, store, agent="bot", release="r2")
    merge_stores(tmp_path / "merged.db", [tmp_path / "a.db", tmp_path / "b.db"])
    merged, alone = _history(tmp_path / "merged.db"), _history(tmp_path / "one.db")
    assert merged == alone
    counts, _, stored = merged
    assert counts and stored == sum(int(str(row["traces"])) for row in counts)
