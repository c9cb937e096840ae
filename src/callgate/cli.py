"""The command line: a thin typer layer over the Python API.

Exit codes: 0 success (or gate pass), 1 regression, 2 usage or input error, 3 inconclusive.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from callgate import __version__
from callgate.errors import CallgateError
from callgate.thresholds import DEFAULT_MAX_EXCLUDED

app = typer.Typer(
    name="callgate",
    help="Evaluate how well an LLM calls tools, and gate releases on it.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
suite_app = typer.Typer(help="Work with suites (tool catalogue + cases).", no_args_is_help=True)
app.add_typer(suite_app, name="suite")
judge_app = typer.Typer(help="A frozen LLM judge: show, calibrate, label, audit, plan.",
                        no_args_is_help=True)
app.add_typer(judge_app, name="judge")

EXIT_INPUT = 2

ShardOption = Annotated[str | None, typer.Option(
    "--shard", metavar="K/N",
    help="Only the cases of shard K of N (by a hash of the case id; repeats of a case stay "
         "together); the run is stored as that shard of its release. Combine the shard stores "
         "with `callgate merge`.")]

JudgeOption = Annotated[Path | None, typer.Option(
    "--judge", help="Judge spec (judges/NAME.toml), or the name of a bundled judge (tool_choice), "
                    "for cases whose expectation is `judge`.")]
JudgeApiBaseOption = Annotated[str | None, typer.Option(
    "--judge-api-base", help="Reach the judge's model at this endpoint instead (e.g. a local "
                             "vLLM or Ollama server); not part of the fingerprint.")]
JudgeKeyEnvOption = Annotated[str | None, typer.Option(
    "--judge-api-key-env", help="NAME of the variable holding the key for --judge-api-base "
                                "(default: send no key).")]
ApiBaseOption = Annotated[str | None, typer.Option(
    "--api-base", help="Reach the judge's model at this endpoint instead (e.g. a local vLLM or "
                       "Ollama server); not part of the fingerprint.")]
ApiKeyEnvOption = Annotated[str | None, typer.Option(
    "--api-key-env", help="NAME of the variable holding the key for --api-base (default: send "
                          "no key; the spec's key is never sent to another endpoint).")]
UncalibratedOption = Annotated[bool, typer.Option(
    "--uncalibrated", help="Use a judge that has no certificate; the scores are marked so and "
                           "the gate is inconclusive.")]

DbOption = Annotated[
    Path,
    typer.Option(
        "--db", envvar="CALLGATE_DB", help="SQLite file to store everything in.", show_default=True
    ),
]


def _fail(message: str, code: int = EXIT_INPUT) -> typer.Exit:
    Console(stderr=True).print(f"[red]error:[/red] {escape(message)}", highlight=False,
                               soft_wrap=True)
    return typer.Exit(code)


MaxExcludedOption = Annotated[float, typer.Option(
    "--max-excluded", min=0.0, max=1.0,
    help="Exit 3 (not a result, never a baseline) above this share of truncated or "
         "provider-error attempts.")]
EXIT_INCONCLUSIVE = 3


def _record_if_not_a_result(store, by: str, result, max_excluded: float):
    """Mark a run that is mostly excluded attempts as inconclusive in the store; the record
    (or None when the run is a result)."""
    from callgate.gate import not_a_result

    record = not_a_result(by, result.scores.attempts, result.scores.excluded, max_excluded)
    if record is not None:
        store.set_run_gate(result.run_id, record.model_dump_json())
    return record


def _exit_if_not_a_result(record) -> None:
    if record is None:
        return
    Console(stderr=True).print(
        f"[yellow]inconclusive:[/yellow] {escape(record.messages[0])}. This run is not a "
        "result: it is stored, marked inconclusive, and never used as a baseline (a run "
        "of the same command calls the provider errors again).", highlight=False, soft_wrap=True)
    raise typer.Exit(EXIT_INCONCLUSIVE)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"callgate {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Show the version and exit."
        ),
    ] = False,
) -> None:
    """callgate: right tool %, right arguments % and calls per task, gated per release."""


@suite_app.command("check")
def suite_check(
    path: Annotated[Path, typer.Argument(help="Suite directory (tools.json + cases.jsonl).")],
) -> None:
    """Load a suite, check every tool schema and case, and print what it covers."""
    from callgate.suite import lint, load_suite

    try:
        suite = load_suite(path)
    except CallgateError as exc:
        raise _fail(str(exc)) from None
    kinds: dict[str, int] = {}
    tags: dict[str, int] = {}
    for case in suite.cases.values():
        kinds[case.expect.type] = kinds.get(case.expect.type, 0) + 1
        for tag in case.tags:
            tags[tag] = tags.get(tag, 0) + 1
    typer.echo(
        f"suite {suite.name}: {len(suite.tools)} tools, {len(suite.cases)} cases, "
        f"fingerprint {suite.fingerprint[:12]}"
    )
    typer.echo("expectations: " + ", ".join(f"{k} {v}" for k, v in sorted(kinds.items())))
    typer.echo("tags: " + (", ".join(f"{k} {v}" for k, v in sorted(tags.items())) or "none"))
    for warning in lint(suite):
        typer.echo(f"warning: {warning}")


import_app = typer.Typer(help="Import suites from public benchmarks.", no_args_is_help=True)
app.add_typer(import_app, name="import")


@import_app.command("bfcl")
def import_bfcl(
    source: Annotated[
        Path, typer.Argument(help="A BFCL data folder, or the bfcl-eval wheel (read as a zip).")
    ],
    category: Annotated[
        str,
        typer.Option(
            "--category",
            help="simple_python, multiple, parallel, parallel_multiple, irrelevance, live_simple, "
            "live_multiple, live_parallel, live_parallel_multiple, live_irrelevance or "
            "live_relevance.",
        ),
    ],
    out: Annotated[Path, typer.Option("--out", help="Suite directory to write.")],
    force: Annotated[
        bool, typer.Option("--force", help="Overwrite a suite in --out not imported from BFCL.")
    ] = False,
) -> None:
    """Import a Berkeley Function Calling Leaderboard category as a suite (docs/bfcl.md)."""
    from callgate.bfcl import import_category

    try:
        result = import_category(source, category, out, force=force)
    except CallgateError as exc:
        raise _fail(str(exc)) from None
    typer.echo(
        f"imported BFCL {category}: {result.cases} cases, {result.tools} tools into {result.out}"
    )
    if result.renamed:
        typer.echo(
            f"{result.renamed} tools renamed with a _vN suffix: BFCL gives one name several docs"
        )
    if result.reordered:
        typer.echo(f"{result.reordered} cases offer their tools in another order than BFCL's")
    if result.skipped:
        typer.echo(f"skipped {len(result.skipped)} cases BFCL's own checker can never pass:")
        for skipped in result.skipped:
            typer.echo(f"  {skipped.id}: {skipped.reason}")


@app.command()
def score(
    suite_path: Annotated[Path, typer.Argument(metavar="SUITE", help="Suite directory.")],
    responses: Annotated[
        Path, typer.Option("--responses", "-r", help="Recorded responses, JSON Lines.")
    ],
    model: Annotated[str, typer.Option("--model", "-m", help="Model name to file under.")],
    release: Annotated[str, typer.Option("--release", help="Release label, e.g. 2026.11.")],
    db: DbOption = Path("callgate.db"),
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON document instead.")] = False,
    judge: JudgeOption = None,
    uncalibrated: UncalibratedOption = False,
    judge_api_base: JudgeApiBaseOption = None,
    judge_api_key_env: JudgeKeyEnvOption = None,
    max_excluded: MaxExcludedOption = DEFAULT_MAX_EXCLUDED,
    shard: ShardOption = None,
) -> None:
    """Score recorded responses against a suite, store everything and print the figures.

    Exit 3 when more than --max-excluded of the attempts were excluded
    (truncated, provider, environment or judge errors)."""
    from callgate.pipeline import judge_step, score_file
    from callgate.report import print_run, run_document
    from callgate.shard import parse_shard
    from callgate.store import Store
    from callgate.suite import load_suite

    try:
        only = parse_shard(shard) if shard is not None else None
        suite = load_suite(suite_path)
        if not responses.is_file():
            raise _fail(f"{responses}: "
                        + ("is a folder, not a file" if responses.is_dir() else "file not found"))
        with Store(db) as store:
            step = (judge_step(judge, store, uncalibrated=uncalibrated, environ=os.environ,
                               api_base=judge_api_base, api_key_env=judge_api_key_env)
                    if judge else None)
            result = score_file(suite, responses, store, model=model, release=release,
                                keep_verdicts=as_json, judge=step, shard=only)
            not_a_result = _record_if_not_a_result(store, "score", result, max_excluded)
    except CallgateError as exc:
        raise _fail(str(exc)) from None
    if as_json:
        json.dump(run_document(result), sys.stdout, indent=2, sort_keys=True)
        sys.stdout.write("\n")
    else:
        print_run(result)
        Console().print(f"stored as run {result.run_id} in {db}")
    _exit_if_not_a_result(not_a_result)


@app.command()
def init(
    directory: Annotated[Path, typer.Argument(
        metavar="[DIR]", help="Where to create the project (default: here).")] = Path("."),
) -> None:
    """Create a tiny working project: a suite, recorded responses, callgate.toml, releases/
    and a GitHub Actions workflow. Never overwrites a file (exit 2, naming it)."""
    from callgate.scaffold import RESPONSES, SUITE, write_scaffold

    try:
        written = write_scaffold(directory)
    except CallgateError as exc:
        raise _fail(str(exc)) from None
    for path in written:
        typer.echo(f"created {path}")
    where = "" if directory == Path(".") else f"cd {directory} && "
    typer.echo(f"\nnext:\n  {where}callgate suite check {SUITE}\n"
               f"  callgate score {SUITE} --responses {RESPONSES} --model my-agent "
               "--release first\n"
               "  then edit suite/tools.json and suite/cases.jsonl for your agent, and "
               "commit releases/.gitkeep")


@app.command()
def demo(
    db: DbOption = Path("callgate.db"),
) -> None:
    """Score the bundled example (two releases of an example agent) with no key and no network."""
    from callgate.demo import run_demo

    try:
        run_demo(db, Console())
    except CallgateError as exc:
        raise _fail(str(exc)) from None


@app.command()
def gate(
    model: Annotated[str, typer.Option("--model", "-m", help="Model whose release is gated.")],
    release: Annotated[str, typer.Option("--release", help="The release to gate.")],
    suite: Annotated[str | None, typer.Option("--suite", help="Suite name, if the release "
                                              "was run on several.")] = None,
    max_drop: Annotated[float, typer.Option("--max-drop", min=0.0,
                                            help="Allowed drop in points.")] = 2.0,
    baseline: Annotated[str, typer.Option(
        "--baseline", help="'auto' (last stored release of the model and suite), a scores "
                           "file, or a folder of them (e.g. releases/).")] = "auto",
    scores_out: Annotated[Path | None, typer.Option(
        "--scores-out", help="Write this release's scores file here (keep it with the "
                             "release, e.g. releases/2026.11.json).")] = None,
    max_excluded: Annotated[float, typer.Option(
        "--max-excluded", min=0.0, max=1.0,
        help="Inconclusive above this share of excluded attempts (truncated, provider, "
             "environment or judge errors).")
    ] = DEFAULT_MAX_EXCLUDED,
    junit: Annotated[Path | None, typer.Option("--junit", help="Write JUnit XML here.")] = None,
    markdown: Annotated[Path | None, typer.Option("--markdown",
                                                  help="Write a Markdown summary here.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the decision as JSON.")] = False,
    db: DbOption = Path("callgate.db"),
) -> None:
    """Gate a release: exit 0 pass, 1 regression, 2 usage or input error, 3 inconclusive."""
    from callgate.gate import (
        baseline_from_path,
        baseline_from_store,
        decide,
        find_current,
        record_of,
        stored_release,
    )
    from callgate.report import gate_junit, gate_markdown, print_gate
    from callgate.store import Store

    try:
        if not db.exists():
            raise CallgateError(f"{db}: no such database; score the release first")
        with Store(db) as store:
            run = find_current(store, model, release, suite)
            _refuse_incomplete_shards(store, run, max_excluded)
            current = stored_release(store, run)
            if baseline == "auto":
                base, skipped = baseline_from_store(store, run, max_excluded)
                source = f"store {db}"
            else:
                base, skipped = baseline_from_path(Path(baseline), current, max_excluded)
                source = baseline
            decision = decide(current, base, max_drop=max_drop, max_excluded=max_excluded,
                              baseline_source=source if base else None, baseline_notes=skipped,
                              judged_checks=_judged_checks(store, run["id"], base, max_drop))
            # Recorded so that only a release that passed can be a later one's baseline.
            record = record_of(decision, max_excluded)
            store.set_run_gate(run["id"], record.model_dump_json())
            current = current.model_copy(update={"gate": record,
                                                 "estimates": _estimates(store, run["id"])})
    except CallgateError as exc:
        raise _fail(str(exc)) from None
    if scores_out is not None:
        scores_out.parent.mkdir(parents=True, exist_ok=True)
        scores_out.write_text(current.to_json(), encoding="utf-8")
    if junit is not None:
        junit.write_text(gate_junit(decision, current), encoding="utf-8")
    if markdown is not None:
        markdown.write_text(gate_markdown(decision), encoding="utf-8")
    if as_json:
        json.dump(decision.model_dump(mode="json"), sys.stdout, indent=2, sort_keys=True)
        sys.stdout.write("\n")
    else:
        print_gate(decision)
    raise typer.Exit(decision.exit_code)


def _estimates(store: Any, run_id: int) -> dict[str, Any] | None:
    from callgate.audit import audit_report, estimates_document

    if store.audit(run_id) is None:
        return None
    return estimates_document(audit_report(store, run_id))


def _judged_checks(store: Any, run_id: int, base: Any, max_drop: float
                   ) -> list[tuple[str, str]]:
    """With judged attempts: the figures estimated with the run's audit (PPI++), or a note
    that the judge's verdicts were counted as they are when the run has no audit."""
    from callgate.audit import audit_report, judged_check

    judged = len(store.judgements(run_id))
    if not judged or base is None:
        return []
    if store.audit(run_id) is None:
        return [("note", f"{judged} attempts were decided by the judge and are counted as it "
                         "said (raw); audit them for an estimate that does not trust it: "
                         f"callgate judge audit {run_id} --n 40")]
    report = audit_report(store, run_id)
    out = []
    for figure in ("right_tool", "right_arguments"):
        # The baseline's audited estimate when its scores file kept one, else its figure.
        audited = (base.estimates or {}).get(figure) or {}
        pct = audited.get("pct", getattr(base.figures, figure).pct)
        check = judged_check(report, figure, pct, max_drop) if pct is not None else None
        if check is not None:
            out.append((check.outcome, check.message))
    return out


