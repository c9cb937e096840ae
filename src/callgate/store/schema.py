"""The store's schema and its named migrations (as `llm` keeps its migrations list): every
table, the marks that say a file is a callgate store, and the version each migration brings."""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime

from callgate.store.gate_rows import recount_argument_failures, write_slice_tallies
from callgate.store.web_rows import mark_expected, write_attempt_marks

# A release may have several rows while it is re-run: the earlier finished run stays until the
# new one finishes, and the reads see only the newest finished row of a (suite, agent, release).
# `agent` (added by m007) is the stable name a release is filed under; `model` the model id it
# ran with and `model_params` (JSON) the parameters it was called with.
RUNS_TABLE = """
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY,
    suite_name TEXT NOT NULL,
    suite TEXT NOT NULL REFERENCES suites(fingerprint),
    model TEXT NOT NULL,
    release TEXT NOT NULL,
    source TEXT NOT NULL,
    created_at TEXT NOT NULL,
    callgate_version TEXT NOT NULL,
    judge_fingerprint TEXT,
    status TEXT NOT NULL,
    scores TEXT
);
"""
# Stores made before: one row per release, enforced; rebuilt without the constraint on opening.
_OLD_UNIQUE = re.compile(r"UNIQUE\s*\(\s*suite_name\s*,\s*model\s*,\s*release\s*\)")
_NEWEST_DONE = (
    "status = 'done' AND perturbation IS NULL AND id = (SELECT MAX(newer.id) FROM runs AS newer "
    "WHERE newer.suite_name = runs.suite_name AND newer.agent = runs.agent "
    "AND newer.release = runs.release AND newer.status = 'done' "
    "AND newer.perturbation IS NULL)")

SCHEMA = RUNS_TABLE + """
CREATE TABLE IF NOT EXISTS suites (
    fingerprint TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    path TEXT,
    tools TEXT NOT NULL,
    loaded_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS cases (
    suite TEXT NOT NULL REFERENCES suites(fingerprint),
    case_id TEXT NOT NULL,
    expect_type TEXT NOT NULL,
    tags TEXT NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (suite, case_id)
);
CREATE TABLE IF NOT EXISTS responses (
    run INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    case_id TEXT NOT NULL,
    repeat INTEGER NOT NULL,
    finish_reason TEXT,
    provider TEXT,
    cost REAL,
    latency_ms REAL,
    prompt_tokens INTEGER,
    completion_tokens INTEGER,
    error_kind TEXT,
    body TEXT NOT NULL,
    PRIMARY KEY (run, case_id, repeat)
);
CREATE TABLE IF NOT EXISTS verdicts (
    run INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    case_id TEXT NOT NULL,
    repeat INTEGER NOT NULL,
    status TEXT NOT NULL,
    tool TEXT,
    tool_reason TEXT,
    arguments TEXT,
    schema_kind TEXT,
    arguments_reason TEXT,
    calls INTEGER NOT NULL,
    right_tool INTEGER NOT NULL,
    right_arguments INTEGER NOT NULL,
    PRIMARY KEY (run, case_id, repeat)
);
CREATE TABLE IF NOT EXISTS scores (
    run INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    scope TEXT NOT NULL,
    scored INTEGER NOT NULL,
    right_tool REAL,
    right_arguments REAL,
    calls_per_task REAL,
    PRIMARY KEY (run, scope)
);
CREATE INDEX IF NOT EXISTS runs_by_model ON runs (model, suite_name, created_at);
CREATE INDEX IF NOT EXISTS runs_by_release ON runs (suite_name, model, release);
CREATE TABLE IF NOT EXISTS live_responses (
    key TEXT PRIMARY KEY,
    model TEXT NOT NULL,
    case_id TEXT NOT NULL,
    repeat INTEGER NOT NULL,
    request TEXT NOT NULL,
    line TEXT NOT NULL,
    error_kind TEXT,
    tries INTEGER NOT NULL,
    created_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS run_requests (
    run INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    case_id TEXT NOT NULL,
    repeat INTEGER NOT NULL,
    cache_key TEXT NOT NULL,
    cached INTEGER NOT NULL,
    PRIMARY KEY (run, case_id, repeat)
);
CREATE TABLE IF NOT EXISTS run_turns (
    run INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    case_id TEXT NOT NULL,
    repeat INTEGER NOT NULL,
    turn INTEGER NOT NULL,
    cache_key TEXT NOT NULL,
    cached INTEGER NOT NULL,
    PRIMARY KEY (run, case_id, repeat, turn)
);
CREATE TABLE IF NOT EXISTS judge_cache (
    key TEXT PRIMARY KEY,
    fingerprint TEXT NOT NULL,
    output TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS judgements (
    run INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    case_id TEXT NOT NULL,
    repeat INTEGER NOT NULL,
    fingerprint TEXT NOT NULL,
    tool_choice TEXT NOT NULL,
    arguments TEXT NOT NULL,
    reason TEXT NOT NULL,
    PRIMARY KEY (run, case_id, repeat)
);
CREATE TABLE IF NOT EXISTS calibration_items (
    set_name TEXT NOT NULL,
    item_id TEXT NOT NULL,
    split TEXT NOT NULL,
    label_tool_choice TEXT NOT NULL,
    label_arguments TEXT NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (set_name, item_id)
);
CREATE TABLE IF NOT EXISTS certificates (
    fingerprint TEXT NOT NULL,
    judge TEXT NOT NULL,
    created_at TEXT NOT NULL,
    certified INTEGER NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (fingerprint, created_at)
);
"""

