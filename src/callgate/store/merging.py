"""`callgate merge`: copying other stores (e.g. the stores of a run's shards) into this one, as
Store methods (a mixin of Store)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping
from typing import Any, NamedTuple

from callgate.reading import canonical_json
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


class MergedSource(NamedTuple):
    """A source run merged into a run here: `whole` when every one of its attempts was new here
    (its figures then count apart from the others'), and the (open) store it came from."""

    run: StoredRun
    whole: bool
    store: MergeRecords


# The columns of a run every shard of a release must agree on (compared with the release
# here), and what a refusal calls them.
_AGREED = (("suite", "suite fingerprint"), ("source", "answers' source"), ("model", "model"),
           ("model_params", "model parameters"), ("judge_fingerprint", "judge fingerprint"),
           ("callgate_version", "callgate version"), ("shard_count", "number of shards"),
           ("user_simulator", "simulated user"), ("tool_surface", "tool surface"),
           ("fault_plan", "fault plan"))
# What a refusal of a column not agreed on asks for instead of the general advice.
_AGREE_ADVICE = {
    "fault_plan": "every shard of a release must be run with the same --faults plan (a store "
                  "made before runs.fault_plan holds none)",
    "source": "every shard of a release must get its answers the same way: all called live "
              "(`callgate run`) or all scored from recorded answers (`callgate score`), in the "
              "same form (--responses or --traces)",
}
# The columns a merged run is made with, from its first source run (pacing: the first shard's).
_COPIED = ("suite_name", "suite", "agent", "model", "model_params", "release", "source",
           "created_at", "callgate_version", "judge_fingerprint", "shard_count", "shards",
           "tool_surface", "pacing", "user_simulator", "perturbation", "fault_plan")


def _union_shards(here: str | None, there: str | None) -> str | None:
    """The shards a run holds after merging (JSON list); None for an unsharded run."""
    if here is None or there is None:
        return here if there is None else there
    return json.dumps(sorted(set(json.loads(here)) | set(json.loads(there))))


class MergeRecords(StoreBase):
    """Store methods for merging stores (a mixin of Store)."""

    def _person_labels_table(self) -> None:
        raise NotImplementedError

    def _adjudications_table(self) -> None:
        raise NotImplementedError

    def _write_scores(self, run_id: int, scores: dict[str, Any], status: str, *,
                      attempts_marked: bool = False) -> None:
        raise NotImplementedError

    # ----------------------------------------------------------------- merging stores
    # `callgate merge` copies other stores into this one inside one transaction (the caller's
    # atomic()): the tables keyed by content (suites, cases, cached answers and judge outputs,
    # calibration items, certificates) row for row, ignoring rows already here; the finished
    # runs into the run of their release here (made if missing), attempt by attempt.

    def merge_from(self, source: MergeRecords) -> dict[int, list[MergedSource]]:
        """Copy `source` into this store; the runs here that got new attempts, each with the
        source runs merged into it (a release's perturbed runs, `run --perturb`, into its
        perturbed runs of the same perturbation). Raises MergeRefused, naming the store and
        the field, on a conflict."""
        self._refuse_other_labels(source)
        for table in _MERGED_TABLES:
            self._merge_table(source, table)
        self._merge_person_labels(source)
        self._merge_production_samples(source)
        touched: dict[int, list[MergedSource]] = {}
        releases: set[tuple[str, str, str]] = set()
        for run in source.db.query(
                "SELECT * FROM runs WHERE status = 'done' "
                "ORDER BY perturbation IS NOT NULL, created_at, id"):
            target, added, whole = self._merge_run(source, run)
            releases.add((run["suite_name"], run["agent"], run["release"]))
            if added:
                touched.setdefault(target, []).append(MergedSource(StoredRun(run), whole,
                                                                   source))
        for release in sorted(releases):
            self._refuse_partial_perturbations(source, *release)
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
        """People's labels and adjudications (serve's calibration sessions), each copied once:
        a row is the same when set, item, labeller, time and the line it wrote are."""
        for table, text, make in (("person_labels", "note", self._person_labels_table),
                                  ("adjudications", "why", self._adjudications_table)):
            if not source.db[table].exists():
                continue
            make()
            columns = ("set_name", "item_id", "labeller", "tool_choice", "arguments", text,
                       "created_at", "line")
            names = ", ".join(columns)
            for row in source.db.execute(f"SELECT {names} FROM {table} ORDER BY id"):
                key = [row[0], row[1], row[2], row[6], row[7]]
                if self.db.execute(
                        f"SELECT 1 FROM {table} WHERE set_name = ? AND item_id = ? AND "
                        "labeller = ? AND created_at = ? AND line = ?", key).fetchone():
                    continue
                self.db.execute(f"INSERT INTO {table} ({names}) VALUES "
                                f"({', '.join('?' * len(columns))})", list(row))

    def _merge_production_samples(self, source: MergeRecords) -> None:
        """Production samples (`score --traces --production`): each batch copied under a new
        id with the samples of traces this store does not hold yet (an agent's trace is kept
        once, as when scored); a batch that brings none is not copied."""
        batch_columns = [c for c in source._columns("production_batches")
                         if c != "id" and c in set(self._columns("production_batches"))]
        sample_columns = [c for c in source._columns("production_samples")
                          if c != "batch" and c in set(self._columns("production_samples"))]
        conn = self.db.conn
        for batch in source.db.execute(
                f"SELECT id, {', '.join(batch_columns)} FROM production_batches ORDER BY id"
                ).fetchall():
            cursor = conn.execute(
                f"INSERT INTO production_batches ({', '.join(batch_columns)}) "
                f"VALUES ({', '.join('?' * len(batch_columns))})", list(batch[1:]))
            batch_id = cursor.lastrowid
            before = conn.total_changes
            conn.executemany(
                f"INSERT OR IGNORE INTO production_samples (batch, {', '.join(sample_columns)}) "
                f"VALUES (?, {', '.join('?' * len(sample_columns))})",
                [(batch_id, *row) for row in source.db.execute(
                    f"SELECT {', '.join(sample_columns)} FROM production_samples "
                    "WHERE batch = ? ORDER BY rowid", [batch[0]])])
            stored = conn.total_changes - before
            if stored:
                conn.execute("UPDATE production_batches SET stored = ? WHERE id = ?",
                             [stored, batch_id])
            else:
                conn.execute("DELETE FROM production_batches WHERE id = ?", [batch_id])

    def _merge_target(self, run: dict[str, Any]) -> dict[str, Any] | None:
        """The run here a source run merges into: its release's (clean) run, or the release's
        run of the same perturbation."""
        if run["perturbation"] is None:
            return self.find_run(run["suite_name"], run["agent"], run["release"])
        found = self.db.execute(
            "SELECT id FROM runs WHERE suite_name = ? AND agent = ? AND release = ? "
            "AND status = 'done' AND perturbation = ? ORDER BY id DESC LIMIT 1",
            [run["suite_name"], run["agent"], run["release"], run["perturbation"]]).fetchone()
        return None if found is None else self.run(int(found[0]))

    def _merge_run(self, source: MergeRecords, run: dict[str, Any]) -> tuple[int, bool, bool]:
        """Merge one finished source run into its release here: (the run here, whether it got
        attempts it lacked, whether every attempt of the source run was new here)."""
        where = (f"release {run['release']!r} of agent {run['agent']!r} on suite "
                 f"{run['suite_name']!r}")
        if run["perturbation"] is not None:
            where += f" perturbed ({_perturbation(run['perturbation'])})"
        target = self._merge_target(run)
        if target is None:
            cursor = self.db.execute(
                f"INSERT INTO runs ({', '.join(_COPIED)}, status) "
                f"VALUES ({', '.join('?' * len(_COPIED))}, 'done')",
                [run.get(c) for c in _COPIED])
            assert cursor.lastrowid is not None  # an INSERT just ran
            target = self.run(int(cursor.lastrowid))
            assert target is not None
            created = True
        else:
            created = False
            for column, what in _AGREED:
                if target.get(column) != run.get(column):
                    there, here = (_agreed_shown(column, value)
                                   for value in (run.get(column), target.get(column)))
                    raise MergeRefused(
                        f"{source.path}: {where}: runs.{column} ({what}) {there} differs "
                        f"from {here} in {self.path}; " + _AGREE_ADVICE.get(
                            column, "shards of one release must be run on the same suite, "
                            "model and parameters, judge, simulated user and callgate, with "
                            "the same N"))
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
        attempts = source.db.execute("SELECT COUNT(*) FROM verdicts WHERE run = ?",
                                     [run["id"]]).fetchone()[0]
        return target_id, bool(added) or created, added == attempts

    def _refuse_partial_perturbations(self, source: MergeRecords, suite_name: str, agent: str,
                                      release: str) -> None:
        """Every perturbed run of a release here holds the shards its clean run holds: a
        shard run without a perturbation the others ran (or with one they did not) would
        leave the release's robustness measured on some of its cases only."""
        clean = self.find_run(suite_name, agent, release)
        if clean is None:
            return
        holds = _shard_set(clean["shards"])
        for marker, shards in self.db.execute(
                "SELECT perturbation, shards FROM runs WHERE suite_name = ? AND agent = ? "
                "AND release = ? AND status = 'done' AND perturbation IS NOT NULL "
                "ORDER BY id", [suite_name, agent, release]).fetchall():
            if _shard_set(shards) != holds:
                raise MergeRefused(
                    f"{source.path}: release {release!r} of agent {agent!r} on suite "
                    f"{suite_name!r}: runs.perturbation {_perturbation(marker)} is run in "
                    f"shard(s) {_listed(shards)} of the release's {_listed(clean['shards'])}; "
                    "every shard of a release must be run with the same --perturb")

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

    def set_run_fault_plan(self, run_id: int, plan: Mapping[str, Any]) -> None:
        """Keep the --faults plan a run is made with (its JSON document, as validated), so
        merge can read its shards' recovery again: runs.fault_plan holds the canonical JSON of
        {"fingerprint": SHA-256 of the plan's canonical JSON, "plan": the plan}."""
        text = canonical_json(dict(plan))
        record = {"fingerprint": hashlib.sha256(text.encode()).hexdigest(), "plan": dict(plan)}
        with self.atomic():
            self.db.execute("UPDATE runs SET fault_plan = ? WHERE id = ?",
                            [canonical_json(record), run_id])

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

    def scored_attempt_lines(self, run_id: int) -> Iterator[tuple[str, int, str, str]]:
        """A run's scored attempts as (case id, repeat, the case's body, the response line),
        both JSON as stored, in case and repeat order: what fault recovery is read from."""
        return iter(self.db.execute(
            "SELECT v.case_id, v.repeat, c.body, r.body FROM verdicts AS v "
            "JOIN runs ON runs.id = v.run "
            "JOIN responses AS r ON r.run = v.run AND r.case_id = v.case_id "
            "AND r.repeat = v.repeat "
            "JOIN cases AS c ON c.suite = runs.suite AND c.case_id = v.case_id "
            "WHERE v.run = ? AND v.status = 'scored' ORDER BY v.case_id, v.repeat",
            [run_id]))

    def attempt_keys(self, run_id: int) -> set[tuple[str, int]]:
        """The (case id, repeat) of every attempt of a run."""
        return {(case_id, repeat) for case_id, repeat in self.db.execute(
            "SELECT case_id, repeat FROM verdicts WHERE run = ?", [run_id])}

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


def _shard_set(shards: str | None) -> frozenset[int] | None:
    return None if shards is None else frozenset(json.loads(shards))


def _listed(shards: str | None) -> str:
    return "none (unsharded)" if shards is None else ", ".join(
        map(str, sorted(json.loads(shards))))


def _perturbation(marker: str) -> str:
    """A perturbation (runs.perturbation, JSON) as a refusal names it: its kind and print."""
    try:
        found = json.loads(marker)
        return f"{found['kind']} {str(found['fingerprint'])[:12]}"
    except (ValueError, KeyError, TypeError):
        return _shown(marker)


def _agreed_shown(column: str, value: Any) -> str:
    """A value of a column shards agree on, as a refusal names it (a fault plan: its print)."""
    if value is None:
        return "none"
    if column == "fault_plan":
        try:
            return f"plan {str(json.loads(value)['fingerprint'])[:12]}"
        except (ValueError, KeyError, TypeError):
            pass
    return _shown(value)


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _refused(gate: str | None) -> bool:
    """Whether a stored gate decision (runs.gate, JSON) says the release was not released."""
    return gate is not None and not json.loads(gate).get("released", True)