def _refuse_incomplete_shards(store: Any, run: Any, max_excluded: float) -> None:
    """A release some of whose shards are missing is no result: recorded inconclusive (so never
    a baseline), exit 3 naming the missing shards."""
    from callgate.gate import GateRecord
    from callgate.shard import incomplete

    why = incomplete(run)
    if why is None:
        return
    record = GateRecord(outcome="inconclusive", released=False, max_excluded=max_excluded,
                        messages=[why])
    store.set_run_gate(run["id"], record.model_dump_json())
    Console(stderr=True).print(f"[yellow]inconclusive:[/yellow] {escape(why)}",
                               highlight=False, soft_wrap=True)
    raise typer.Exit(EXIT_INCONCLUSIVE)


@app.command()
def merge(
    stores: Annotated[list[Path], typer.Argument(
        metavar="[OUT.db] IN.db...", help="The new store to make, then the stores to merge "
                                          "into it (with --into: only the stores to merge).")],
    into: Annotated[Path | None, typer.Option(
        "--into", help="Merge into this existing store instead of making a new one.")] = None,
) -> None:
    """Merge stores, e.g. the stores of the shards of a run (`--shard K/N`), into one.

    Copies suites, runs, responses, verdicts, judge verdicts and outputs, calibration items and
    certificates; the shards of a release become one release, scored again from its verdicts.
    Merging a store twice changes nothing. Refused (exit 2, nothing written) when two stores
    scored one attempt differently, or ran one release on different suites, judges, callgate
    versions or numbers of shards."""
    from callgate.merge import merge_stores

    if into is None:
        if len(stores) < 2:
            raise _fail("merge: name the new store and at least one store to merge "
                        "(or --into STORE and the stores to merge)")
        out, inputs = stores[0], stores[1:]
        if out.exists() and out.stat().st_size:
            raise _fail(f"{out}: exists; to merge into an existing store use --into {out}")
    else:
        out, inputs = into, stores
        if not into.is_file():
            raise _fail(f"{into}: no such store; to make a new one, name it first: "
                        f"callgate merge {into} IN.db...")
    try:
        merged = merge_stores(out, inputs)
    except CallgateError as exc:
        raise _fail(str(exc)) from None
    console = Console()
    if not merged:
        console.print(f"nothing new: {out} already holds every attempt of "
                      f"{', '.join(str(p) for p in inputs)}", highlight=False)
    for release in merged:
        held = ""
        if release.shard_count:
            missing = sorted(set(range(1, release.shard_count + 1)) - set(release.shards or ()))
            held = (f", shards {', '.join(map(str, release.shards or ()))} of "
                    f"{release.shard_count}"
                    + (f" (missing {', '.join(map(str, missing))})" if missing else ""))
        console.print(f"{release.model} {release.release} on {release.suite_name}: "
                      f"{release.attempts} attempts{held}; run {release.run_id} in {out}",
                      highlight=False)