# ----------------------------------------------------------------- marks and migrations
# A callgate store carries APPLICATION_ID (PRAGMA application_id) and its schema version
# (PRAGMA user_version = how many of MIGRATIONS it has had); the names of the migrations applied
# are rows of MIGRATIONS_TABLE_NAME. To change the schema, append a migration function below;
# never edit or rename one that has shipped. Tables added to SCHEMA are also created on opening.

APPLICATION_ID = 0x43474154  # "CGAT"
MIGRATIONS_TABLE_NAME = "_callgate_migrations"
MIGRATIONS_TABLE = (f"CREATE TABLE IF NOT EXISTS {MIGRATIONS_TABLE_NAME} "
                    "(name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)")
# The tables every callgate store has had since the first release: an unmarked file holding
# them is a store made before the marks (e.g. by commit 673342a) and is upgraded.
CORE_TABLES = frozenset({"suites", "cases", "runs", "responses", "verdicts", "scores"})
BUSY_TIMEOUT_ENV = "CALLGATE_BUSY_TIMEOUT"
DEFAULT_BUSY_TIMEOUT = 60.0
SQLITE_HEADER = b"SQLite format 3\x00"

Migration = Callable[[sqlite3.Connection], None]
MIGRATIONS: list[Migration] = []


def migration(function: Migration) -> Migration:
    MIGRATIONS.append(function)
    return function


def _statements(script: str) -> list[str]:
    return [part.strip() for part in script.split(";") if part.strip()]


@migration
def m001_tables(conn: sqlite3.Connection) -> None:
    """The tables and indexes of SCHEMA (a store made before the marks keeps its own)."""
    for statement in _statements(SCHEMA):
        conn.execute(statement)


@migration
def m002_runs_without_unique_release(conn: sqlite3.Connection) -> None:
    """Rebuild a `runs` table made with UNIQUE (suite_name, model, release), keeping every row
    and id, so a release can hold a finished run and the run replacing it."""
    row = conn.execute(
        "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'runs'").fetchone()
    if row is None or not _OLD_UNIQUE.search(row[0]):
        return
    conn.execute(RUNS_TABLE.replace("IF NOT EXISTS runs", "runs_rebuilt"))
    columns = ("id, suite_name, suite, model, release, source, created_at, callgate_version, "
               "judge_fingerprint, status, scores")
    conn.execute(f"INSERT INTO runs_rebuilt ({columns}) SELECT {columns} FROM runs")
    conn.execute("DROP TABLE runs")
    conn.execute("ALTER TABLE runs_rebuilt RENAME TO runs")
    for statement in _statements(SCHEMA):
        if statement.startswith("CREATE INDEX") and " ON runs " in statement:
            conn.execute(statement)


