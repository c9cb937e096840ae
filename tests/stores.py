"""Store files as an older callgate made them, rebuilt from committed SQL dumps."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from paths import FIXTURES


def legacy_store(path: Path, *, unique_runs: bool = False) -> Path:
    """A store as commit 673342a made it (no application_id, user_version 0), rebuilt from
    the SQL dump of one `callgate score` run by that commit; optionally with the older runs
    table that allowed one row per release."""
    script = (FIXTURES / "store_673342a.sql").read_text()
    if unique_runs:
        script = script.replace(
            "    scores TEXT\n);", "    scores TEXT,\n    UNIQUE (suite_name, model, release)\n);"
        )
        assert "UNIQUE (suite_name" in script
    conn = sqlite3.connect(path)
    conn.executescript(script)
    conn.close()
    return path