@app.command()
def history(
    model: Annotated[str, typer.Option("--model", "-m", help="Model to list.")],
    suite: Annotated[str | None, typer.Option("--suite", help="Only this suite.")] = None,
    db: DbOption = Path("callgate.db"),
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON document instead.")] = False,
) -> None:
    """The figures of every stored release of a model, oldest first, with the change.

    A 40-character commit SHA used as a release label is shown as its first 12 characters;
    --json gives the full label."""
    from callgate.history import history_document, history_rows, history_tables
    from callgate.store import Store

    if not db.exists():
        raise _fail(f"{db}: no such database")
    with Store(db) as store:
        runs = store.runs(model, suite)
        rows = history_rows(runs, {run["id"] for run in runs if store.audit(run["id"])})
    if not rows:
        raise _fail(f"no stored release of {model!r}" + (f" on {suite}" if suite else ""))
    if as_json:
        json.dump(history_document(model, rows), sys.stdout, indent=2, sort_keys=True)
        sys.stdout.write("\n")
        return
    console = Console()
    for index, table in enumerate(history_tables(model, rows)):
        if index:
            console.print()
        console.print(table)


@app.command("run")
def run_command(
    suite_path: Annotated[Path, typer.Argument(metavar="SUITE", help="Suite directory.")],
    model: Annotated[
        str,
        typer.Option(
            "--model", "-m", help="A candidate's name in the config, or a litellm model id."
        ),
    ],
    repeats: Annotated[int, typer.Option("--repeats", "-k", min=1, help="Attempts per case.")] = 3,
    concurrency: Annotated[
        int, typer.Option("--concurrency", "-c", min=1, help="Requests in flight at once.")
    ] = 8,
    release: Annotated[
        str, typer.Option("--release", help="Release label; a run with the same label is replaced.")
    ] = "dev",
    timeout: Annotated[
        float, typer.Option("--timeout", min=0.001, help="Seconds per request.")
    ] = 120.0,
    config: Annotated[
        Path | None,
        typer.Option("--config", help="Candidates file (default: ./callgate.toml if present)."),
    ] = None,
    no_cache: Annotated[
        bool, typer.Option("--no-cache", help="Call every attempt, even those stored.")
    ] = False,
    offline: Annotated[
        bool, typer.Option("--offline", help="Never call: fail if an attempt is not stored.")
    ] = False,
    db: DbOption = Path("callgate.db"),
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON document instead.")] = False,
    api_base: Annotated[str | None, typer.Option("--api-base", help="Endpoint base URL.")] = None,
    api_key_env: Annotated[
        str | None,
        typer.Option("--api-key-env", help="NAME of the environment variable holding the key."),
    ] = None,
    reasoning_effort: Annotated[
        str | None,
        typer.Option("--reasoning-effort", help="Default low for every candidate; omit: unsent."),
    ] = None,
    provider_order: Annotated[
        str | None,
        typer.Option("--provider-order", help="OpenRouter providers to try, comma-separated."),
    ] = None,
    allow_fallbacks: Annotated[
        bool | None,
        typer.Option("--allow-fallbacks/--no-allow-fallbacks", help="OpenRouter fallbacks."),
    ] = None,
    require_parameters: Annotated[
        bool | None,
        typer.Option(
            "--require-parameters/--no-require-parameters",
            help="OpenRouter: only providers that support every parameter (default on).",
        ),
    ] = None,
    params: Annotated[
        list[str] | None,
        typer.Option("--param", help="Extra request parameter KEY=VALUE (VALUE as JSON)."),
    ] = None,
    client: Annotated[
        str | None,
        typer.Option("--client", help="auto (lean where possible), lean or litellm."),
    ] = None,
    max_retries: Annotated[
        int, typer.Option("--max-retries", min=0, help="Retries per attempt.")
    ] = 5,
    retry_budget: Annotated[
        int | None,
        typer.Option(
            "--retry-budget",
            min=0,
            help="Retries for the whole run (default: one per attempt called, at least 20).",
        ),
    ] = None,
    judge: JudgeOption = None,
    uncalibrated: UncalibratedOption = False,
    judge_api_base: JudgeApiBaseOption = None,
    judge_api_key_env: JudgeKeyEnvOption = None,
    max_excluded: MaxExcludedOption = DEFAULT_MAX_EXCLUDED,
    shard: ShardOption = None,
) -> None:
    """Call a model on every case (repeats × cases), then check, score and store as `score` does.

    Exit 3 when more than --max-excluded of the attempts were excluded
    (truncated, provider, environment or judge errors).

    Answers are stored as they arrive: run the same command again to resume, or to re-score
    with zero calls.
    """
    from callgate.config import DEFAULT_CONFIG, load_config, parse_params, resolve_candidate
    from callgate.pipeline import judge_step
    from callgate.report import print_run, run_document
    from callgate.run import RetryPolicy, RunSettings, run_live
    from callgate.shard import parse_shard
    from callgate.store import Store
    from callgate.suite import load_suite

    err = Console(stderr=True)
    try:
        only = parse_shard(shard) if shard is not None else None
        suite = load_suite(suite_path)
        config_path = config or (DEFAULT_CONFIG if DEFAULT_CONFIG.is_file() else None)
        candidates = load_config(config_path) if config_path is not None else None
        order = None
        if provider_order is not None:
            order = [name.strip() for name in provider_order.split(",") if name.strip()]
        provider = {
            key: value
            for key, value in (
                ("order", order),
                ("allow_fallbacks", allow_fallbacks),
                ("require_parameters", require_parameters),
            )
            if value is not None
        }
        overrides = {
            "api_base": api_base,
            "api_key_env": api_key_env,
            "reasoning_effort": reasoning_effort,
            "client": client,
            "provider": provider or None,
            "extra": parse_params(params or []) or None,
        }
        candidate = resolve_candidate(
            model,
            candidates,
            config_path,
            explicit_config=config is not None,
            overrides=overrides,
        )
        settings = RunSettings(
            repeats=repeats,
            concurrency=concurrency,
            timeout=timeout,
            cache=not no_cache,
            offline=offline,
            retry=RetryPolicy(max_retries=max_retries, budget=retry_budget),
            shard=only,
        )
        with Store(db) as store:
            step = (judge_step(judge, store, uncalibrated=uncalibrated, environ=os.environ,
                               concurrency=concurrency, api_base=judge_api_base,
                               api_key_env=judge_api_key_env) if judge else None)
            live = run_live(
                suite,
                candidate,
                store,
                release=release,
                settings=settings,
                keep_verdicts=as_json,
                judge=step,
            )
            not_a_result = (None if live.stopped else
                            _record_if_not_a_result(store, "run", live.result, max_excluded))
    except CallgateError as exc:
        raise _fail(str(exc)) from None
    except KeyboardInterrupt:
        err.print(
            "interrupted: answers received so far are saved. "
            "Run the same command again to resume."
        )
        raise typer.Exit(130) from None
    result = live.result
    if as_json:
        document = run_document(result)
        document["live"] = live.summary()
        json.dump(document, sys.stdout, indent=2, sort_keys=True)
        sys.stdout.write("\n")
    else:
        print_run(result)
        Console().print(
            f"{live.called} attempt(s) called, {live.cached} from the store, "
            f"{live.retries} retries, {live.provider_errors} provider error(s); "
            f"stored as run {result.run_id} in {db}",
            highlight=False,
        )
    if live.stopped == "interrupted":
        done = live.cached + live.called
        err.print(
            f"[yellow]interrupted:[/yellow] {done} of {live.attempts} attempts are saved. "
            "Run the same command again to resume: saved attempts are not called again.",
            highlight=False,
        )
        raise typer.Exit(130)
    if live.stopped:
        raise _fail(
            f"stopped at the first request the provider refused ({live.stopped}); nothing more "
            "was sent. Fix the cause and run the same command again to resume."
        )
    _exit_if_not_a_result(not_a_result)