@migration
def m003_run_owners(conn: sqlite3.Connection) -> None:
    """Which process writes a running run, so a finished run of the same release removes only
    the runs no live process is still writing."""
    conn.execute(
        "CREATE TABLE IF NOT EXISTS run_owners ("
        "run INTEGER PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE, "
        "host TEXT NOT NULL, pid INTEGER NOT NULL)")


@migration
def m004_runs_gate_column(conn: sqlite3.Connection) -> None:
    """runs.gate: the gate decision on the run (JSON, callgate.scoring.result.GateRecord), NULL
    until one is taken. (An unmarked store made by a callgate that added it on opening has it.)"""
    columns = {row[1] for row in conn.execute("PRAGMA table_info(runs)")}
    if "gate" not in columns:
        conn.execute("ALTER TABLE runs ADD COLUMN gate TEXT")


@migration
def m005_audits(conn: sqlite3.Connection) -> None:
    """Per-release audits (issue 16): a seeded uniform sample of a run's judged attempts, and
    the labels a person gave them, with who and when."""
    conn.execute(
        "CREATE TABLE IF NOT EXISTS audits ("
        "run INTEGER PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE, "
        "seed INTEGER NOT NULL, population INTEGER NOT NULL, created_at TEXT NOT NULL)")
    conn.execute(
        "CREATE TABLE IF NOT EXISTS audit_items ("
        "run INTEGER NOT NULL REFERENCES audits(run) ON DELETE CASCADE, "
        "position INTEGER NOT NULL, case_id TEXT NOT NULL, repeat INTEGER NOT NULL, "
        "label_tool_choice TEXT, label_arguments TEXT, labeller TEXT, labelled_at TEXT, "
        "PRIMARY KEY (run, case_id, repeat))")


@migration
def m006_runs_shard_columns(conn: sqlite3.Connection) -> None:
    """runs.shard_count and runs.shards: a run made with --shard K/N holds shard_count N and
    shards "[K]"; a release merged from shard stores holds the JSON list of the shards it has.
    Both NULL for an unsharded run."""
    columns = {row[1] for row in conn.execute("PRAGMA table_info(runs)")}
    if "shard_count" not in columns:
        conn.execute("ALTER TABLE runs ADD COLUMN shard_count INTEGER")
    if "shards" not in columns:
        conn.execute("ALTER TABLE runs ADD COLUMN shards TEXT")


@migration
def m007_audit_item_skips(conn: sqlite3.Connection) -> None:
    """audit_items.skip_reason: an audit item a person skipped, with why (labeller and
    labelled_at say who and when); NULL for an item labelled or still waiting. A skip inside
    the labelled prefix of the sample makes the audit incomplete (judging.audit)."""
    columns = {row[1] for row in conn.execute("PRAGMA table_info(audit_items)")}
    if "skip_reason" not in columns:
        conn.execute("ALTER TABLE audit_items ADD COLUMN skip_reason TEXT")


@migration
def m008_runs_agent_columns(conn: sqlite3.Connection) -> None:
    """runs.agent: the stable name a release belongs to (its lineage: a candidate's name, or
    --agent), and runs.model_params: the parameters the model was called with (JSON, NULL
    when unknown, e.g. for recorded answers). A run stored before holds agent = its model,
    the name it was filed under then, so its releases keep their order and baselines."""
    columns = {row[1] for row in conn.execute("PRAGMA table_info(runs)")}
    if "agent" not in columns:
        conn.execute("ALTER TABLE runs ADD COLUMN agent TEXT")
    if "model_params" not in columns:
        conn.execute("ALTER TABLE runs ADD COLUMN model_params TEXT")
    conn.execute("UPDATE runs SET agent = model WHERE agent IS NULL")
    conn.execute("CREATE INDEX IF NOT EXISTS runs_by_agent "
                 "ON runs (agent, suite_name, created_at)")
    conn.execute("CREATE INDEX IF NOT EXISTS runs_by_agent_release "
                 "ON runs (suite_name, agent, release)")


