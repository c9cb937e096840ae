"""The command line: a thin typer layer over the Python API.

Exit codes: 0 success (or gate pass), 1 regression, 2 usage or input error, 3 inconclusive.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from callgate import __version__
from callgate.errors import CallgateError

app = typer.Typer(
    name="callgate",
    help="Evaluate how well an LLM calls tools, and gate releases on it.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
suite_app = typer.Typer(help="Work with suites (tool catalogue + cases).", no_args_is_help=True)
app.add_typer(suite_app, name="suite")

EXIT_INPUT = 2

DbOption = Annotated[
    Path,
    typer.Option(
        "--db", envvar="CALLGATE_DB", help="SQLite file to store everything in.", show_default=True
    ),
]


def _fail(message: str, code: int = EXIT_INPUT) -> typer.Exit:
    Console(stderr=True).print(f"[red]error:[/red] {message}", highlight=False, soft_wrap=True)
    return typer.Exit(code)


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
) -> None:
    """Score recorded responses against a suite, store everything and print the figures."""
    from callgate.pipeline import score_file
    from callgate.report import print_run, run_document
    from callgate.store import Store
    from callgate.suite import load_suite

    try:
        suite = load_suite(suite_path)
        if not responses.is_file():
            raise _fail(f"{responses}: file not found")
        with Store(db) as store:
            result = score_file(suite, responses, store, model=model, release=release,
                                keep_verdicts=as_json)
    except CallgateError as exc:
        raise _fail(str(exc)) from None
    if as_json:
        json.dump(run_document(result), sys.stdout, indent=2, sort_keys=True)
        sys.stdout.write("\n")
    else:
        print_run(result)
        Console().print(f"stored as run {result.run_id} in {db}")


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
        help="Inconclusive above this share of truncated or provider-error attempts.")] = 0.05,
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
        stored_release,
    )
    from callgate.report import gate_junit, gate_markdown, print_gate
    from callgate.store import Store

    try:
        if not db.exists():
            raise CallgateError(f"{db}: no such database; score the release first")
        with Store(db) as store:
            run = find_current(store, model, release, suite)
            current = stored_release(store, run)
            if baseline == "auto":
                base, source = baseline_from_store(store, run), f"store {db}"
            else:
                base, source = baseline_from_path(Path(baseline), current), baseline
        decision = decide(current, base, max_drop=max_drop, max_excluded=max_excluded,
                          baseline_source=source if base else None)
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


@app.command()
def history(
    model: Annotated[str, typer.Option("--model", "-m", help="Model to list.")],
    suite: Annotated[str | None, typer.Option("--suite", help="Only this suite.")] = None,
    db: DbOption = Path("callgate.db"),
) -> None:
    """The figures of every stored release of a model, oldest first, with the change."""
    from callgate.gate import stored_release
    from callgate.report import history_table
    from callgate.store import Store

    if not db.exists():
        raise _fail(f"{db}: no such database")
    with Store(db) as store:
        releases = [stored_release(store, run) for run in store.runs(model, suite)]
    if not releases:
        raise _fail(f"no stored release of {model!r}" + (f" on {suite}" if suite else ""))
    Console().print(history_table(model, releases))


if __name__ == "__main__":  # pragma: no cover
    app()