@judge_app.command("show")
def judge_show(
    spec: Annotated[Path, typer.Argument(
        help="Judge spec, e.g. judges/tool_choice.toml, or a bundled judge's name: tool_choice.")],
    db: DbOption = Path("callgate.db"),
    api_base: ApiBaseOption = None,
    api_key_env: ApiKeyEnvOption = None,
) -> None:
    """Print a judge's fingerprint and whether a certificate exists for it."""
    from callgate.bundled import judge_spec
    from callgate.calibration import require_certificate
    from callgate.judge import load_judge
    from callgate.pipeline import at_endpoint
    from callgate.store import Store, StoreError

    try:
        judge = at_endpoint(load_judge(judge_spec(spec)), api_base, api_key_env)
        latest = None
        try:
            if db.exists():
                with Store(db) as store:
                    latest = store.certificate(judge.fingerprint)
                    cert = require_certificate(judge, store)
            else:
                cert = require_certificate(judge)
            status = (f"certified {cert.created_at} on {cert.set_path} "
                      f"({cert.test_items} test items)")
            latest = cert.to_json()
        except StoreError:
            raise  # a store that cannot be read says nothing about the judge
        except CallgateError as exc:
            status = f"NOT CERTIFIED: {exc}"
    except CallgateError as exc:
        raise _fail(str(exc)) from None
    p = judge.spec.parameters
    endpoint = judge.spec.api_base or "the provider's default"
    key = judge.spec.api_key_env or "none sent"
    typer.echo(f"judge        {judge.spec.name}\nspec         {judge.spec_path}\n"
               f"model        {judge.spec.model}\n"
               f"endpoint     {endpoint} (key: {key})\n"
               f"prompt       {judge.spec_path.parent / judge.spec.prompt}\n"
               f"parameters   temperature {p.temperature}, samples {p.samples}, "
               f"reasoning effort {p.reasoning_effort or 'not sent'}\n"
               f"fingerprint  {judge.fingerprint}\ncertificate  {status}")
    for line in _show_labels_and_plan(judge, latest):
        typer.echo(line)