@migration
def m009_run_pacing(conn: sqlite3.Connection) -> None:
    """runs.pacing: what limited a live run's calls (JSON, models.pacing.Pacer.figures: the
    mode, the in-flight limit at the end and its range, 429s seen, seconds backing off); NULL
    for runs that called nothing."""
    columns = {row[1] for row in conn.execute("PRAGMA table_info(runs)")}
    if "pacing" not in columns:
        conn.execute("ALTER TABLE runs ADD COLUMN pacing TEXT")


@migration
def m010_case_tallies(conn: sqlite3.Connection) -> None:
    """case_tallies: each finished run's cases tallied over their repeats (scored attempts,
    right tool, right arguments, excluded attempts, the first failure's reason), written with
    the run's scores, so the gate reads one row a case instead of every verdict. Runs finished
    before it have none (the gate tallies their verdicts)."""
    conn.execute(
        "CREATE TABLE IF NOT EXISTS case_tallies ("
        "run INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE, "
        "case_id TEXT NOT NULL, trials INTEGER NOT NULL, right_tool INTEGER NOT NULL, "
        "right_arguments INTEGER NOT NULL, excluded INTEGER NOT NULL, reason TEXT NOT NULL, "
        "PRIMARY KEY (run, case_id)) WITHOUT ROWID")


@migration
def m011_attempt_marks(conn: sqlite3.Connection) -> None:
    """What serve's tag and tool filters read instead of every case and response line
    (store/web_rows.py): case_marks (a suite's cases by tag and by catalogue tool named),
    attempt_tools (a finished run's attempts by catalogue tool named in the response line)
    and attempt_tool_runs (the runs marked, and their tools), written with a run's scores.
    The finished runs of an older store are marked here."""
    conn.execute(
        "CREATE TABLE IF NOT EXISTS case_marks (suite TEXT NOT NULL, mark TEXT NOT NULL, "
        "case_id TEXT NOT NULL, PRIMARY KEY (suite, mark, case_id)) WITHOUT ROWID")
    conn.execute(
        "CREATE TABLE IF NOT EXISTS attempt_tools ("
        "run INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE, tool TEXT NOT NULL, "
        "case_id TEXT NOT NULL, repeat INTEGER NOT NULL, "
        "PRIMARY KEY (run, tool, case_id, repeat)) WITHOUT ROWID")
    conn.execute(
        "CREATE TABLE IF NOT EXISTS attempt_tool_runs ("
        "run INTEGER PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE, tools TEXT NOT NULL)")
    for (run_id,) in conn.execute(
            "SELECT id FROM runs WHERE status = 'done' AND scores IS NOT NULL").fetchall():
        write_attempt_marks(conn, run_id)


@migration
def m012_runs_tool_surface(conn: sqlite3.Connection) -> None:
    """runs.tool_surface: the tool surface the run was made with (JSON,
    callgate.suites.surface.ToolSurface: each tool's description and parameters, the system
    prompt, an MCP snapshot's server, each case's expectation digest), so the gate can name
    what a release changed. NULL for runs made before (the gate says it is not recorded)."""
    columns = {row[1] for row in conn.execute("PRAGMA table_info(runs)")}
    if "tool_surface" not in columns:
        conn.execute("ALTER TABLE runs ADD COLUMN tool_surface TEXT")


@migration
def m013_suites_probe(conn: sqlite3.Connection) -> None:
    """suites.probe: the cases of the suite that cannot tell a good agent from a bad one, as
    found by the probe (checks/probe.py) when the suite was first scored (JSON: case id ->
    reason); NULL when it was not probed. The gate warns with it."""
    columns = {row[1] for row in conn.execute("PRAGMA table_info(suites)")}
    if "probe" not in columns:
        conn.execute("ALTER TABLE suites ADD COLUMN probe TEXT")


