"""The web's reads at their edges, in process over a real SQLite store: the gate's decision is
kept under one key whichever page asked first."""

from __future__ import annotations

from pathlib import Path

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