def _show_labels_and_plan(judge: Any, certificate_json: str | None) -> list[str]:
    """Who gave the labels the newest calibration used, and how many more would certify the
    judge under the spec's rule (and, when that is the point rule, under the Wilson rule)."""
    from callgate.audit import certificate_plan_lines
    from callgate.calibration import Certificate

    if certificate_json is None:
        return []
    cert = Certificate.model_validate_json(certificate_json)
    t = judge.spec.thresholds
    confirmed = ("unknown (calibrated before labellers were recorded)"
                 if cert.person_confirmed is None else
                 f"{cert.person_confirmed} of {cert.test_items} test labels confirmed by a "
                 f"person (required share: {t.min_person_confirmed:g})")
    plan = certificate_plan_lines(cert.dimensions, t.model_dump())
    return [f"labels       {confirmed}"] + [
        ("plan         " + line) if not line.startswith(" ") else line for line in plan]


@judge_app.command("calibrate")
def judge_calibrate(
    spec: Annotated[Path, typer.Argument(
        help="Judge spec, e.g. judges/tool_choice.toml, or a bundled judge's name: tool_choice.")],
    calibration_set: Annotated[Path, typer.Option(
        "--set", help="Hand-checked items, JSON Lines (calibration/*.jsonl), or a bundled set's "
                      "name: tool_choice.")],
    concurrency: Annotated[int, typer.Option("--concurrency", min=1)] = 8,
    as_json: Annotated[bool, typer.Option("--json", help="Print the certificate as JSON.")
                       ] = False,
    db: DbOption = Path("callgate.db"),
    api_base: ApiBaseOption = None,
    api_key_env: ApiKeyEnvOption = None,
) -> None:
    """Run the judge on every hand-checked item and certify it if the thresholds hold.

    Exit 0 certified, 1 not certified, 2 bad input."""
    import asyncio

    from callgate.bundled import calibration_set as bundled_set
    from callgate.bundled import judge_spec
    from callgate.calibration import calibrate, read_set
    from callgate.judge import JudgeModel, load_judge
    from callgate.pipeline import at_endpoint
    from callgate.report import print_calibration
    from callgate.store import Store

    async def go(store: Store, set_path: Path):
        model = JudgeModel(judge, os.environ, concurrency=concurrency)
        progress, calls_due = _judge_progress(judge, set_path, store)
        task = progress.add_task(f"judge {judge.spec.name}", total=calls_due)

        async def complete(messages):
            try:
                return await model.complete(messages)
            finally:
                progress.advance(task)

        try:
            with progress:
                return await calibrate(judge, set_path, store, complete, concurrency)
        finally:
            await model.aclose()

    try:
        judge = at_endpoint(load_judge(judge_spec(spec)), api_base, api_key_env)
        set_path = bundled_set(calibration_set)
        read_set(set_path)  # the whole set is checked before the store is touched
        with Store(db) as store:
            certificate, disagreements, judged = asyncio.run(go(store, set_path))
    except CallgateError as exc:
        raise _fail(str(exc)) from None
    if as_json:
        typer.echo(certificate.to_json(), nl=False)
    else:
        print_calibration(certificate, disagreements, judged, judge.certificate_path)
    raise typer.Exit(0 if certificate.certified else 1)