@migration
def m014_first_tools(conn: sqlite3.Connection) -> None:
    """verdicts.first_tool: the catalogue name of a scored attempt's first call ('' for none;
    NULL in runs scored before it), and `expect:` marks of every marked suite's cases (the
    tool each case expects first, store/web_rows.py): what the gate's slices per expected tool
    and its confusion table are counted from."""
    columns = {row[1] for row in conn.execute("PRAGMA table_info(verdicts)")}
    if "first_tool" not in columns:
        conn.execute("ALTER TABLE verdicts ADD COLUMN first_tool TEXT")
    for (suite,) in conn.execute(
            "SELECT suite FROM case_marks WHERE mark = '' AND case_id = ''").fetchall():
        mark_expected(conn, suite)


@migration
def m015_slice_tallies(conn: sqlite3.Connection) -> None:
    """What the gate's slices read instead of joining every case (store/gate_rows.py): per
    finished run and slice mark, its cases counted by tally (slice_tallies), its scored
    attempts and their calls by first-called tool (slice_calls), its attempts with the right
    tool and wrong arguments by reason (argument_failures), each case's slice marks
    (case_tallies.marks), all written with a run's scores; and an index of a suite's marks by
    case. The finished runs of an older store are counted here."""
    conn.execute(
        "CREATE TABLE IF NOT EXISTS slice_tallies ("
        "run INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE, mark TEXT NOT NULL, "
        "trials INTEGER NOT NULL, right_tool INTEGER NOT NULL, "
        "right_arguments INTEGER NOT NULL, cases INTEGER NOT NULL)")
    conn.execute("CREATE INDEX IF NOT EXISTS slice_tallies_by_run ON slice_tallies (run)")
    conn.execute(
        "CREATE TABLE IF NOT EXISTS slice_calls ("
        "run INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE, mark TEXT NOT NULL, "
        "first_tool TEXT, attempts INTEGER NOT NULL, calls INTEGER NOT NULL)")
    conn.execute("CREATE INDEX IF NOT EXISTS slice_calls_by_run ON slice_calls (run)")
    conn.execute("CREATE INDEX IF NOT EXISTS case_marks_by_case ON case_marks (suite, case_id)")
    conn.execute(
        "CREATE TABLE IF NOT EXISTS argument_failures ("
        "run INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE, arguments TEXT, "
        "schema_kind TEXT, reason TEXT, attempts INTEGER NOT NULL)")
    conn.execute("CREATE INDEX IF NOT EXISTS argument_failures_by_run "
                 "ON argument_failures (run)")
    columns = {row[1] for row in conn.execute("PRAGMA table_info(case_tallies)")}
    if "marks" not in columns:  # a case's slice marks, joined by char(31)
        conn.execute("ALTER TABLE case_tallies ADD COLUMN marks TEXT")
    for (run_id,) in conn.execute(
            "SELECT DISTINCT run FROM case_tallies").fetchall():
        write_slice_tallies(conn, run_id)


@migration
def m016_verdict_violations(conn: sqlite3.Connection) -> None:
    """verdicts.violations: the policies an attempt broke (JSON list of {policy, reason},
    callgate.checks.verdict.Violation); NULL when it broke none, as every older verdict."""
    columns = {row[1] for row in conn.execute("PRAGMA table_info(verdicts)")}
    if "violations" not in columns:
        conn.execute("ALTER TABLE verdicts ADD COLUMN violations TEXT")


@migration
def m017_argument_failures_per_reason(conn: sqlite3.Connection) -> None:
    """argument_failures counted again, one row per reason: m015 and the scores written after
    it grouped a run's failures by arguments verdict and schema kind only, so one reason stood
    for all of them in the gate's confusion table."""
    recount_argument_failures(conn)


@migration
def m018_run_user_simulator(conn: sqlite3.Connection) -> None:
    """runs.user_simulator: the simulated user a live run played its scenario cases with
    (JSON {name, model, fingerprint}; `run --user`), NULL without one, as every older run."""
    columns = {row[1] for row in conn.execute("PRAGMA table_info(runs)")}
    if "user_simulator" not in columns:
        conn.execute("ALTER TABLE runs ADD COLUMN user_simulator TEXT")


