"""`callgate gate`, `history` and `report`: a release's decision, an agent's releases over time,
and a release as one HTML file."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.markup import escape

from callgate.cli.common import (
    DbOption,
    NamedAgentOption,
    NamedModelOption,
    _agent_named,
    _fail,
    check_output,
)
from callgate.errors import CallgateError

if TYPE_CHECKING:
    from callgate.gating.quarantine import GateSettings, Quarantined
    from callgate.gating.slices import SliceFigures, SliceRule
    from callgate.report.history import HistoryRow
from callgate.scoring.exclusion import DEFAULT_MAX_EXCLUDED, EXCLUDED_IN_WORDS


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
        help=f"Inconclusive above this share of excluded attempts ({EXCLUDED_IN_WORDS}).")
    ] = DEFAULT_MAX_EXCLUDED,
    junit: Annotated[Path | None, typer.Option("--junit", help="Write JUnit XML here.")] = None,
    markdown: Annotated[Path | None, typer.Option("--markdown",
                                                  help="Write a Markdown summary here.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the decision as JSON.")] = False,
    rule: Annotated[str | None, typer.Option(
        "--rule", help="points (the playbook's: fail on a drop of more than --max-drop, the "
                       "default) or statistical (fail only when the paired test is sure; "
                       "docs/noise.md). Default: [gate] rule in callgate.toml.")] = None,
    quarantine: Annotated[Path | None, typer.Option(
        "--quarantine", help="A file of [[quarantine]] entries (case, reason, by) left out "
                             "of the gate, besides callgate.toml's [gate] quarantine.")] = None,
    config: Annotated[Path, typer.Option(
        "--config", help="callgate.toml, for its [gate] table (absent: defaults).")
    ] = Path("callgate.toml"),
    per_tool: Annotated[bool, typer.Option(
        "--per-tool", help="Also gate each expected tool's slice (Holm-corrected; "
                           "docs/what-to-fix.md).")] = False,
    per_tag: Annotated[list[str] | None, typer.Option(
        "--per-tag", help="Also gate this tag's slice (repeatable; 'all': every tag).")] = None,
    slice_alpha: Annotated[float | None, typer.Option(
        "--slice-alpha", min=0.0, max=1.0,
        help="Family-wise error rate of the slice rule (default 0.05).")] = None,
    recovery_max_drop: Annotated[float | None, typer.Option(
        "--recovery-max-drop", min=0.0,
        help="Also gate recovery per fault kind: fail on a drop of more points (default: "
             "[gate] recovery_max_drop; off without it; docs/faults.md).")] = None,
    db: DbOption = Path("callgate.db"),
) -> None:
    """Gate a release: exit 0 pass, 1 regression, 2 usage or input error, 3 inconclusive.

    The baseline is the agent's last released release on the suite. A first release of an
    agent where another agent has released is inconclusive until --baseline-agent or
    --new-agent says which."""
    from callgate.gating.finding import find_current, with_cases
    from callgate.gating.release import record_gate
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
        settings, left_out = gate_rules(config, rule, quarantine)
        slices = slice_rule_of(settings, per_tool, per_tag or [], slice_alpha)
        if not db.exists():
            raise CallgateError(f"{db}: no such database; score the release first")
        with Store(db) as store:
            run = find_current(store, name, release, suite)
            if model is not None and agent is not None and run.model != model:
                raise CallgateError(f"release {release!r} of agent {agent!r} ran with model "
                                    f"{run.model!r}, not {model!r}")
            decision, current = record_gate(store, run, baseline=baseline, max_drop=max_drop,
                                            max_excluded=max_excluded,
                                            baseline_agent=baseline_agent, new_agent=new_agent,
                                            rule=settings.rule, quarantine=left_out,
                                            slice_rule=slices,
                                            recovery_max_drop=(
                                                recovery_max_drop
                                                if recovery_max_drop is not None
                                                else settings.recovery_max_drop))
            if scores_out is not None or junit is not None:  # the only outputs with every case
                current = with_cases(store, run, current)
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


def gate_rules(config: Path, rule: str | None, quarantine: Path | None
               ) -> tuple[GateSettings, list[Quarantined]]:
    """callgate.toml's [gate] table with --rule over it, and the quarantine entries of both."""
    from callgate.gating.quarantine import gate_settings, quarantine_file
    from callgate.gating.sequential import RULES

    settings = gate_settings(config)
    if rule is not None:
        if rule not in RULES:
            raise CallgateError(f"--rule {rule}: give one of {', '.join(RULES)}")
        settings = settings.model_copy(update={"rule": rule})
    entries = list(settings.quarantine)
    if quarantine is not None:
        entries += quarantine_file(quarantine)
    return settings, entries


