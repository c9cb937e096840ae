"""The command line: a thin typer layer over the Python API.

Exit codes: 0 success (or gate pass), 1 regression, 2 usage or input error, 3 inconclusive.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from callgate.cli.common import (
    EXIT_INPUT,
    AgentOption,
    ClickException,
    DbOption,
    JudgeApiBaseOption,
    JudgeKeyEnvOption,
    JudgeOption,
    MaxExcludedOption,
    NamedAgentOption,
    NamedModelOption,
    ServerErrorsOption,
    ShardOption,
    UncalibratedOption,
    _agent_named,
    _exit_if_not_a_result,
    _fail,
    _usage_error,
    check_output,
    command_name,
    judge_step_for,
    not_blank,
)
from callgate.cli.judge import judge_app
from callgate.cli.live import run_command
from callgate.cli.suite_tools import tools_command
from callgate.errors import CallgateError
from callgate.scoring.exclusion import DEFAULT_MAX_EXCLUDED
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
suite_app.command("tools")(tools_command)
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
        list[str],
        typer.Option(
            "--category",
            help="A category, repeatable, or all: simple_python, multiple, parallel, "
            "parallel_multiple, irrelevance, live_simple, live_multiple, live_parallel, "
            "live_parallel_multiple, live_irrelevance, live_relevance, simple_java, "
            "simple_javascript. All go into one suite.",
        ),
    ],
    out: Annotated[Path, typer.Option("--out", help="Suite directory to write.")],
    force: Annotated[
        bool, typer.Option("--force", help="Overwrite a suite in --out not imported from BFCL.")
    ] = False,
) -> None:
    """Import Berkeley Function Calling Leaderboard categories as one suite (docs/bfcl.md)."""
    from callgate.importers.bfcl import TESTED_VERSION, import_category

    if out.exists() and not out.is_dir():  # the suite is a folder: never write into a file
        raise _fail(f"--out {out}: is a file, not a folder; name the suite's folder")
    try:
        result = import_category(source, category, out, force=force)
    except CallgateError as exc:
        raise _fail(str(exc)) from None
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


@import_app.command("bfcl-results")
def import_bfcl_results(
    folder: Annotated[
        Path, typer.Argument(help="BFCL's result folder for one model (v3 or v4 layout).")
    ],
    suite_path: Annotated[
        Path, typer.Option("--suite", help="The suite imported with `callgate import bfcl`.")
    ],
    out: Annotated[Path, typer.Option("--out", help="Responses file to write (JSON Lines).")],
) -> None:
    """Convert a BFCL result folder into recorded responses for an imported suite; score them
    with `callgate score SUITE -r OUT -m MODEL --release RELEASE` (docs/bfcl.md)."""
    from callgate.importers.bfcl.results import convert_results
    from callgate.suites.suite import load_suite

    try:
        result = convert_results(folder, load_suite(suite_path), out)
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


@app.command()
def score(
    suite_path: Annotated[Path, typer.Argument(metavar="SUITE", help="Suite directory.")],
    responses: Annotated[
        Path, typer.Option("--responses", "-r", help="Recorded responses, JSON Lines.")
    ],
    model: Annotated[str, typer.Option("--model", "-m", callback=not_blank,
                                       help="The model id the answers came "
                                       "from (without --agent, also the agent).")],
    release: Annotated[str, typer.Option("--release", callback=not_blank,
                                         help="Release label, e.g. 2026.11.")],
    agent: AgentOption = None,
    db: DbOption = Path("callgate.db"),
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON document instead.")] = False,
    judge: JudgeOption = None,
    uncalibrated: UncalibratedOption = False,
    judge_api_base: JudgeApiBaseOption = None,
    judge_api_key_env: JudgeKeyEnvOption = None,
    max_excluded: MaxExcludedOption = DEFAULT_MAX_EXCLUDED,
    shard: ShardOption = None,
    server_errors: ServerErrorsOption = "exclude",
) -> None:
    """Score recorded responses against a suite, store everything and print the figures.

    Exit 3 when more than --max-excluded of the attempts were excluded
    (truncated, provider, environment or judge errors; server errors only without
    --server-errors count)."""
    from callgate.report.console import print_run, run_document
    from callgate.scoring.pipeline import score_file
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
            step = judge_step_for(judge, store, uncalibrated=uncalibrated,
                                  api_base=judge_api_base, api_key_env=judge_api_key_env)
            result = score_file(suite, responses, store, model=model, release=release,
                                keep_verdicts=as_json, judge=step, shard=only,
                                server_errors=server_errors, agent=_agent_named(agent, model),
                                max_excluded=max_excluded)
    except CallgateError as exc:
        raise _fail(str(exc)) from None
    if as_json:
        json.dump(run_document(result), sys.stdout, indent=2, sort_keys=True)
        sys.stdout.write("\n")
    else:
        print_run(result)
        Console().print(f"stored as run {result.run_id} in {db}")
    _exit_if_not_a_result(result.not_a_result)


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
    command = command_name(directory)
    typer.echo(f"\nnext:\n  {where}{command} suite check {SUITE}\n"
               f"  {command} score {SUITE} --responses {RESPONSES} --agent my-agent "
               "--model example/travel-agent --release first\n"
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
    release: Annotated[str, typer.Option("--release", help="The release to gate.")],
    model: NamedModelOption = None,
    agent: NamedAgentOption = None,
    suite: Annotated[str | None, typer.Option("--suite", help="Suite name, if the release "
                                              "was run on several.")] = None,
    max_drop: Annotated[float, typer.Option("--max-drop", min=0.0,
                                            help="Allowed drop in points.")] = 2.0,
    baseline: Annotated[str, typer.Option(
        "--baseline", help="'auto' (last stored release of the agent and suite), a scores "
                           "file, or a folder of them (e.g. releases/).")] = "auto",
    baseline_agent: Annotated[str | None, typer.Option(
        "--baseline-agent", help="Compare with this other agent's last released release "
                                 "(e.g. the old model id, after a switch).")] = None,
    new_agent: Annotated[bool, typer.Option(
        "--new-agent", help="This release starts a new agent's line on purpose, beside "
                            "another agent's releases on the suite (recorded).")] = False,
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
    """Gate a release: exit 0 pass, 1 regression, 2 usage or input error, 3 inconclusive.

    The baseline is the agent's last released release on the suite. A first release of an
    agent where another agent has released is inconclusive until --baseline-agent or
    --new-agent says which."""
    from callgate.gating.gate import find_current
    from callgate.gating.release import gate_release
    from callgate.report.console import gate_junit, gate_markdown, print_gate
    from callgate.store.db import Store
    from callgate.suites.shard import incomplete

    name = _agent_named(agent, model)
    baseline_file = Path(baseline) if baseline != "auto" else None
    written: list[Path] = []
    for option, out in (("--scores-out", scores_out), ("--junit", junit),
                        ("--markdown", markdown)):
        if out is not None:  # each output is also an input of the next: no two share a file
            check_output(option, out, store=db, inputs=(baseline_file, *written),
                         makes_folder=option == "--scores-out")
            written.append(out)
    try:
        if not db.exists():
            raise CallgateError(f"{db}: no such database; score the release first")
        with Store(db) as store:
            run = find_current(store, name, release, suite)
            if model is not None and agent is not None and run["model"] != model:
                raise CallgateError(f"release {release!r} of agent {agent!r} ran with model "
                                    f"{run['model']!r}, not {model!r}")
            decision, current = gate_release(store, run["agent"], release, suite=suite,
                                             baseline=baseline, max_drop=max_drop,
                                             max_excluded=max_excluded,
                                             baseline_agent=baseline_agent, new_agent=new_agent)
            missing_shards = incomplete(run)
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
    from callgate.merging.merge import merge_stores

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
        console.print(f"{release.agent} {release.release} on {release.suite_name}: "
                      f"{release.attempts} attempts{held}; run {release.run_id} in {out}",
                      highlight=False)


@app.command()
def history(
    model: NamedModelOption = None,
    agent: NamedAgentOption = None,
    suite: Annotated[str | None, typer.Option("--suite", help="Only this suite.")] = None,
    db: DbOption = Path("callgate.db"),
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON document instead.")] = False,
) -> None:
    """The figures of every stored release of an agent, oldest first, with the change and
    the model each ran with.

    A 40-character commit SHA used as a release label is shown as its first 12 characters;
    --json gives the full label."""
    from callgate.report.history import history_document, history_rows, history_tables
    from callgate.store.db import Store

    name = _agent_named(agent, model)
    if not db.exists():
        raise _fail(f"{db}: no such database")
    with Store(db) as store:
        runs = store.runs(name, suite)
        if not runs and agent is None:  # a model id: the history of the agent it ran under
            agents = {r["agent"] for r in store.runs(suite_name=suite) if r["model"] == name}
            if len(agents) > 1:
                raise _fail(f"model {name!r} ran under several agents ({', '.join(sorted(agents))})"
                            "; choose one with --agent")
            if agents:
                name = agents.pop()
                runs = store.runs(name, suite)
        rows = history_rows(runs, {run["id"] for run in runs if store.audit(run["id"])})
    if not rows:
        raise _fail(f"no stored release of agent {name!r}" + (f" on {suite}" if suite else ""))
    if as_json:
        json.dump(history_document(name, rows), sys.stdout, indent=2, sort_keys=True)
        sys.stdout.write("\n")
        return
    console = Console()
    for index, table in enumerate(history_tables(name, rows)):
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
    labellers: Annotated[str | None, typer.Option(
        "--labellers", help="Comma-separated names: share each set's items among these "
                            "people (each person's queue holds their items).")] = None,
    second_label: Annotated[float, typer.Option(
        "--second-label", min=0, max=100,
        help="Percent of items that get a second person's label (for kappa).")] = 0,
    seed: Annotated[int, typer.Option(
        "--seed", help="Seed of the choice of items for a second label and of the sharing.")
    ] = 0,
    allow_hosts: Annotated[list[str] | None, typer.Option(
        "--allow-host", help="Beyond loopback, another name this server is reached by (the "
                             "Host header); the address bound and the machine's names are "
                             "allowed already.")] = None,
) -> None:
    """A local web app and JSON API over the store: releases, attempts, calibration sessions.
    Beyond loopback, every request needs the token, reads too.

    Everything is checked before the port is bound (exit 2, one line); with --port 0 the port
    picked is the one printed."""
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
    _check_serve_sets(db, list(sets or []))
    import uvicorn

    from callgate.judging.labelling import SessionPlan
    from callgate.store.db import Store
    from callgate.web.app import create_app

    names = tuple(dict.fromkeys(n.strip() for n in (labellers or "").split(",") if n.strip()))
    plan = (SessionPlan(labellers=names, second_share=second_label / 100, seed=seed)
            if names or second_label else None)
    try:
        Store(db).close()  # a store that cannot be opened fails here, not in the server
        web_app = create_app(db, list(sets or []), token, host, plan, list(allow_hosts or []))
    except CallgateError as exc:
        raise _fail(str(exc)) from None
    listening = _listen(host, port)
    shown = f"[{host}]" if ":" in host else host
    typer.echo(f"callgate serve: http://{shown}:{listening.getsockname()[1]}/ over {db} "
               "(Ctrl-C stops)")
    server = uvicorn.Server(uvicorn.Config(web_app, log_level="warning"))
    server.run(sockets=[listening])


def _check_serve_sets(db: Path, sets: list[Path]) -> None:
    """Every --set file as `serve` will use it: a file (or a new one in a folder that exists)
    that is not the store, a set that reads cleanly, and no two of one name (the store keeps
    a set by its file name)."""
    from callgate.judging.calibration import read_set

    names: dict[str, Path] = {}
    for path in sets:
        check_output("--set", path, store=db)
        if path.name in names:
            raise _fail(f"--set {path}: another --set, {names[path.name]}, has the same file "
                        f"name {path.name}, and the store keeps a set by its file name; "
                        "rename one")
        names[path.name] = path
        if path.is_file() and path.read_bytes().strip():
            try:
                read_set(path)
            except CallgateError as exc:
                raise _fail(str(exc)) from None


def _listen(host: str, port: int) -> socket.socket:
    """A socket bound to `host`:`port` for uvicorn, or a one-line refusal naming the option.
    --host must be an IP address or localhost: a name would be looked up on the network."""
    import errno
    import ipaddress

    try:
        numeric = host == "localhost" or bool(ipaddress.ip_address(host))
    except ValueError:
        numeric = False
    if not numeric:
        raise _fail(f"--host {host}: not an IP address to listen on; give one (e.g. "
                    "127.0.0.1, ::1 or 0.0.0.0) or localhost")
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    except (OSError, UnicodeError) as exc:
        raise _fail(f"--host {host}: cannot listen there ({exc})") from None
    listening = socket.socket(family, kind, proto)
    try:
        listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listening.bind(address)
    except OSError as exc:
        listening.close()
        if exc.errno == errno.EADDRINUSE:
            raise _fail(f"--port {port}: already in use on {host}; stop what listens there, "
                        "or pass another --port (0 picks a free one)") from None
        raise _fail(f"--host {host}: cannot listen there ({exc.strerror or exc})") from None
    return listening


@app.command()
def report(
    html: Annotated[Path, typer.Option("--html", help="Write one self-contained HTML file.")],
    model: NamedModelOption = None,
    agent: NamedAgentOption = None,
    release: Annotated[str | None, typer.Option(
        "--release", help="Release (default: the agent's latest).")] = None,
    suite: Annotated[str | None, typer.Option("--suite", help="Suite name, if several.")] = None,
    baseline: Annotated[str, typer.Option(
        "--baseline", help="As for `gate`: auto (the store), a scores file or a folder of them."
    )] = "auto",
    db: DbOption = Path("callgate.db"),
) -> None:
    """A static HTML report of a release (chart, figures, flipped cases) for CI artifacts."""
    name = _agent_named(agent, model)
    check_output("--html", html, store=db,
                 inputs=(Path(baseline) if baseline != "auto" else None,), makes_folder=True)
    if not db.exists():
        raise _fail(f"{db}: no such database")
    from callgate.web.report_html import write_report

    try:
        write_report(db, html, name, release, suite, baseline)
    except CallgateError as exc:
        raise _fail(str(exc)) from None
    typer.echo(f"wrote {html}")


EXIT_INTERNAL = 4


def _refuse_arguments_not_utf8(args: list[str]) -> None:
    """A command line byte that is not UTF-8 (Python keeps it as half a surrogate pair) would
    be stored or printed as no text can be: refused, naming the option it belongs to."""
    for index, arg in enumerate(args):
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError as exc:
            code = ord(arg[exc.start])
            byte = f"byte 0x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else "a surrogate"
            if arg.startswith("--") and "=" in arg:
                where = arg.split("=", 1)[0]
            elif index and args[index - 1].startswith("-"):
                where = args[index - 1]
            else:
                where = f"argument {index + 1}"
            where = where.encode("utf-8", "backslashreplace").decode("utf-8")
            raise _fail(f"{where}: not UTF-8 text ({byte} cannot be read); give it in UTF-8"
                        ) from None


def entry() -> None:
    """The console script. CI reads exit 1 as "regression", so no failure that a command did
    not catch may end with it: unreadable input is 2, an internal error 4, Ctrl-C 130."""
    try:
        _refuse_arguments_not_utf8(sys.argv[1:])
        code = app(standalone_mode=False)
    except typer.Exit as done:
        code = done.exit_code
    except typer.Abort:
        Console(stderr=True).print("interrupted", highlight=False)
        code = 130
    except ClickException as exc:  # usage errors (exit 2), one line each
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
