"""What every mixin of Store (store/db.py) relies on Store to provide: declared once here."""

from __future__ import annotations

from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from sqlite_utils import Database


class StoreBase:
    """The connection, the file and the run lookups that Store defines."""

    db: Database
    path: Path

    def atomic(self) -> AbstractContextManager[Database]:
        raise NotImplementedError

    def run(self, run_id: int) -> dict[str, Any] | None:
        raise NotImplementedError

    def find_run(self, suite_name: str, agent: str, release: str) -> dict[str, Any] | None:
        raise NotImplementedError