@migration
def m019_runs_perturbation(conn: sqlite3.Connection) -> None:
    """runs.perturbation: for a run made with the tool surface worded another way (`run
    --perturb`, suites/perturb.py), what it was (JSON: kind, seed, fingerprint, detail); NULL
    for a clean run. A perturbed run is kept beside its release's clean run, never replaces it
    and is never a release of its own: the reads of releases see clean runs only."""
    columns = {row[1] for row in conn.execute("PRAGMA table_info(runs)")}
    if "perturbation" not in columns:
        conn.execute("ALTER TABLE runs ADD COLUMN perturbation TEXT")
    conn.execute("CREATE INDEX IF NOT EXISTS runs_perturbed "
                 "ON runs (suite_name, agent, release) WHERE perturbation IS NOT NULL")


@migration
def m020_gated_decisions(conn: sqlite3.Connection) -> None:
    """gated_decisions: the decision `callgate gate` last took on a run, with the inputs it
    took it with (rule, quarantine, slice rule: gating.gated) and the key of the store it was
    taken on, so pages show that decision rather than the default rule's. One row a run. Not
    a cache: the inputs are the gate command's, which nothing else keeps."""
    conn.execute("CREATE TABLE IF NOT EXISTS gated_decisions (run INTEGER PRIMARY KEY "
                 "REFERENCES runs(id) ON DELETE CASCADE, key TEXT NOT NULL, "
                 "inputs TEXT NOT NULL, body TEXT NOT NULL)")


@migration
def m021_production_samples(conn: sqlite3.Connection) -> None:
    """Production samples (`score --traces --production`, docs/traces.md): traces checked
    without expected answers. production_batches: one row per file scored (agent, release,
    what it was checked against); production_samples: one row per trace, kept once per agent
    and trace id, with its UTC start and day, its counts and why its calls were invalid or
    which policies it broke (JSON lists, NULL when none). New tables only."""
    conn.execute(
        "CREATE TABLE IF NOT EXISTS production_batches ("
        "id INTEGER PRIMARY KEY, agent TEXT NOT NULL, release TEXT, model TEXT, "
        "folder TEXT NOT NULL, source TEXT NOT NULL, checked_against TEXT NOT NULL, "
        "traces INTEGER NOT NULL, stored INTEGER NOT NULL, created_at TEXT NOT NULL)")
    conn.execute(
        "CREATE TABLE IF NOT EXISTS production_samples ("
        "batch INTEGER NOT NULL REFERENCES production_batches(id) ON DELETE CASCADE, "
        "agent TEXT NOT NULL, release TEXT, trace_id TEXT NOT NULL, "
        "started_at TEXT NOT NULL, day TEXT NOT NULL, provider_error INTEGER NOT NULL, "
        "calls INTEGER NOT NULL, unknown_calls INTEGER NOT NULL, "
        "schema_valid INTEGER NOT NULL, policy_clean INTEGER NOT NULL, problems TEXT, "
        "violations TEXT, UNIQUE (agent, trace_id))")
    conn.execute("CREATE INDEX IF NOT EXISTS production_samples_by_day "
                 "ON production_samples (agent, day)")

@migration
def m022_production_claims(conn: sqlite3.Connection) -> None:
    """`--production --claims-judge`: a sample's claims (supported, unsupported, no_text_answer,
    no_tool_result, judge_error; NULL: not asked) and the judge's fingerprint. Columns only."""
    for table, column in (("production_samples", "claims"), ("production_samples",
                          "claims_judge"), ("production_batches", "claims_judge")):
        if column not in {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}:
            conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} TEXT")

@migration
def m023_run_fault_plan(conn: sqlite3.Connection) -> None:
    """runs.fault_plan: the --faults plan a run was made with (JSON: fingerprint, plan), or NULL."""
    if "fault_plan" not in {row[1] for row in conn.execute("PRAGMA table_info(runs)")}:
        conn.execute("ALTER TABLE runs ADD COLUMN fault_plan TEXT")

SCHEMA_VERSION = len(MIGRATIONS)
_SCHEMA_TABLES = frozenset(re.findall(r"CREATE TABLE IF NOT EXISTS (\w+)", SCHEMA))


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")
