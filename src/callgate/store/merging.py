"""`callgate merge`: copying other stores (e.g. the stores of a run's shards) into this one, as
Store methods (a mixin of Store)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from callgate.store.base import StoreBase
from callgate.store.columns import RESPONSE_COLUMNS, VERDICT_COLUMNS
from callgate.store.opening import MergeRefused
from callgate.store.rows import StoredRun

# What `merge` copies: tables keyed by their content, and the rows under a run.
_MERGED_TABLES = ("suites", "cases", "live_responses", "judge_cache", "calibration_items",
                  "certificates")
_MERGED_RUN_TABLES = {
    "responses": RESPONSE_COLUMNS[1:],
    "judgements": ("case_id", "repeat", "fingerprint", "tool_choice", "arguments", "reason"),
    "run_requests": ("case_id", "repeat", "cache_key", "cached"),
    "run_turns": ("case_id", "repeat", "turn", "cache_key", "cached"),
}
_MERGE_CHUNK = 5000


def _union_shards(here: str | None, there: str | None) -> str | None:
    """The shards a run holds after merging (JSON list); None for an unsharded run."""
    if here is None or there is None:
        return here if there is None else there
    return json.dumps(sorted(set(json.loads(here)) | set(json.loads(there))))


class MergeRecords(StoreBase):
    """Store methods for merging stores (a mixin of Store)."""

    def _person_labels_table(self) -> None:
        raise NotImplementedError

    def _write_scores(self, run_id: int, scores: dict[str, Any], status: str) -> None:
        raise NotImplementedError

    # ----------------------------------------------------------------- merging stores
    # `callgate merge` copies other stores into this one inside one transaction (the caller's
    # atomic()): the tables keyed by content (suites, cases, cached answers and judge outputs,
    # calibration items, certificates) row for row, ignoring rows already here; the finished
    # runs into the run of their release here (made if missing), attempt by attempt.

    def merge_from(self, source: MergeRecords) -> dict[int, list[StoredRun]]:
        """Copy `source` into this store; the runs here that got new attempts, each with the
        source runs merged into it. Raises MergeRefused, naming the case, on a conflict."""
        self._refuse_other_labels(source)
        for table in _MERGED_TABLES:
            self._merge_table(source, table)
        self._merge_person_labels(source)
        touched: dict[int, list[StoredRun]] = {}
        for run in source.db.query(
                "SELECT * FROM runs WHERE status = 'done' AND perturbation IS NULL "
                "ORDER BY created_at, id"):
            target, added = self._merge_run(source, run)
            if added:
                touched.setdefault(target, []).append(StoredRun(run))
        return touched

    def _columns(self, table: str) -> list[str]:
        return [row[1] for row in self.db.execute(f"PRAGMA table_info({table})")]

    def _merge_table(self, source: MergeRecords, table: str) -> None:
        columns = [c for c in source._columns(table) if c in set(self._columns(table))]
        names = ", ".join(columns)
        rows = source.db.execute(f"SELECT {names} FROM {table}")
        insert = (f"INSERT OR IGNORE INTO {table} ({names}) "
                  f"VALUES ({', '.join('?' * len(columns))})")
        while chunk := rows.fetchmany(_MERGE_CHUNK):
            self.db.conn.executemany(insert, chunk)

    def _refuse_other_labels(self, source: MergeRecords) -> None:
        """A calibration item stored in both with another label, split or body: refused, not
        silently kept as it is here (a certificate is bound to its labels)."""
        columns = "split, label_tool_choice, label_arguments, body"
        for row in source.db.execute(f"SELECT set_name, item_id, {columns} "
                                     "FROM calibration_items"):
            here = self.db.execute(
                f"SELECT {columns} FROM calibration_items WHERE set_name = ? AND item_id = ?",
                [row[0], row[1]]).fetchone()
            if here is not None and tuple(here) != tuple(row[2:]):
                raise MergeRefused(
                    f"{source.path}: calibration set {row[0]}: item {row[1]} is labelled "
                    f"{row[3]}/{row[4]} ({row[2]}) there and {here[1]}/{here[2]} ({here[0]}) "
                    f"in {self.path}; settle the label in the set file and load it again")

    def _merge_person_labels(self, source: MergeRecords) -> None:
        """People's labels (serve's calibration sessions), each copied once: a row is the same
        label when set, item, labeller, time and the line it wrote are."""
        if not source.db["person_labels"].exists():
            return
        self._person_labels_table()
        columns = ("set_name", "item_id", "labeller", "tool_choice", "arguments", "note",
                   "created_at", "line")
        names = ", ".join(columns)
        for row in source.db.execute(f"SELECT {names} FROM person_labels ORDER BY id"):
            key = [row[0], row[1], row[2], row[6], row[7]]
            if self.db.execute(
                    "SELECT 1 FROM person_labels WHERE set_name = ? AND item_id = ? AND "
                    "labeller = ? AND created_at = ? AND line = ?", key).fetchone():
                continue
            self.db.execute(f"INSERT INTO person_labels ({names}) VALUES "
                            f"({', '.join('?' * len(columns))})", list(row))

    def _merge_run(self, source: MergeRecords, run: dict[str, Any]) -> tuple[int, bool]:
        """Merge one finished source run into its release here: (the run here, whether it got
        attempts it lacked)."""
        where = (f"release {run['release']!r} of agent {run['agent']!r} on suite "
                 f"{run['suite_name']!r}")
        target = self.find_run(run["suite_name"], run["agent"], run["release"])
        if target is None:
            cursor = self.db.execute(
                "INSERT INTO runs (suite_name, suite, agent, model, model_params, release, "
                "source, created_at, callgate_version, judge_fingerprint, status, shard_count, "
                "shards, tool_surface) VALUES (?,?,?,?,?,?,?,?,?,?,'done',?,?,?)",
                [run.get(c) for c in ("suite_name", "suite", "agent", "model", "model_params",
                                      "release", "source", "created_at", "callgate_version",
                                      "judge_fingerprint", "shard_count", "shards",
                                      "tool_surface")])
            assert cursor.lastrowid is not None  # an INSERT just ran
            target = self.run(int(cursor.lastrowid))
            assert target is not None
            created = True
        else:
            created = False
            for column, what in (("suite", "suite fingerprint"),
                                 ("model", "model"),
                                 ("judge_fingerprint", "judge fingerprint"),
                                 ("callgate_version", "callgate version"),
                                 ("shard_count", "number of shards")):
                if target[column] != run[column]:
                    there, here = (("none (unsharded)" if value is None else repr(value))
                                   for value in (run[column], target[column]))
                    raise MergeRefused(
                        f"{source.path}: {where}: {what} {there} differs from "
                        f"{here} in {self.path}; shards of one release must be "
                        "run on the same suite and model, judge and callgate with the same N")
        target_id = int(target["id"])
        added = self._merge_verdicts(source, int(run["id"]), target_id, where)
        for table, columns in _MERGED_RUN_TABLES.items():
            names = ", ".join(columns)
            rows = source.db.execute(
                f"SELECT ?, {names} FROM {table} WHERE run = ?", [target_id, run["id"]])
            insert = (f"INSERT OR IGNORE INTO {table} (run, {names}) "
                      f"VALUES (?, {', '.join('?' * len(columns))})")
            while chunk := rows.fetchmany(_MERGE_CHUNK):
                self.db.conn.executemany(insert, chunk)
        shards = _union_shards(target["shards"], run["shards"])
        if shards != target["shards"]:
            self.db.execute("UPDATE runs SET shards = ? WHERE id = ?", [shards, target_id])
        self._merge_gate(target_id, target.get("gate"), run.get("gate"),
                         created=created, added=bool(added))
        self._merge_audit(source, run, target_id, grown=bool(added) and not created,
                          where=where)
        return target_id, bool(added) or created

    def _merge_gate(self, target_id: int, here: str | None, there: str | None, *,
                    created: bool, added: bool) -> None:
        """The gate decision the merged release keeps. A refusal (failed or inconclusive) is
        never lost: merging must not turn a release that was not shipped into a baseline. A
        release decision is dropped when attempts were added, since its figures change."""
        if created or (_refused(there) and not _refused(here)):
            self.db.execute("UPDATE runs SET gate = ? WHERE id = ?", [there, target_id])
        elif added and not _refused(here):
            self.db.execute("UPDATE runs SET gate = NULL WHERE id = ?", [target_id])

    def _merge_audit(self, source: MergeRecords, run: dict[str, Any], target_id: int, *,
                     grown: bool, where: str) -> None:
        """An audit is a uniform sample of its run's judged attempts: copied with its labels and
        skips when the merged run has exactly those attempts (a whole run copied into a store
        that holds no other audit of it); refused when merging would change the population it
        was drawn from (a shard's audit, or an audited release that gains attempts)."""
        there = source.db.execute("SELECT seed, population, created_at FROM audits "
                                  "WHERE run = ?", [run["id"]]).fetchone()
        here = self.db.execute("SELECT seed, population, created_at FROM audits WHERE run = ?",
                               [target_id]).fetchone()
        if here is not None and grown:
            raise MergeRefused(
                f"{source.path}: {where}: the audit in {self.path} was drawn on the judged "
                "attempts the release had before this merge, and the merge adds attempts; merge "
                "every shard first, then audit the merged release (callgate judge audit RUN)")
        if there is None:
            return
        if run["shard_count"] is not None or grown:
            raise MergeRefused(
                f"{source.path}: {where}: it has an audit drawn on that store's judged "
                "attempts only, not a uniform sample of the merged release; merge the shards "
                "first, then audit the merged release (callgate judge audit RUN)")
        columns = ("position", "case_id", "repeat", "label_tool_choice", "label_arguments",
                   "labeller", "labelled_at", "skip_reason")
        rows = [tuple(r) for r in source.db.execute(
            f"SELECT {', '.join(columns)} FROM audit_items WHERE run = ? ORDER BY position",
            [run["id"]])]
        if here is not None:
            kept = [tuple(r) for r in self.db.execute(
                f"SELECT {', '.join(columns)} FROM audit_items WHERE run = ? ORDER BY position",
                [target_id])]
            if tuple(here) != tuple(there) or kept != rows:
                raise MergeRefused(
                    f"{source.path}: {where}: its audit differs from the audit of the release "
                    f"in {self.path} (seed, sample or labels); keep one of them")
            return
        self.db.execute("INSERT INTO audits (run, seed, population, created_at) "
                        "VALUES (?, ?, ?, ?)", [target_id, *there])
        self.db.conn.executemany(
            f"INSERT INTO audit_items (run, {', '.join(columns)}) "
            f"VALUES (?, {', '.join('?' * len(columns))})", [(target_id, *r) for r in rows])

    def _merge_verdicts(self, source: MergeRecords, run_id: int, target_id: int, where: str) -> int:
        """Stage the source run's verdicts, refuse one that differs from the verdict of the same
        attempt here, and insert those not here; how many were inserted."""
        conn = self.db.conn
        conn.execute(f"CREATE TEMP TABLE IF NOT EXISTS merge_verdicts "
                     f"({', '.join(VERDICT_COLUMNS[1:])}, PRIMARY KEY (case_id, repeat))")
        conn.execute("DELETE FROM temp.merge_verdicts")
        names = ", ".join(VERDICT_COLUMNS[1:])
        rows = source.db.execute(f"SELECT {names} FROM verdicts WHERE run = ?", [run_id])
        insert = (f"INSERT INTO temp.merge_verdicts ({names}) "
                  f"VALUES ({', '.join('?' * (len(VERDICT_COLUMNS) - 1))})")
        while chunk := rows.fetchmany(_MERGE_CHUNK):
            conn.executemany(insert, chunk)
        differs = " OR ".join(f"here.{c} IS NOT there.{c}" for c in VERDICT_COLUMNS[3:])
        clash = conn.execute(
            "SELECT there.case_id, there.repeat, here.tool, here.arguments, here.status, "
            "there.tool, there.arguments, there.status FROM temp.merge_verdicts AS there "
            "JOIN verdicts AS here ON here.run = ? AND here.case_id = there.case_id "
            f"AND here.repeat = there.repeat WHERE {differs} "
            "ORDER BY there.case_id, there.repeat LIMIT 1", [target_id]).fetchone()
        if clash is not None:
            case_id, repeat, *verdicts = clash
            here = "/".join(str(v) for v in verdicts[:3])
            there = "/".join(str(v) for v in verdicts[3:])
            raise MergeRefused(
                f"{source.path}: {where}: case {case_id!r} repeat {repeat} was scored "
                f"differently ({there} there, {here} in {self.path}); nothing was merged")
        cursor = conn.execute(
            f"INSERT INTO verdicts (run, {names}) SELECT ?, {names} "
            "FROM temp.merge_verdicts AS there WHERE NOT EXISTS (SELECT 1 FROM verdicts AS here "
            "WHERE here.run = ? AND here.case_id = there.case_id AND here.repeat = there.repeat)",
            [target_id, target_id])
        conn.execute("DELETE FROM temp.merge_verdicts")
        return cursor.rowcount

    def merged_attempts(self, run_id: int) -> Iterator[dict[str, Any]]:
        """A run's verdicts with what scoring reads of their responses and judgements, in case
        and repeat order: `judged_tool_choice` is set when the judge decided the attempt,
        `error_kind` when the provider answered with an error."""
        return self.db.query(
            "SELECT verdicts.*, responses.cost, responses.prompt_tokens, "
            "responses.completion_tokens, responses.latency_ms, responses.provider, "
            "responses.error_kind, "
            "judgements.tool_choice AS judged_tool_choice, "
            "judgements.arguments AS judged_arguments FROM verdicts "
            "LEFT JOIN responses USING (run, case_id, repeat) "
            "LEFT JOIN judgements USING (run, case_id, repeat) "
            "WHERE verdicts.run = ? ORDER BY verdicts.case_id, verdicts.repeat", [run_id])

    def case_tags_of(self, suite_fingerprint: str) -> dict[str, list[str]]:
        return {case_id: json.loads(tags) for case_id, tags in self.db.execute(
            "SELECT case_id, tags FROM cases WHERE suite = ?", [suite_fingerprint])}

    def no_call_cases_of(self, suite_fingerprint: str) -> set[str]:
        """The ids of the suite's cases that expect no call."""
        return {case_id for (case_id,) in self.db.execute(
            "SELECT case_id FROM cases WHERE suite = ? AND expect_type = 'no_call'",
            [suite_fingerprint])}

    def write_merged_scores(self, run_id: int, scores: dict[str, Any],
                            not_a_result: str | None = None) -> None:
        """The scores of a merged run, computed again from its verdicts, and its "not a result"
        gate record (JSON) when it is mostly excluded attempts."""
        with self.atomic():
            self._write_scores(run_id, scores, "done")
            if not_a_result is not None:
                self.db.execute("UPDATE runs SET gate = ? WHERE id = ?", [not_a_result, run_id])


def _refused(gate: str | None) -> bool:
    """Whether a stored gate decision (runs.gate, JSON) says the release was not released."""
    return gate is not None and not json.loads(gate).get("released", True)
