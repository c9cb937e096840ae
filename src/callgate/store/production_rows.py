"""Production samples in the store (scoring/production.py, migration
m021_production_samples): one batch per trace file scored, one sample per trace, and
their counts summed per day or per release in SQL, so a history of a year of traces reads
one row per day."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from callgate.store.base import StoreBase
from callgate.store.schema import now

SAMPLE_COLUMNS = ("batch", "agent", "release", "trace_id", "started_at", "day",
                  "provider_error", "calls", "unknown_calls", "schema_valid", "policy_clean",
                  "problems", "violations", "claims", "claims_judge")
_CLAIMS = ("claims", "claims_judge")
# What each group of history sums (scoring.production_figures.COUNTS)
_SUMS = ("COUNT(*) AS traces, SUM(provider_error) AS provider_errors, "
         "SUM(schema_valid) AS schema_valid, SUM(policy_clean) AS policy_clean, "
         "SUM(CASE WHEN provider_error = 0 THEN calls ELSE 0 END) AS calls, "
         "SUM(CASE WHEN provider_error = 0 THEN unknown_calls ELSE 0 END) AS unknown_calls, "
         # The claim judge's verdicts (m022): judged, unsupported, not judged, judge errors
         "COUNT(claims) AS claims_asked, "
         "COUNT(CASE WHEN claims IN ('supported', 'unsupported') THEN 1 END) AS claims_judged, "
         "COUNT(CASE WHEN claims = 'unsupported' THEN 1 END) AS claims_unsupported, "
         "COUNT(CASE WHEN claims IN ('no_text_answer', 'no_tool_result') THEN 1 END) "
         "AS claims_not_judged, "
         "COUNT(CASE WHEN claims = 'judge_error' THEN 1 END) AS claims_judge_errors")
GROUPS = {"day": "day", "release": "COALESCE(release, '')"}


class ProductionRows(StoreBase):

    def save_production_samples(self, batch: Mapping[str, Any],
                                samples: Sequence[Mapping[str, Any]]) -> tuple[int, int]:
        """Store one batch and its samples (each with its own release) in one transaction;
        a sample whose trace id the agent already has is left as stored, but for a claim
        verdict it did not have. Returns (batch id, samples stored)."""
        with self.atomic():
            conn = self.db.conn
            cursor = conn.execute(
                "INSERT INTO production_batches (agent, release, model, folder, source, "
                "checked_against, traces, stored, created_at, claims_judge) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, 0, ?, ?)",
                [batch["agent"], batch["release"], batch["model"], batch["folder"],
                 batch["source"], batch["checked_against"], batch["traces"], now(),
                 batch.get("claims_judge")])
            batch_id = int(cursor.lastrowid or 0)
            before = conn.total_changes
            conn.executemany(
                f"INSERT OR IGNORE INTO production_samples ({', '.join(SAMPLE_COLUMNS)}) "
                f"VALUES ({', '.join('?' * len(SAMPLE_COLUMNS))})",
                [(batch_id, batch["agent"], *(s[name] for name in SAMPLE_COLUMNS[2:]))
                 for s in samples])
            stored = conn.total_changes - before
            conn.executemany(  # a sample stored before without a claim verdict gets this one
                f"UPDATE production_samples SET {', '.join(f'{c} = ?' for c in _CLAIMS)} "
                "WHERE agent = ? AND trace_id = ? AND claims IS NULL",
                [(*(s[c] for c in _CLAIMS), batch["agent"], s["trace_id"])
                 for s in samples if s.get("claims") is not None])
            conn.execute("UPDATE production_batches SET stored = ? WHERE id = ?",
                         [stored, batch_id])
        return batch_id, stored

    def production_counts(self, agent: str, by: str) -> list[dict[str, Any]]:
        """The agent's samples summed per day or per release (`by`), oldest first: the group
        (`key`), its first and last trace start, and the counts."""
        key = GROUPS[by]
        return list(self.db.query(
            f"SELECT {key} AS key, MIN(started_at) AS first, MAX(started_at) AS last, {_SUMS} "
            "FROM production_samples WHERE agent = ? GROUP BY key ORDER BY first", [agent]))

    def production_violations(self, agent: str, by: str) -> dict[str, dict[str, int]]:
        """Violations of the agent's answered samples per group and policy."""
        key = GROUPS[by]
        found: dict[str, dict[str, int]] = {}
        for row in self.db.query(
                f"SELECT {key} AS grp, json_extract(v.value, '$.policy') AS policy, "
                "COUNT(*) AS n FROM production_samples, json_each(production_samples.violations)"
                " AS v WHERE agent = ? AND provider_error = 0 GROUP BY grp, policy", [agent]):
            found.setdefault(row["grp"], {})[row["policy"]] = row["n"]
        return found

    def production_samples(self, agent: str) -> list[dict[str, Any]]:
        """Every stored sample of the agent, oldest first."""
        return list(self.db.query(
            f"SELECT {', '.join(SAMPLE_COLUMNS)} FROM production_samples WHERE agent = ? "
            "ORDER BY started_at, trace_id", [agent]))

    def production_agents(self) -> list[str]:
        return [row["agent"] for row in self.db.query(
            "SELECT DISTINCT agent FROM production_samples ORDER BY agent")]
