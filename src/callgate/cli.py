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


if __name__ == "__main__":  # pragma: no cover
    app()
