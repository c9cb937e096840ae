"""Store methods for suites and their cases (a mixin of Store): kept once per fingerprint,
the probe's findings beside them, and discarded when no run refers to them."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from callgate.reading import canonical_json
from callgate.store.base import StoreBase
from callgate.store.schema import now


class StoredSuite(Protocol):
    """What the store keeps of a suite (`callgate.suites.suite.Suite` is one): the store sits
    below the stages and knows them only by the fields it writes."""

    @property
    def name(self) -> str: ...
    @property
    def path(self) -> Path: ...
    @property
    def fingerprint(self) -> str: ...
    @property
    def raw_tools(self) -> list[dict[str, Any]]: ...
    @property
    def raw_cases(self) -> Mapping[str, dict[str, Any]]: ...
    def case_tags(self) -> Mapping[str, Sequence[str]]: ...
    def case_expect_types(self) -> Mapping[str, str]: ...


class SuiteRows(StoreBase):
    """Store methods for suites (a mixin of Store)."""

    def save_suite(self, suite: StoredSuite) -> bool:
        """Store the suite and its cases (idempotent: keyed by fingerprint). True when they
        were not stored before."""
        with self.atomic():
            if self.db["suites"].count_where("fingerprint = ?", [suite.fingerprint]):
                return False
            self.db.table("suites").insert(
                {
                    "fingerprint": suite.fingerprint,
                    "name": suite.name,
                    "path": str(suite.path),
                    "tools": canonical_json(suite.raw_tools),
                    "loaded_at": now(),
                }
            )
            expect_types, tags = suite.case_expect_types(), suite.case_tags()
            self.db.table("cases").insert_all(
                {
                    "suite": suite.fingerprint,
                    "case_id": case_id,
                    "expect_type": expect_types[case_id],
                    "tags": json.dumps(list(tags[case_id])),
                    "body": canonical_json(raw),
                }
                for case_id, raw in suite.raw_cases.items()
            )
        return True

    def set_suite_probe(self, fingerprint: str, weak: Mapping[str, str]) -> None:
        """Keep the probe's weak cases (case id -> reason) with the suite."""
        with self.atomic():
            self.db.execute("UPDATE suites SET probe = ? WHERE fingerprint = ?",
                            [json.dumps(dict(weak), ensure_ascii=False), fingerprint])

    def suite_probe(self, fingerprint: str) -> dict[str, str] | None:
        """The probe's weak cases kept with the suite, None when it was not probed."""
        row = self.db.execute("SELECT probe FROM suites WHERE fingerprint = ?",
                              [fingerprint]).fetchone()
        return json.loads(row[0]) if row is not None and row[0] is not None else None

    def case_expectations(self, fingerprint: str) -> list[tuple[str, str | None, str | None]]:
        """Each case of the suite with its expectation and never_right, as JSON text."""
        return [tuple(row) for row in self.db.execute(
            "SELECT case_id, json_extract(body, '$.expect'), "
            "json_extract(body, '$.never_right') FROM cases WHERE suite = ?", [fingerprint])]

    def discard_suite_if_unused(self, fingerprint: str) -> None:
        """Delete a suite and its cases that no run refers to (after a run that failed)."""
        with self.atomic():
            if self.db["runs"].count_where("suite = ?", [fingerprint]):
                return
            self.db.execute("DELETE FROM cases WHERE suite = ?", [fingerprint])
            self.db.execute("DELETE FROM suites WHERE fingerprint = ?", [fingerprint])
