"""The command line: a thin typer layer over the Python API.

Exit codes: 0 success (or gate pass), 1 regression, 2 usage or input error, 3 inconclusive.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from callgate.cli.common import (
    EXIT_INPUT,
    DbOption,
    JudgeApiBaseOption,
    JudgeKeyEnvOption,
    JudgeOption,
    MaxExcludedOption,
    ShardOption,
    UncalibratedOption,
    _exit_if_not_a_result,
    _fail,
    _record_if_not_a_result,
    _usage_error,
    click_errors,
)
from callgate.cli.judge import judge_app
from callgate.cli.live import run_command
from callgate.errors import CallgateError
from callgate.gating.thresholds import DEFAULT_MAX_EXCLUDED
from callgate.version import __version__

app = typer.Typer(
    name="callgate",
    help="Evaluate how well an LLM calls tools, and gate releases on it.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
suite_app = typer.Typer(help="Work with suites (tool catalogue + cases).", no_args_is_help=True)
app.add_typer(suite_app, name="suite")
app.add_typer(judge_app, name="judge")

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
    from callgate.suites.suite import lint, load_suite

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
    from callgate.importers.bfcl import import_category

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
    from callgate.report.console import print_run, run_document
    from callgate.scoring.pipeline import judge_step, score_file
    from callgate.store.db import Store
    from callgate.suites.shard import parse_shard
    from callgate.suites.suite import load_suite

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
    from callgate.cli.scaffold import RESPONSES, SUITE, write_scaffold

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
    from callgate.cli.demo import run_demo

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
    from callgate.gating.gate import find_current
    from callgate.gating.release import gate_release
    from callgate.report.console import gate_junit, gate_markdown, print_gate
    from callgate.store.db import Store
    from callgate.suites.shard import incomplete

    try:
        if not db.exists():
            raise CallgateError(f"{db}: no such database; score the release first")
        with Store(db) as store:
            decision, current = gate_release(store, model, release, suite=suite,
                                             baseline=baseline, max_drop=max_drop,
                                             max_excluded=max_excluded)
            missing_shards = incomplete(find_current(store, model, release, suite))
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
    if missing_shards is not None:  # the decision says it too; stderr keeps the reason in CI logs
        Console(stderr=True).print(f"[yellow]inconclusive:[/yellow] {escape(missing_shards)}",
                                   highlight=False, soft_wrap=True)
    raise typer.Exit(decision.exit_code)


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
    from callgate.running.merge import merge_stores

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
    from callgate.report.history import history_document, history_rows, history_tables
    from callgate.store.db import Store

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


app.command("run")(run_command)


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
    allow_hosts: Annotated[list[str] | None, typer.Option(
        "--allow-host", help="Beyond loopback, another name this server is reached by (the "
                             "Host header); the address bound and the machine's names are "
                             "allowed already.")] = None,
) -> None:
    """A local web app and JSON API over the store: releases, attempts, calibration sessions.
    Beyond loopback, every request needs the token, reads too."""
    if host not in LOOPBACK and not token:
        raise _fail(f"--host {host} is not a loopback address: anyone who can reach it could "
                    "read and write labels; give --token T (or CALLGATE_TOKEN) so every "
                    "request needs it")
    if token is not None and not (token.isascii() and token.isprintable() and token.strip()
                                  and " " not in token):
        raise _fail("--token must be printable ASCII without spaces (it travels in an HTTP "
                    "header and a cookie)")
    if not db.exists():
        raise _fail(f"{db}: no such database; score a release first (e.g. callgate demo)")
    for path in sets or []:
        if path.is_dir():
            raise _fail(f"{path}: is a folder; --set names a calibration file (.jsonl), "
                        "new or existing")
        if not path.is_file() and not path.parent.is_dir():
            raise _fail(f"{path}: calibration set not found (a new set file may be named, in "
                        "a folder that exists)")
    import uvicorn

    from callgate.web.app import create_app

    try:
        web_app = create_app(db, list(sets or []), token, host, list(allow_hosts or []))
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
    baseline: Annotated[str, typer.Option(
        "--baseline", help="As for `gate`: auto (the store), a scores file or a folder of them."
    )] = "auto",
    db: DbOption = Path("callgate.db"),
) -> None:
    """A static HTML report of a release (chart, figures, flipped cases) for CI artifacts."""
    if not db.exists():
        raise _fail(f"{db}: no such database")
    from callgate.web.report_html import write_report

    try:
        write_report(db, html, model, release, suite, baseline)
    except CallgateError as exc:
        raise _fail(str(exc)) from None
    typer.echo(f"wrote {html}")


EXIT_INTERNAL = 4


def entry() -> None:
    """The console script. CI reads exit 1 as "regression", so no failure that a command did
    not catch may end with it: unreadable input is 2, an internal error 4, Ctrl-C 130."""
    try:
        code = app(standalone_mode=False)
    except typer.Abort:
        Console(stderr=True).print("interrupted", highlight=False)
        code = 130
    except click_errors.ClickException as exc:  # usage errors (exit 2), one line each
        code = _usage_error(exc)
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
