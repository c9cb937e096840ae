"""`callgate run`: call a model (or the agent under test, `--target`) on every case and repeat,
then check, score and store as `callgate score` does (registered on the app in cli/main.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

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
    UserJudgeOption,
    _agent_named,
    _exit_if_not_a_result,
    _fail,
    behaviour_judges_for,
    judge_step_for,
    not_blank,
    print_judge_pacing,
    user_judge_for,
)
from callgate.errors import CallgateError
from callgate.running.limits import MAX_CONCURRENCY, MAX_REPEATS
from callgate.scoring.exclusion import DEFAULT_MAX_EXCLUDED


def run_command(
    suite_path: Annotated[Path, typer.Argument(metavar="SUITE", help="Suite directory.")],
    model: Annotated[
        str | None,
        typer.Option(
            "--model", "-m", callback=_blank_refused,
            help="A candidate's name in the config, or a litellm model id (with --target: "
                 "the model the agent runs on, recorded; default: the target)."
        ),
    ] = None,
    target: Annotated[
        str | None,
        typer.Option(
            "--target", callback=_blank_refused,
            help="The agent under test instead of a model: python:pkg.module:function, "
                 "http://host/path or cmd:\"command args\" (docs/targets.md)."
        ),
    ] = None,
    target_version: Annotated[
        str | None,
        typer.Option(
            "--target-version", callback=_blank_refused,
            help="The target's version for the cache (default: the one it reports).",
        ),
    ] = None,
    repeats: Annotated[int, typer.Option(
        "--repeats", "-k",
        help=f"Attempts per case, 1 to {MAX_REPEATS}: pass^k is reported up to k = 8, and "
             f"at {MAX_REPEATS} a case's pass rate is known within 10 points; more repeats "
             "only cost calls (add cases instead).")] = 3,
    concurrency: Annotated[int | None, typer.Option(
        "--concurrency", "-c", help=f"Requests in flight at once, exactly, 1 to "
        f"{MAX_CONCURRENCY} (default: adapt to the provider's rate limits).")
    ] = None,
    release: Annotated[
        str, typer.Option("--release", callback=not_blank,
                          help="Release label; a run with the same label is replaced.")
    ] = "dev",
    agent: AgentOption = None,
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
    max_cost: Annotated[
        float | None,
        typer.Option("--max-cost",
                     help="USD: start no attempt that would take this run's spend past it."),
    ] = None,
    max_attempts: Annotated[
        int | None,
        typer.Option("--max-attempts", min=1,
                     help="Call at most this many attempts (stored answers do not count)."),
    ] = None,
    estimate: Annotated[
        bool,
        typer.Option("--estimate", help="Print what the run would call and cost; call nothing."),
    ] = False,
    judge: JudgeOption = None,
    answer_kind_judge: AnswerKindJudgeOption = None,
    claims_judge: ClaimsJudgeOption = None,
    uncalibrated: UncalibratedOption = False,
    judge_api_base: JudgeApiBaseOption = None,
    judge_api_key_env: JudgeKeyEnvOption = None,
    max_excluded: MaxExcludedOption = DEFAULT_MAX_EXCLUDED,
    shard: ShardOption = None,
    server_errors: ServerErrorsOption = "exclude",
    until_decided: Annotated[bool | None, typer.Option(
        "--until-decided/--fixed-repeats",
        help="After the first round, re-ask only the cases that decide the gate against the "
             "release's baseline, until the paired test is sure or --max-rounds end; exit 0 "
             "pass, 1 regression, 3 cannot tell (docs/noise.md). Default: [gate] adaptive.")
    ] = None,
    max_rounds: Annotated[int | None, typer.Option(
        "--max-rounds", min=1, max=50,
        help="With --until-decided: rounds at most, the first included (default: [gate] "
             "max_rounds, else 3).")] = None,
    max_drop: Annotated[float, typer.Option(
        "--max-drop", min=0.0, help="With --until-decided: the allowed drop in points.")] = 2.0,
    faults: Annotated[Path | None, typer.Option(
        "--faults", help="A fault plan (JSON): chosen calls of chosen tools fail on their way "
                         "to the agent, seeded (docs/faults.md).")] = None,
    user: Annotated[Path | None, typer.Option(
        "--user", help="A simulated user's spec (e.g. users/default.toml, or a name: default, "
                       "the one callgate ships): it writes the user turns of cases with a "
                       "scenario (docs/simulated-user.md).")] = None,
    user_judge: UserJudgeOption = None,
    perturb: Annotated[list[str] | None, typer.Option(
        "--perturb", help="Run the same cases again with the tool surface worded another way, "
        "paired with the clean run: mask-names, rename=FILE, paraphrase=FILE, reorder-params, "
        "reorder-tools, distractor, prompt-format[=markdown|xml|plain|json]; repeatable "
        "(docs/robustness.md).")] = None,
    perturb_seed: Annotated[int, typer.Option(
        "--perturb-seed", min=0, help="The seed of the perturbations' draws.")] = 0,
    robustness_max_drop: Annotated[float | None, typer.Option(
        "--robustness-max-drop", min=0.0,
        help="With --perturb: exit 1 when the robustness figure is more than this many points "
             "below the baseline release's (default: [gate] robustness_max_drop; unset: not "
             "gated).")] = None,
    attack: Annotated[Path | None, typer.Option(
        "--attack", help="Attack file: inject its templates into the marked tool results and "
                         "report attack success per template (docs/attacks.md).")] = None,
    clean_release: Annotated[str | None, typer.Option(
        "--clean-release", help="With --attack: the stored clean run (same suite) whose right "
                                "arguments on the attacked cases are shown beside the utility "
                                "under attack.")] = None,
    clean_agent: Annotated[str | None, typer.Option(
        "--clean-agent", help="With --clean-release: the clean run's agent (default: --agent, "
                              "else the model).")] = None,
) -> None:
    """Call a model, or the agent under test (--target), on every case (repeats × cases), then
    check, score and store as `score` does.

    Exit 3 when more than --max-excluded of the attempts were excluded
    (truncated, provider, environment, judge or target errors; server errors only without
    --server-errors count).

    Answers are stored as they arrive: run the same command again to resume, or to re-score
    with zero calls.
    """
    from callgate.cli.until_decided import until_decided as decide_adaptively
    from callgate.gating.quarantine import gate_settings
    from callgate.models.config import DEFAULT_CONFIG
    from callgate.models.flags import CandidateFlags, candidate_for
    from callgate.models.retry import RetryPolicy
    from callgate.models.simulated_user import load_user
    from callgate.running.run import LiveRun, run_live
    from callgate.running.settings import RunSettings
    from callgate.store.db import Store
    from callgate.suites.shard import parse_shard
    from callgate.suites.suite import load_suite

    err = Console(stderr=True)
    _check_counts(repeats, concurrency)
    if max_cost is not None and not max_cost > 0:
        raise _fail(f"--max-cost {max_cost}: give a budget above 0 USD")
    try:
        only = parse_shard(shard) if shard is not None else None
        suite = load_suite(suite_path)
        attacked = None
        if attack is not None:
            from callgate.cli.attacks import attacked_suite

            suite, attacked = attacked_suite(suite, attack)
        if faults is not None:  # docs/faults.md
            from callgate.suites.fault_runs import with_fault_plan

            suite = with_fault_plan(suite, faults)
        flags = CandidateFlags(
            model=model, target=target, target_version=target_version, config=config,
            api_base=api_base, api_key_env=api_key_env, reasoning_effort=reasoning_effort,
            provider_order=provider_order, allow_fallbacks=allow_fallbacks,
            require_parameters=require_parameters, params=params or [], client=client)
        candidate = candidate_for(flags)
        simulated = load_user(user) if user is not None else None
        if agent is not None:
            candidate = candidate.model_copy(update={"name": _agent_named(agent, None)})
        settings = RunSettings(
            repeats=repeats,
            concurrency=concurrency,
            timeout=timeout,
            cache=not no_cache,
            offline=offline,
            retry=RetryPolicy(max_retries=max_retries, budget=retry_budget),
            shard=only,
            server_errors=server_errors,
            max_excluded=max_excluded,
            max_cost=max_cost,
            max_attempts=max_attempts,
        )
        specs: list[Any] = []
        if perturb:  # its modules only for a run that perturbs (they cost an import)
            from callgate.cli.perturbing import run_perturbed, specs_of

            specs = specs_of(perturb, perturb_seed)
        _perturb_alone(bool(specs), target=target, estimate=estimate,
                       until_decided=until_decided)
        if estimate:
            _print_estimate(suite, candidate, settings, db, as_json, specs)
            return
        gate = gate_settings(flags.config_path or DEFAULT_CONFIG)
        adaptive = perturbed = None
        with Store(db) as store:
            clean = _clean_run(store, suite, attacked, clean_release,
                               clean_agent, candidate.name)
            step = judge_step_for(judge, store, uncalibrated=uncalibrated,
                                  api_base=judge_api_base, api_key_env=judge_api_key_env,
                                  concurrency=concurrency)
            behaviour = behaviour_judges_for(
                answer_kind_judge, claims_judge, store, uncalibrated=uncalibrated,
                api_base=judge_api_base, api_key_env=judge_api_key_env, concurrency=concurrency)
            fidelity = user_judge_for(
                user_judge, user, store, uncalibrated=uncalibrated, api_base=judge_api_base,
                api_key_env=judge_api_key_env, concurrency=concurrency)

            def run_once(with_settings: RunSettings) -> LiveRun:
                return run_live(suite, candidate, store, release=release,
                                settings=with_settings,
                                keep_verdicts=as_json or attacked is not None, judge=step,
                                user=simulated, behaviour=behaviour,
                                user_judge=fidelity)

            if specs:
                perturbed = run_perturbed(
                    store, suite, candidate.name, release, settings, specs,
                    lambda on, with_settings: run_live(
                        on, candidate, store, release=release, settings=with_settings,
                        keep_verdicts=as_json or attacked is not None, judge=step,
                        user=simulated, behaviour=behaviour, user_judge=fidelity),
                    max_drop=(robustness_max_drop if robustness_max_drop is not None
                              else gate.robustness_max_drop), max_excluded=max_excluded)
                live = perturbed.clean
            elif until_decided if until_decided is not None else gate.adaptive:
                adaptive = decide_adaptively(
                    store, suite, candidate.name, release, settings, run_once,
                    margin=max_drop, max_rounds=max_rounds or gate.max_rounds,
                    max_excluded=max_excluded)
                live = adaptive.live
            else:
                live = run_once(settings)
            figures = None
            if attacked is not None:
                from callgate.cli.attacks import attack_result

                figures = attack_result(suite, attacked, live, store, clean)
    except CallgateError as exc:
        raise _fail(str(exc)) from None
    except KeyboardInterrupt:
        err.print(
            "interrupted: answers received so far are saved. "
            "Run the same command again to resume."
        )
        raise typer.Exit(130) from None
    _report_live(live, adaptive, bool(candidate.target), db, as_json, perturbed, figures)


def _perturb_alone(asked: bool, *, target: str | None, estimate: bool,
                   until_decided: bool | None) -> None:
    """--perturb runs a model on the suite's own tools, with fixed repeats (for now)."""
    if not asked:
        return
    for given, flag in ((target is not None, "--target"),
                        (bool(until_decided), "--until-decided")):
        if given:
            raise CallgateError(f"--perturb cannot go with {flag} yet (docs/robustness.md)")


