"""What scoring writes stays byte-identical while it is made faster: every table a score writes,
dumped row by row after the bundled example's releases (every verdict kind) and a cycled mix
of them with new repeats are scored, hashed per table and compared with the digests the code
of commit f565cdc wrote (stored_rows_digests.json beside this file).

Regenerate the digests (only where a stored value is meant to change, and say so in the
commit): `uv run python tests/scoring/test_stored_rows_unchanged.py`."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import sys
from itertools import cycle
from pathlib import Path

from callgate.cli.demo import example_path
from callgate.scoring.pipeline import score_file
from callgate.store.db import Store
from callgate.suites.suite import load_suite

DIGESTS = Path(__file__).with_name("stored_rows_digests.json")
# The tables a score writes; the clock's columns and the suite folder's path are left out.
TABLES = ("suites", "cases", "runs", "responses", "verdicts", "scores", "case_tallies",
          "case_marks", "attempt_tools", "attempt_tool_runs", "slice_tallies", "slice_calls",
          "argument_failures", "run_owners")
CLOCK = frozenset({"created_at", "loaded_at", "path"})


def score_workload(folder: Path) -> Path:
    """A store with the example's three releases scored, then a mix of two of them cycled to
    1,000 lines with new repeats, and the first release scored again (it replaces its run)."""
    root = example_path()
    suite = load_suite(root)
    db = folder / "store.db"
    lines = []
    for release in ("2026.10", "2026.11"):
        text = (root / f"responses-{release}.jsonl").read_text()
        lines += [json.loads(line) for line in text.splitlines() if line.strip()]
    mixed = folder / "mixed.jsonl"
    mixed.write_text("".join(json.dumps({**item, "repeat": index}) + "\n"
                             for index, item in zip(range(1000), cycle(lines), strict=False)))
    with Store(db, notify=lambda _: None) as store:
        for release in ("2026.10", "2026.11", "2026.12"):
            score_file(suite, root / f"responses-{release}.jsonl", store, model="example",
                       release=release, keep_verdicts=False)
        score_file(suite, mixed, store, model="example", release="mixed", keep_verdicts=False)
        score_file(suite, root / "responses-2026.10.jsonl", store, model="example",
                   release="2026.10", keep_verdicts=False)
    return db


# Columns added since f565cdc by a migration: not in the digests, and a score leaves them NULL
ADDED = {"runs": ("fault_plan",)}


def table_digests(db: Path) -> dict[str, dict[str, object]]:
    """Per table: its rows (all columns but the clock's and the ADDED ones, in a fixed order)
    and their sha256."""
    conn = sqlite3.connect(db)
    try:
        out: dict[str, dict[str, object]] = {}
        for table in TABLES:
            for added in ADDED.get(table, ()):
                assert conn.execute(f"SELECT COUNT(*) FROM {table} WHERE {added} IS NOT NULL"
                                    ).fetchone()[0] == 0, (table, added)
            columns = [row[1] for row in conn.execute(f"PRAGMA table_info({table})")
                       if row[1] not in CLOCK and row[1] not in ADDED.get(table, ())]
            listed = ", ".join(columns)
            rows = conn.execute(f"SELECT {listed} FROM {table} ORDER BY {listed}").fetchall()
            digest = hashlib.sha256(repr(rows).encode()).hexdigest()
            out[table] = {"rows": len(rows), "sha256": digest}
        return out
    finally:
        conn.close()


def test_what_scoring_stores_is_what_f565cdc_stored(tmp_path: Path) -> None:
    expected = json.loads(DIGESTS.read_text())
    found = table_digests(score_workload(tmp_path))
    assert found["responses"]["rows"] == 108 * 3 + 1000  # the workload was scored
    differing = {table: (found[table], expected[table]) for table in TABLES
                 if found[table] != expected[table]}
    assert not differing


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        digests = table_digests(score_workload(Path(tmp)))
    DIGESTS.write_text(json.dumps(digests, indent=1, sort_keys=True) + "\n")
    print(f"wrote {DIGESTS} ({sys.version.split()[0]})")
