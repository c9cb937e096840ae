"""`callgate score`, `merge`, `init` and `demo`: recorded answers scored into the store, stores
merged, and the projects and examples to start from."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from callgate.cli.common import (
    AgentOption,
    AnswerKindJudgeOption,
    ClaimsJudgeOption,
    DbOption,
    JudgeApiBaseOption,
    JudgeKeyEnvOption,
    JudgeOption,
    MaxExcludedOption,
    ServerErrorsOption,
    ShardOption,
    UncalibratedOption,
    _agent_named,
    _exit_if_not_a_result,
    _fail,
    behaviour_judges_for,
    command_name,
    judge_step_for,
    not_blank,
    print_judge_pacing,
)
from callgate.errors import CallgateError
from callgate.running.limits import MAX_CONCURRENCY
from callgate.scoring.exclusion import DEFAULT_MAX_EXCLUDED


def score(
    suite_path: Annotated[Path, typer.Argument(
        metavar="SUITE", help="Suite directory (with --production: a folder with tools.json "
                              "and suite.json, each optional).")],
    model: Annotated[str | None, typer.Option("--model", "-m", callback=_given_not_blank,
                                              help="The model id the answers came "
                                              "from (without --agent, also the agent).")] = None,
    release: Annotated[str | None, typer.Option("--release", callback=_given_not_blank,
                                                help="Release label, e.g. 2026.11.")] = None,
    responses: Annotated[
        Path | None, typer.Option("--responses", "-r", help="Recorded responses, JSON Lines.")
    ] = None,
    agent: AgentOption = None,
    db: DbOption = Path("callgate.db"),
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON document instead.")] = False,
    judge: JudgeOption = None,
    answer_kind_judge: AnswerKindJudgeOption = None,
    claims_judge: ClaimsJudgeOption = None,
    uncalibrated: UncalibratedOption = False,
    judge_api_base: JudgeApiBaseOption = None,
    judge_api_key_env: JudgeKeyEnvOption = None,
    concurrency: Annotated[int | None, typer.Option(
        "--concurrency", "-c", min=1, max=MAX_CONCURRENCY,
        help=f"Judge calls in flight at once, exactly, 1 to {MAX_CONCURRENCY} (default: adapt "
             "to the judge endpoint's rate limits).")] = None,
    max_excluded: MaxExcludedOption = DEFAULT_MAX_EXCLUDED,
    shard: ShardOption = None,
    server_errors: ServerErrorsOption = "exclude",
    traces: Annotated[Path | None, typer.Option(
        "--traces", help="Instead of --responses: an OTLP JSON trace export (GenAI or "
                         "OpenInference spans), one trace an attempt (docs/traces.md).")] = None,
    case_attribute: Annotated[str, typer.Option(
        "--case-attribute", callback=not_blank,
        help="With --traces: the span attribute naming a trace's case (else its first user "
             "message finds it).")] = "callgate.case_id",
    faults: Annotated[Path | None, typer.Option(
        "--faults", help="The fault plan the answers were recorded under (docs/faults.md).")
    ] = None,
    production: Annotated[bool, typer.Option(
        "--production", help="With --traces and --agent: production traces, no cases: check "
                             "every call against the tools offered and the policies, store "
                             "the figures for `history --production` (docs/traces.md).")
    ] = False,
) -> None:
    """Score recorded responses (or traces) against a suite, store everything and print the
    figures.

    Exit 3 when more than --max-excluded of the attempts were excluded
    (truncated, provider, environment, judge or target errors; server errors only
    without --server-errors count)."""
    from callgate.report.console import print_run, run_document
    from callgate.scoring.pipeline import score_file
    from callgate.store.db import Store
    from callgate.suites.shard import parse_shard
    from callgate.suites.suite import load_suite

    if production:
        from callgate.cli.production import refuse_with_production, score_production

        refuse_with_production(responses=responses, judge=judge, shard=shard, faults=faults,
                               answer_kind_judge=answer_kind_judge)
        return score_production(suite_path, traces, db, agent=agent, release=release,
                                model=model, as_json=as_json, claims_judge=claims_judge,
                                judging={"uncalibrated": uncalibrated,
                                         "api_base": judge_api_base,
                                         "api_key_env": judge_api_key_env,
                                         "concurrency": concurrency})
    if model is None or release is None:
        raise _fail("score: give --model MODEL and --release LABEL")
    try:
        only = parse_shard(shard) if shard is not None else None
        if (responses is None) == (traces is None):
            raise _fail("score: give --responses FILE or --traces FILE (one of them)")
        answers = responses if responses is not None else traces
        assert answers is not None
        suite = load_suite(suite_path)
        if faults is not None:  # docs/faults.md
            from callgate.suites.fault_runs import with_fault_plan

            suite = with_fault_plan(suite, faults)
        if not answers.is_file():
            raise _fail(f"{answers}: "
                        + ("is a folder, not a file" if answers.is_dir() else "file not found"))
        with Store(db) as store:
            step = judge_step_for(judge, store, uncalibrated=uncalibrated,
                                  api_base=judge_api_base, api_key_env=judge_api_key_env,
                                  concurrency=concurrency)
            behaviour = behaviour_judges_for(
                answer_kind_judge, claims_judge, store, uncalibrated=uncalibrated,
                api_base=judge_api_base, api_key_env=judge_api_key_env, concurrency=concurrency)
            try:
                if traces is not None:
                    from callgate.scoring.traces import score_traces

                    result = score_traces(suite, traces, store, model=model, release=release,
                                          attribute=case_attribute, keep_verdicts=as_json,
                                          judge=step, shard=only, server_errors=server_errors,
                                          agent=_agent_named(agent, model),
                                          max_excluded=max_excluded, behaviour=behaviour)
                else:
                    result = score_file(suite, answers, store, model=model, release=release,
                                        keep_verdicts=as_json, judge=step, shard=only,
                                        server_errors=server_errors,
                                        agent=_agent_named(agent, model),
                                        max_excluded=max_excluded, behaviour=behaviour)
            finally:
                judge_pacing = step.model.pacing() if step and step.model else None
                print_judge_pacing(judge_pacing)
    except CallgateError as exc:
        raise _fail(str(exc)) from None
    if as_json:
        document = run_document(result)
        if judge_pacing is not None:  # what limited the judge's calls, as live.pacing a run's
            document["judge_pacing"] = judge_pacing
        json.dump(document, sys.stdout, indent=2, sort_keys=True)
        sys.stdout.write("\n")
    else:
        print_run(result)
        Console().print(f"stored as run {result.run_id} in {db}")
    _exit_if_not_a_result(result.not_a_result)


def _given_not_blank(value: str | None) -> str | None:
    return None if value is None else not_blank(value)


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


def demo(
    db: DbOption = Path("callgate.db"),
) -> None:
    """Score the bundled example (two releases of an example agent) with no key and no network."""
    from callgate.cli.demo import run_demo

    try:
        run_demo(db, Console())
    except CallgateError as exc:
        raise _fail(str(exc)) from None


def merge(
    stores: Annotated[list[Path], typer.Argument(
        metavar="[OUT.db] IN.db...", help="The new store to make, then the stores to merge "
                                          "into it (with --into: only the stores to merge).")],
    into: Annotated[Path | None, typer.Option(
        "--into", help="Merge into this existing store instead of making a new one.")] = None,
) -> None:
    """Merge stores, e.g. the stores of the shards of a run (`--shard K/N`), into one.

    Copies suites, runs, responses, verdicts, judge verdicts and outputs, calibration items,
    certificates, people's labels and production samples; the shards of a release become one
    release, scored again from its verdicts (attack, judged and recovery figures combined as
    one run would have them; perturbed runs per perturbation). Merging a store twice changes
    nothing. Refused (exit 2, nothing written) when two stores scored one attempt differently,
    or ran one release differently: other suites, judges, callgate versions, numbers of
    shards, models or parameters, tool surfaces, simulated users, attacks, --server-errors,
    --faults plans, answers from `run` in some shards and `score` in others, or --perturb in
    some shards only."""
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

