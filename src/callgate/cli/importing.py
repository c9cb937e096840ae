"""`callgate suite check` and `callgate import`: reading suites, and making them from public
benchmarks."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from callgate.cli.common import _fail, check_output
from callgate.errors import CallgateError

if TYPE_CHECKING:  # imported in the commands, so that --help stays fast
    from callgate.importers.bfcl.writing import ImportResult
    from callgate.suites.suite import Suite

suite_app = typer.Typer(help="Work with suites (tool catalogue + cases).", no_args_is_help=True)


@suite_app.command("check")
def suite_check(
    path: Annotated[Path, typer.Argument(help="Suite directory (tools.json + cases.jsonl).")],
    probe: Annotated[bool, typer.Option(
        "--probe", help="Also answer every case with made-up answers through the real checks "
                        "(doing nothing, its oracle, perturbed oracles) and list the cases "
                        "that cannot tell a good agent from a bad one (docs/probe.md).")] = False,
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
    if probe:
        _print_probe(suite)


def _print_probe(suite: Suite) -> None:
    from callgate.scoring.probing import probe

    report = probe(suite)
    weak = report.reasons()
    skipped = len({f.case_id for f in report.not_probed})
    typer.echo(f"probe: {report.cases} cases, {report.cases - skipped} probed, "
               f"{report.answers} made-up answers checked: {len(weak)} case(s) cannot tell a "
               "good agent from a bad one" + (":" if weak else ""))
    for finding in report.weak:
        typer.echo(f"  {finding.case_id}: {finding.probe}: {finding.reason}")
    if report.not_probed:
        typer.echo(f"not probed ({skipped}):")
        for finding in report.not_probed:
            typer.echo(f"  {finding.case_id}: {finding.reason}")


import_app = typer.Typer(help="Import suites from public benchmarks.", no_args_is_help=True)


@import_app.command("bfcl")
def import_bfcl(
    source: Annotated[
        Path, typer.Argument(help="A BFCL data folder, or the bfcl-eval wheel (read as a zip).")
    ],
    category: Annotated[
        list[str],
        typer.Option(
            "--category",
            help="A category, repeatable, or all: simple_python, multiple, parallel, "
            "parallel_multiple, irrelevance, live_simple, live_multiple, live_parallel, "
            "live_parallel_multiple, live_irrelevance, live_relevance, simple_java, "
            "simple_javascript, and from the wheel multi_turn_base, multi_turn_miss_func, "
            "multi_turn_miss_param, multi_turn_long_context. All go into one suite.",
        ),
    ],
    out: Annotated[Path, typer.Option("--out", help="Suite directory to write.")],
    force: Annotated[
        bool, typer.Option("--force", help="Overwrite a suite in --out not imported from BFCL.")
    ] = False,
    copy_wheel: Annotated[
        bool, typer.Option("--copy-wheel", help="Copy the bfcl-eval wheel into --out, so the "
                           "suite folder holds everything a multi-turn run loads.")
    ] = False,
) -> None:
    """Import Berkeley Function Calling Leaderboard categories as one suite (docs/bfcl.md)."""
    from callgate.importers.bfcl import TESTED_VERSION, import_category

    if out.exists() and not out.is_dir():  # the suite is a folder: never write into a file
        raise _fail(f"--out {out}: is a file, not a folder; name the suite's folder")
    try:
        result = import_category(source, category, out, force=force, copy_wheel=copy_wheel)
    except CallgateError as exc:
        raise _fail(str(exc)) from None
    _say_where_the_wheel_is(result)
    if result.version is not None and result.version != TESTED_VERSION:
        typer.echo(f"warning: bfcl-eval {result.version}; the importer is tested with "
                   f"{TESTED_VERSION} (docs/bfcl.md)")
    typer.echo(
        f"imported BFCL {', '.join(result.categories)}: {result.cases} cases, "
        f"{result.tools} tools into {result.out}"
    )
    if result.renamed:
        typer.echo(
            f"{result.renamed} docs share a name with another: kept in the catalogue under a "
            "_vN key, sent to the model under BFCL's name"
        )
    if result.reordered:
        typer.echo(f"{result.reordered} cases offer their tools in another order than BFCL's")
    if result.never_right:
        typer.echo(
            f"{len(result.never_right)} cases BFCL's own checker can never pass, imported and "
            "marked never_right (they count as wrong, as in BFCL):"
        )
        for never in result.never_right:
            typer.echo(f"  {never.id}: {never.reason}")


def _say_where_the_wheel_is(result: ImportResult) -> None:
    """How the suite names its wheel, and whether it will load on another machine."""
    if result.wheel is None:
        return
    if result.wheel_copied:
        typer.echo(f"copied the bfcl-eval wheel into the suite as {result.wheel}: commit it "
                   "with the suite")
    elif result.wheel_relative:
        typer.echo(f"the suite names the bfcl-eval wheel as {result.wheel}, relative to its "
                   "folder: commit the wheel with the suite (or import with --copy-wheel)")
    else:
        typer.echo(f"warning: the suite names the bfcl-eval wheel by its absolute path "
                   f"{result.wheel}, so it loads only where that file is (not on CI): put the "
                   "wheel under or beside the suite folder, or import again with --copy-wheel")


@import_app.command("bfcl-results")
def import_bfcl_results(
    folder: Annotated[
        Path, typer.Argument(help="BFCL's result folder for one model (v3 or v4 layout).")
    ],
    suite_path: Annotated[
        Path, typer.Option("--suite", help="The suite imported with `callgate import bfcl`.")
    ],
    out: Annotated[Path, typer.Option("--out", help="Responses file to write (JSON Lines).")],
    db: Annotated[Path, typer.Option(
        "--db", envvar="CALLGATE_DB",
        help="The store the responses will be scored into: --out never writes over it.")
    ] = Path("callgate.db"),
) -> None:
    """Convert a BFCL result folder into recorded responses for an imported suite; score them
    with `callgate score SUITE -r OUT -m MODEL --release RELEASE` (docs/bfcl.md)."""
    from callgate.importers.bfcl.results import convert_results, result_files
    from callgate.suites.bfcl_environment import BfclEnvironments
    from callgate.suites.suite import load_suite

    try:
        # The rule of gate --scores-out and report --html, before anything is read: never over
        # the store, the suite's files or a result file this command reads.
        suite_files = sorted(p for p in suite_path.rglob("*") if p.is_file()) \
            if suite_path.is_dir() else []
        results = list(result_files(folder)[0].values()) if folder.is_dir() else []
        check_output("--out", out, store=db, inputs=(*suite_files, *results))
        suite = load_suite(suite_path)
        if isinstance(suite.environment, BfclEnvironments):  # the wheel may lie elsewhere
            check_output("--out", out, inputs=(suite.environment.wheel,))
        result = convert_results(folder, suite, out)
    except CallgateError as exc:
        raise _fail(str(exc)) from None
    typer.echo(
        f"converted {result.responses} BFCL results ({', '.join(result.categories)}) into "
        f"{result.out}"
    )
    if result.missing:
        typer.echo(f"no result file for: {', '.join(result.missing)} (not scored)")
    if result.ignored:
        typer.echo(f"result files of categories callgate does not import: "
                   f"{', '.join(result.ignored)}")


@import_app.command("traces")
def import_traces(
    source: Annotated[Path, typer.Argument(
        metavar="FILE", help="An OTLP JSON trace export (the Collector's file exporter): "
                             "GenAI or OpenInference spans.")],
    out: Annotated[Path, typer.Option("--out", help="Responses file to write (JSON Lines).")],
    suite_path: Annotated[Path | None, typer.Option(
        "--suite", help="The suite the traces answer: checks the case ids, and finds the case "
                        "of a trace without the attribute by its first user message.")] = None,
    case_attribute: Annotated[str, typer.Option(
        "--case-attribute", help="The span attribute naming a trace's case."
    )] = "callgate.case_id",
    db: Annotated[Path, typer.Option(
        "--db", envvar="CALLGATE_DB",
        help="The store the responses will be scored into: --out never writes over it.")
    ] = Path("callgate.db"),
) -> None:
    """Convert traces into recorded responses, one trace an attempt, its trace id kept; score
    them with `callgate score SUITE -r OUT -m MODEL --release RELEASE` (docs/traces.md)."""
    from callgate.importers.traces import trace_lines, write_lines
    from callgate.suites.suite import load_suite

    if not case_attribute.strip():
        raise _fail("--case-attribute: must not be empty")
    try:
        check_output("--out", out, store=db, inputs=(source,))
        if not source.is_file():
            raise _fail(f"{source}: "
                        + ("is a folder, not a file" if source.is_dir() else "file not found"))
        suite = load_suite(suite_path) if suite_path is not None else None
        loops = frozenset(case_id for case_id, case in suite.cases.items()
                          if suite.loops(case)) if suite is not None else frozenset()
        lines = trace_lines(source, suite.cases if suite is not None else None,
                            attribute=case_attribute, loops=loops)
        write_lines(lines, out)
    except CallgateError as exc:
        raise _fail(str(exc)) from None
    cases = len({line["case_id"] for line in lines})
    typer.echo(f"converted {len(lines)} traces ({cases} cases) into {out}")