def slice_rule_of(section: GateSettings, per_tool: bool, per_tag: list[str],
                  alpha: float | None) -> SliceRule | None:
    """The slice rule from callgate.toml's [gate] and the flags, which add slices to it and
    set its error rate; None when nothing is gated."""
    from callgate.gating.slices import SliceRule

    if alpha is not None and not 0 < alpha < 1:
        raise CallgateError(f"--slice-alpha {alpha:g}: a family-wise error rate is above 0 "
                            "and below 1")
    rule = SliceRule(per_tool=per_tool or section.per_tool,
                     per_tag=sorted({*section.per_tag, *per_tag}),
                     alpha=section.alpha if alpha is None else alpha)
    return rule if rule.active else None


def history(
    model: NamedModelOption = None,
    agent: NamedAgentOption = None,
    suite: Annotated[str | None, typer.Option("--suite", help="Only this suite.")] = None,
    db: DbOption = Path("callgate.db"),
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON document instead.")] = False,
    by: Annotated[str | None, typer.Option(
        "--by", help="tool or tag: each release's figures per expected tool or per tag, "
                     "paired with the previous release (with --production: day or "
                     "release).")] = None,
    production: Annotated[bool, typer.Option(
        "--production", help="The agent's production samples (`score --traces "
                             "--production`) per UTC day or release (docs/traces.md).")
    ] = False,
) -> None:
    """The figures of every stored release of an agent, oldest first, with the change and
    the model each ran with.

    A 40-character commit SHA used as a release label is shown as its first 12 characters;
    --json gives the full label."""
    from callgate.report.history import history_document, history_rows, history_tables
    from callgate.store.db import Store

    name = _agent_named(agent, model)
    if production:
        from callgate.cli.production import history_production

        return history_production(name, by, db, as_json, suite)
    if by not in (None, "tool", "tag"):
        raise _fail(f"--by {by!r}: expected tool or tag")
    if not db.exists():
        raise _fail(f"{db}: no such database")
    with Store(db) as store:
        runs = store.stored_runs(name, suite)
        if not runs and agent is None:  # a model id: the history of the agent it ran under
            agents = {r.agent for r in store.stored_runs(suite_name=suite) if r.model == name}
            if len(agents) > 1:
                raise _fail(f"model {name!r} ran under several agents ({', '.join(sorted(agents))})"
                            "; choose one with --agent")
            if agents:
                name = agents.pop()
                runs = store.stored_runs(name, suite)
        rows = history_rows(runs, {run.id for run in runs if store.audit(run.id)},
                            {run.id: len(store.mixed_tallies(run.id)) for run in runs
                             if store.has_case_tallies(run.id)})
        if by is not None and rows:
            from callgate.gating.what_to_fix import slice_history
            from callgate.report.slice_history import gated_left_out

            left_out = gated_left_out(store, runs)
            _print_slice_history(name, rows, slice_history(store, runs, left_out), by, as_json,
                                 [len(gone) for gone in left_out])
            return
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
    flaky = [f"{row.release[:12]} {row.flaky}" for row in rows if row.flaky]
    if flaky:  # never silently, beside the table (stdout stays the table): per release
        Console(stderr=True).print("flaky cases (a verdict differed between repeats): "
                                   + ", ".join(flaky), highlight=False)


def _print_slice_history(name: str, rows: list[HistoryRow], slices: list[list[SliceFigures]],
                         by: str, as_json: bool, left_out: list[int]) -> None:
    from callgate.report.slice_history import slice_history_document, slice_history_tables

    if as_json:
        json.dump(slice_history_document(name, rows, slices, by, left_out), sys.stdout, indent=2,
                  sort_keys=True)
        sys.stdout.write("\n")
        return
    console = Console()
    for index, table in enumerate(slice_history_tables(name, rows, slices, by, left_out)):
        if index:
            console.print()
        console.print(table)


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