def _clean_run(store: Any, suite: Any, attacked: Any, release: str | None,
               agent: str | None, default_agent: str) -> list[tuple[str, bool]] | None:
    """The clean run's attempts for --clean-release, read before anything is asked."""
    if release is None:
        if agent is not None:
            raise _fail("--clean-agent names the clean run's agent: give --clean-release too")
        return None
    if attacked is None:
        raise _fail("--clean-release pairs an attacked run with its clean run: give --attack")
    from callgate.cli.attacks import clean_attempts

    return clean_attempts(store, suite, agent or default_agent, release)


def _live_document(live: Any, adaptive: Any, perturbed: Any, attack: Any) -> dict[str, Any]:
    """What `run --json` adds to the scores' document: the run's own figures, and those of
    --until-decided, --perturb and --attack when given."""
    document: dict[str, Any] = {"live": live.summary()}
    if adaptive is not None:
        document["until_decided"] = adaptive.document()
    if perturbed is not None:
        document["perturbations"] = perturbed.summary()
        document["robustness"] = (perturbed.robustness.model_dump(mode="json")
                                  if perturbed.robustness is not None else None)
    if attack is not None:
        document["attack"] = attack.model_dump(mode="json")
    return document


def _report_live(live: Any, adaptive: Any, target: bool, db: Path, as_json: bool,
                 perturbed: Any = None, attack: Any = None) -> None:
    """What `run` prints once the run is over (a LiveRun), and the exit code it ends with."""
    from callgate.report.console import print_run, run_document

    err = Console(stderr=True)
    if perturbed is not None and perturbed.robustness is None and perturbed.runs:
        live = perturbed.runs[-1][1]  # the perturbed run that ended early says why
    result = live.result
    print_judge_pacing(live.judge_pacing)
    if as_json:
        document = run_document(result)
        document.update(_live_document(live, adaptive, perturbed, attack))
        json.dump(document, sys.stdout, indent=2, sort_keys=True)
        sys.stdout.write("\n")
    else:
        print_run(result)
        Console().print(
            f"{live.called} attempt(s) called, {live.cached} from the store, "
            f"{live.retries} retries, {live.provider_errors} "
            f"{'target' if target else 'provider'} error(s); "
            f"stored as run {result.run_id} in {db}",
            highlight=False,
        )
        if perturbed is not None:
            _print_perturbed(perturbed)
        if attack is not None:
            from callgate.cli.attacks import attack_lines

            for line in attack_lines(attack):
                Console().print(line, highlight=False, soft_wrap=True)
    if live.budget:
        err.print(f"[yellow]budget:[/yellow] {live.budget}. The answers are stored; run the "
                  "same command again (with a larger budget) to resume.", highlight=False)
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
    _exit_if_not_a_result(result.not_a_result)
    if perturbed is not None and perturbed.robustness is not None:
        raise typer.Exit(perturbed.robustness.exit_code)
    if adaptive is not None:
        if not as_json:
            for index, text in enumerate(adaptive.lines()):
                Console().print(("" if index == 0 else "  ") + text, highlight=False,
                                soft_wrap=True)
        raise typer.Exit(adaptive.exit_code)