def _judge_progress(judge: Any, set_path: Path, store: Any) -> tuple[Any, int]:
    """A progress bar like `run`'s over the judge calls calibration will make: one per sample
    of every item whose verdict is not cached yet."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    from callgate.calibration import item_payloads, read_set
    from callgate.judge import cache_key

    items, _ = read_set(set_path)
    keys = [cache_key(judge.fingerprint, *item_payloads(item)) for item in items]
    due = len(keys) - len(store.judge_outputs(keys))
    progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                        TextColumn("judge calls"), TimeElapsedColumn(), TimeRemainingColumn(),
                        console=Console(stderr=True), disable=due == 0)
    return progress, due * judge.spec.parameters.samples


@judge_app.command("label")
def judge_label(
    run_id: Annotated[int | None, typer.Argument(
        metavar="RUN", help="Run id (see callgate score).")] = None,
    calibration_set: Annotated[Path | None, typer.Option(
        "--set", help="Calibration file the new items are appended to.")] = None,
    split: Annotated[str, typer.Option(
        "--split", help="Split of the new items: dev (default) or test.")] = "dev",
    audit: Annotated[int | None, typer.Option(
        "--audit", metavar="RUN", help="Label the audit sample of this run instead (see "
                                       "callgate judge audit); the judge's verdict is hidden.")
    ] = None,
    labeller: Annotated[str | None, typer.Option(
        "--labeller", envvar="CALLGATE_LABELLER",
        help="Who gives the labels (default: $USER); stored with each audit label.")] = None,
    db: DbOption = Path("callgate.db"),
) -> None:
    """Label a run's judged attempts by hand, growing the hand-checked set.

    For each attempt the judge decided, shows the request, the response and the judge's
    verdict, and asks for your verdict per dimension (s skips, q stops)."""
    from callgate.calibration import label_judged_attempts
    from callgate.store import Store

    if audit is not None:
        _label_audit(audit, labeller or os.environ.get("USER", ""), db)
        return
    if run_id is None or calibration_set is None:
        raise _fail("give RUN and --set FILE, or --audit RUN")
    if split not in ("dev", "test"):
        raise _fail(f"--split must be dev or test, not {split!r}")
    if not db.exists():
        raise _fail(f"{db}: no such database")
    try:
        with Store(db) as store:
            added = label_judged_attempts(store, run_id, calibration_set, split,
                                          ask=typer.prompt, show=typer.echo,
                                          labeller=labeller or os.environ.get("USER", ""))
    except CallgateError as exc:
        raise _fail(str(exc)) from None
    typer.echo(f"added {added} item(s) to {calibration_set} and to {db}")


LOOPBACK = ("127.0.0.1", "localhost", "::1")


@app.command()
def serve(
    db: DbOption = Path("callgate.db"),
    host: Annotated[str, typer.Option("--host", help="Address to listen on; anything but "
                                      "loopback needs --token.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=0, max=65535)] = 8765,
    token: Annotated[str | None, typer.Option(
        "--token", envvar="CALLGATE_TOKEN",
        help="Every write (POST) must carry it: X-Callgate-Token header or token field.")] = None,
    sets: Annotated[list[Path] | None, typer.Option(
        "--set", help="Calibration file(s) people may label here; labels are appended to it, "
                      "as `callgate judge label` does.")] = None,
) -> None:
    """A local web app and JSON API over the store: releases, attempts, calibration sessions."""
    if host not in LOOPBACK and not token:
        raise _fail(f"--host {host} is not a loopback address: anyone who can reach it could "
                    "write labels; give --token T (or CALLGATE_TOKEN) so every write needs it")
    if not db.exists():
        raise _fail(f"{db}: no such database; score a release first (e.g. callgate demo)")
    for path in sets or []:
        if not path.is_file() and not path.parent.is_dir():
            raise _fail(f"{path}: calibration set not found (a new set file may be named, in "
                        "a folder that exists)")
    import uvicorn

    from callgate.web.app import create_app

    try:
        web_app = create_app(db, list(sets or []), token, host)
    except CallgateError as exc:
        raise _fail(str(exc)) from None
    shown = f"[{host}]" if ":" in host else host
    typer.echo(f"callgate serve: http://{shown}:{port}/ over {db} (Ctrl-C stops)")
    uvicorn.run(web_app, host=host, port=port, log_level="warning")


@app.command()
def report(
    model: Annotated[str, typer.Option("--model", "-m", help="Model to report on.")],
    html: Annotated[Path, typer.Option("--html", help="Write one self-contained HTML file.")],
    release: Annotated[str | None, typer.Option(
        "--release", help="Release (default: the model's latest).")] = None,
    suite: Annotated[str | None, typer.Option("--suite", help="Suite name, if several.")] = None,
    db: DbOption = Path("callgate.db"),
) -> None:
    """A static HTML report of a release (chart, figures, flipped cases) for CI artifacts."""
    if not db.exists():
        raise _fail(f"{db}: no such database")
    from callgate.web.report_html import write_report

    try:
        write_report(db, html, model, release, suite)
    except CallgateError as exc:
        raise _fail(str(exc)) from None
    typer.echo(f"wrote {html}")


def _label_audit(run_id: int, labeller: str, db: Path) -> None:
    from callgate.audit import label_audit
    from callgate.store import Store

    if not db.exists():
        raise _fail(f"{db}: no such database")
    try:
        with Store(db) as store:
            done = label_audit(store, run_id, labeller, ask=typer.prompt, show=typer.echo)
    except CallgateError as exc:
        raise _fail(str(exc)) from None
    typer.echo(f"labelled {done} audit item(s) of run {run_id} as {labeller}; "
               f"see: callgate judge audit {run_id}")


@judge_app.command("audit")
def judge_audit(
    run_id: Annotated[int, typer.Argument(metavar="RUN", help="Run id (see callgate score).")],
    n: Annotated[int | None, typer.Option(
        "--n", min=1, help="Audit size: draw a uniform random sample of this many judged "
                           "attempts, or grow the audit to it (default 40 for a new audit).")
    ] = None,
    seed: Annotated[int | None, typer.Option(
        "--seed", help="Seed of the sample (default: a random one, stored).")] = None,
    width: Annotated[float, typer.Option(
        "--width", help="Also say how many labels give a PPI interval of ±WIDTH points.")
    ] = 2.0,
    as_json: Annotated[bool, typer.Option("--json", help="Print the estimates as JSON.")
                       ] = False,
    db: DbOption = Path("callgate.db"),
) -> None:
    """Audit a run's judged attempts: a seeded sample for a person to label, and estimates.

    Draws a uniform random sample (label it with callgate judge label --audit RUN) and reports
    the judged shares three ways: raw, Rogan–Gladen corrected, and prediction-powered (PPI++)
    from the labels so far."""
    from callgate.audit import audit_report, draw_audit, render_report
    from callgate.store import Store

    if not db.exists():
        raise _fail(f"{db}: no such database")
    try:
        with Store(db) as store:
            existing = store.audit(run_id)
            if existing is None or n is not None:
                draw_audit(store, run_id, n or 40, seed)
            elif seed is not None and seed != existing["seed"]:
                draw_audit(store, run_id, len(store.audit_items(run_id)), seed)
            report = audit_report(store, run_id)
    except CallgateError as exc:
        raise _fail(str(exc)) from None
    if as_json:
        typer.echo(report.model_dump_json(indent=2))
        return
    for line in render_report(report, width / 100):
        typer.echo(line)
    if report.labelled < report.sample:
        typer.echo(f"\n{report.sample - report.labelled} item(s) to label: "
                   f"callgate judge label --audit {run_id}")


@judge_app.command("plan")
def judge_plan(
    spec: Annotated[Path | None, typer.Argument(
        help="Judge spec or bundled judge name, with --set: labels needed to certify.")] = None,
    calibration_set: Annotated[Path | None, typer.Option(
        "--set", help="Calibration set the labels so far are in.")] = None,
    rule: Annotated[str | None, typer.Option(
        "--rule", help="point (TPR/TNR at least the thresholds) or wilson (their Wilson 95% "
                       "lower bounds at least the thresholds); default: the spec's rule.")
    ] = None,
    run_id: Annotated[int | None, typer.Option(
        "--run", metavar="RUN", help="Plan an audit of this run instead.")] = None,
    width: Annotated[float, typer.Option(
        "--width", help="With --run: the PPI interval's half-width to reach, in points.")
    ] = 2.0,
    db: DbOption = Path("callgate.db"),
) -> None:
    """How many more labels: per dimension and class to certify a judge (SPEC --set FILE), or
    audit labels for a ±WIDTH judged-share interval (--run RUN)."""
    if run_id is not None:
        _plan_run(run_id, width / 100, db)
        return
    if spec is None or calibration_set is None:
        raise _fail("give SPEC --set FILE, or --run RUN")
    if rule not in (None, "point", "wilson"):
        raise _fail(f"--rule must be point or wilson, not {rule!r}")
    for line in _certificate_plan_lines(spec, calibration_set, rule, db):
        typer.echo(line)


def _certificate_plan_lines(spec: Path, calibration_set: Path, rule: str | None, db: Path
                            ) -> list[str]:
    from callgate.audit import describe_class_plan, set_confusions
    from callgate.bundled import calibration_set as bundled_set
    from callgate.bundled import judge_spec
    from callgate.judge import load_judge
    from callgate.planning import certificate_plan
    from callgate.store import Store

    try:
        judge = load_judge(judge_spec(spec))
        with Store(db) as store:
            confusions, unjudged, test_items = set_confusions(
                judge, bundled_set(calibration_set), store)
    except CallgateError as exc:
        raise _fail(str(exc)) from None
    t = judge.spec.thresholds
    rule = rule or t.rule
    lines = [f"labels to certify {judge.spec.name} under the {rule} rule (TPR ≥ {t.tpr}, "
             f"TNR ≥ {t.tnr}, {t.min_items_per_class} items of each class), from the "
             f"{test_items - unjudged} test items the judge has verdicts on"]
    if unjudged:
        lines.append(f"({unjudged} test item(s) not judged yet: run callgate judge calibrate "
                     "first to count them)")
    for dim, c in confusions.items():
        plan = certificate_plan(c.tp, c.fn, c.tn, c.fp, t.tpr, t.tnr, t.min_items_per_class,
                                rule)  # type: ignore[arg-type]
        lines.append(f"{dim}:")
        lines.append("  " + describe_class_plan("pass items (TPR)", plan.pass_items))
        lines.append("  " + describe_class_plan("fail items (TNR)", plan.fail_items))
    return lines


def _plan_run(run_id: int, width: float, db: Path) -> None:
    from callgate.audit import describe_width_plan, width_plan
    from callgate.calibration import Certificate, dimension_rates
    from callgate.store import Store

    if not db.exists():
        raise _fail(f"{db}: no such database")
    try:
        with Store(db) as store:
            run = store.run(run_id)
            if run is None:
                raise CallgateError(f"no run {run_id} in {db}")
            judgements = store.judgements(run_id)
            if not judgements:
                raise CallgateError(f"run {run_id} has no attempts decided by a judge")
            cert_json = (store.certificate(run["judge_fingerprint"])
                         if run.get("judge_fingerprint") else None)
            report = None
            if store.audit(run_id) is not None:
                from callgate.audit import audit_report
                report = audit_report(store, run_id)
    except CallgateError as exc:
        raise _fail(str(exc)) from None
    certificate = Certificate.model_validate_json(cert_json) if cert_json else None
    stored = json.loads(run["scores"]).get("judged") or {} if run.get("scores") else {}
    for dim in ("tool_choice", "arguments"):
        rates = dimension_rates(certificate, dim) if certificate else None
        if report is not None:
            d = report.dimensions[dim]
            table, passes, judged, have = d.table, d.judged_passes, d.judged, d.labels
        else:
            share = stored.get(dim) or {}
            judged = share.get("n") or 0
            passes = round((share.get("raw") or 0) * judged / 100)
            table, have = None, 0
        corrected = (stored.get(dim) or {}).get("corrected")
        plan = width_plan(table, passes, judged, width, rates[:2] if rates else None,
                          corrected / 100 if corrected is not None else None)
        typer.echo(f"{dim}: {describe_width_plan(plan, have, width)}")


EXIT_INTERNAL = 4


def entry() -> None:
    """The console script. CI reads exit 1 as "regression", so no failure that a command did
    not catch may end with it: unreadable input is 2, an internal error 4, Ctrl-C 130."""
    try:  # typer 0.29 vendors click; older releases use click itself
        from typer._click.exceptions import ClickException
    except ImportError:  # pragma: no cover
        from click.exceptions import ClickException

    try:
        code = app(standalone_mode=False)
    except typer.Abort:
        Console(stderr=True).print("interrupted", highlight=False)
        code = 130
    except ClickException as exc:  # usage errors (exit 2), shown as click shows them
        exc.show()
        code = exc.exit_code
    except BrokenPipeError:  # e.g. `callgate gate ... | head`: the reader went away
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 141
    except CallgateError as exc:  # e.g. a store that cannot be used, where no command caught it
        Console(stderr=True).print(f"error: {exc}", highlight=False, markup=False,
                                   soft_wrap=True)
        code = EXIT_INPUT
    except UnicodeDecodeError as exc:
        Console(stderr=True).print(f"error: a file is not UTF-8 text ({exc.reason} at byte "
                                   f"{exc.start})", highlight=False, markup=False, soft_wrap=True)
        code = EXIT_INPUT
    except OSError as exc:
        Console(stderr=True).print(f"error: {exc.filename or ''}: {exc.strerror or exc}",
                                   highlight=False, markup=False, soft_wrap=True)
        code = EXIT_INPUT
    except Exception as exc:
        if os.environ.get("CALLGATE_DEBUG"):
            raise
        Console(stderr=True).print(
            f"internal error: {exc!r} (set CALLGATE_DEBUG=1 for the traceback; please report it)",
            highlight=False, markup=False, soft_wrap=True)
        code = EXIT_INTERNAL
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":  # pragma: no cover
    entry()