def _print_perturbed(perturbed: Any) -> None:
    """`run --perturb`'s runs, one line each, then the robustness figures."""
    out = Console()
    for item in perturbed.summary():
        label = item["kind"] + (f" ({item['detail']})" if item["detail"] else "")
        out.print(f"{label}: {item['called']} attempt(s) called, {item['cached']} from the "
                  f"store; stored as run {item['run_id']}", highlight=False)
    for text in perturbed.robustness.lines() if perturbed.robustness is not None else ():
        out.print(text, highlight=False, soft_wrap=True)


def _print_estimate(suite: Any, candidate: Any, settings: Any, db: Path, as_json: bool,
                    specs: list[Any]) -> None:
    """`run --estimate`: the run's plan read against the store, priced offline; no call.
    With --perturb: the clean run and each variant's run, in one estimate."""
    from callgate.running.estimate import estimate_run
    from callgate.store.db import Store

    with Store(db) as store:
        if specs:
            from callgate.cli.perturbing import estimate_perturbed

            found = estimate_perturbed(store, suite, candidate, settings, specs)
        else:
            found = estimate_run(suite, candidate, store, settings)
    if as_json:
        json.dump(found.model_dump(mode="json"), sys.stdout, indent=2, sort_keys=True)
        sys.stdout.write("\n")
    else:
        Console().print(found.text(), highlight=False)


def _blank_refused(value: str | None) -> str | None:
    return None if value is None else not_blank(value)


def _check_counts(repeats: int, concurrency: int | None) -> None:
    """Refuse, before anything is read or called, a count that is surely a typo."""
    if repeats < 1:
        raise _fail(f"--repeats {repeats}: give at least 1 attempt per case")
    if repeats > MAX_REPEATS:
        raise _fail(f"--repeats {repeats}: at most {MAX_REPEATS} attempts per case; each repeat "
                    f"is one more paid call per case, and past {MAX_REPEATS} they add nothing "
                    "the figures use (add cases instead)")
    if concurrency is not None and not 1 <= concurrency <= MAX_CONCURRENCY:
        raise _fail(f"--concurrency {concurrency}: give 1 to {MAX_CONCURRENCY} requests in "
                    "flight at once")
