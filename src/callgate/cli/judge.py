"""`callgate judge`: show, calibrate, label, audit and plan a frozen LLM judge."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console

from callgate.errors import CallgateError
from callgate.running.limits import MAX_CONCURRENCY

if TYPE_CHECKING:  # the stages are imported inside the commands, so that --help stays fast
    from callgate.judging.certificates import Certificate, Disagreement
    from callgate.judging.estimates import Estimand
    from callgate.store.db import Store

from callgate.cli.common import (
    SQLITE_INT_MAX,
    ApiBaseOption,
    ApiKeyEnvOption,
    DbOption,
    _fail,
    check_output,
    print_judge_pacing,
)


def _width(value: float) -> float:
    """--width is a half-width in points: above 0 (0 needs infinitely many labels) and at most
    100; nan and inf are not widths."""
    if not (math.isfinite(value) and 0 < value <= 100):
        raise typer.BadParameter(f"{value:g} is not a width in points (above 0, at most 100)")
    return value


judge_app = typer.Typer(help="A frozen LLM judge: show, calibrate, label, audit, plan.",
                        no_args_is_help=True)


@judge_app.command("show")
def judge_show(
    spec: Annotated[Path, typer.Argument(
        help="Judge spec, e.g. judges/tool_choice.toml, or a bundled judge's name: tool_choice.")],
    db: DbOption = Path("callgate.db"),
    api_base: ApiBaseOption = None,
    api_key_env: ApiKeyEnvOption = None,
) -> None:
    """Print a judge's fingerprint and whether a certificate exists for it."""
    from callgate.judging.bundled import judge_spec
    from callgate.judging.certificates import require_certificate
    from callgate.judging.judge import load_judge
    from callgate.judging.step import at_endpoint
    from callgate.store.db import Store
    from callgate.store.opening import StoreError

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
    from callgate.judging.audit_text import certificate_plan_lines
    from callgate.judging.certificates import Certificate

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
    concurrency: Annotated[int | None, typer.Option(
        "--concurrency", min=1, max=MAX_CONCURRENCY,
        help=f"Judge calls in flight at once, exactly, 1 to {MAX_CONCURRENCY}. Default: "
             "adapts to the judge endpoint's rate limits, as run does.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the certificate as JSON.")
                       ] = False,
    db: DbOption = Path("callgate.db"),
    api_base: ApiBaseOption = None,
    api_key_env: ApiKeyEnvOption = None,
) -> None:
    """Run the judge on every hand-checked item and certify it if the thresholds hold.

    Exit 0 certified, 1 not certified, 2 bad input."""
    import asyncio

    from callgate.judging.bundled import calibration_set as bundled_set
    from callgate.judging.bundled import judge_spec
    from callgate.judging.calibration import calibrate
    from callgate.judging.calibration_set import read_journal, read_set
    from callgate.judging.judge import JudgeModel, load_judge
    from callgate.judging.step import at_endpoint
    from callgate.models.routes import api_key
    from callgate.report.console import print_calibration
    from callgate.store.db import Store

    model: JudgeModel | None = None

    async def go(store: Store, set_path: Path
                 ) -> tuple[Certificate, list[Disagreement], int]:
        nonlocal model
        model = JudgeModel(judge, os.environ, concurrency=concurrency)
        progress, calls_due = _judge_progress(judge, set_path, store)
        if calls_due:
            api_key(model.route, os.environ)  # a missing key fails here, before a bar is drawn
        task = progress.add_task(f"judge {judge.spec.name}", total=calls_due)

        async def complete(messages: list[dict[str, Any]]) -> str | None:
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
        unsettled = read_journal(set_path).conflicts
        if unsettled:
            typer.echo(f"note: {len(unsettled)} item(s) of {set_path} left out: people "
                       f"disagree on them and no one has adjudicated ({', '.join(unsettled[:5])}"
                       f"{', ...' if len(unsettled) > 5 else ''}); settle them on callgate "
                       "serve's progress page", err=True)
        # Where the certificate goes, too: a folder there failed after the store had its row.
        check_output("certificate", judge.certificate_path, store=db,
                     inputs=(set_path, judge.spec_path))
        with Store(db) as store:
            certificate, disagreements, judged = asyncio.run(go(store, set_path))
    except CallgateError as exc:
        raise _fail(str(exc)) from None
    finally:
        print_judge_pacing(model.pacing() if model is not None else None)
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

    from callgate.judging.calibration_set import item_payloads, read_set
    from callgate.judging.step import JudgeCache

    items, _ = read_set(set_path)
    cache = JudgeCache(store, judge.fingerprint)
    keys = [cache.key(item_payloads(item)) for item in items]
    due = len(keys) - len(cache.get(keys))
    progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                        TextColumn("judge calls"), TimeElapsedColumn(), TimeRemainingColumn(),
                        console=Console(stderr=True), disable=due == 0)
    return progress, due * judge.spec.parameters.samples


@judge_app.command("label")
def judge_label(
    run_id: Annotated[int | None, typer.Argument(
        metavar="RUN", min=1, max=SQLITE_INT_MAX, help="Run id (see callgate score).")] = None,
    calibration_set: Annotated[Path | None, typer.Option(
        "--set", help="Calibration file the new items are appended to.")] = None,
    split: Annotated[str, typer.Option(
        "--split", help="Split of the new items: dev (default) or test.")] = "dev",
    audit: Annotated[int | None, typer.Option(
        "--audit", metavar="RUN", min=1, max=SQLITE_INT_MAX,
        help="Label the audit sample of this run instead (see callgate judge audit); the "
             "judge's verdict is hidden.")
    ] = None,
    labeller: Annotated[str | None, typer.Option(
        "--labeller", envvar="CALLGATE_LABELLER",
        help="Who gives the labels (default: $USER); stored with each audit label.")] = None,
    db: DbOption = Path("callgate.db"),
) -> None:
    """Label a run's judged attempts by hand, growing the hand-checked set.

    For each attempt the judge decided, shows the request and the response and asks for your
    verdict: tool_choice, then arguments, then a note (s skips, q stops). The judge's verdict
    is shown once you have answered, so that your label does not lean on it."""
    from callgate.judging.labelling import AnswersEnded, label_judged_attempts
    from callgate.store.db import Store

    if audit is not None:
        _label_audit(audit, labeller or os.environ.get("USER", ""), db)
        return
    if run_id is None or calibration_set is None:
        raise _fail("give RUN and --set FILE, or --audit RUN")
    if split not in ("dev", "test"):
        raise _fail(f"--split must be dev or test, not {split!r}")
    check_output("--set", calibration_set, store=db)
    if not db.exists():
        raise _fail(f"{db}: no such database")
    try:
        with Store(db) as store:
            added = label_judged_attempts(store, run_id, calibration_set, split,
                                          ask=_ask_until_the_answers_end, show=typer.echo,
                                          labeller=labeller or os.environ.get("USER", ""))
    except AnswersEnded as exc:
        raise _fail(f"stdin: {exc}") from None
    except CallgateError as exc:
        raise _fail(str(exc)) from None
    typer.echo(f"added {added} item(s) to {calibration_set} and to {db}")


def _ask_until_the_answers_end(text: str, **options: Any) -> str:
    """typer.prompt, except that the end of piped answers is AnswersEnded (exit 2, the labels
    kept), not an interruption (130); Ctrl-C at a terminal still interrupts."""
    import sys

    from callgate.judging.labelling import AnswersEnded

    try:
        return str(typer.prompt(text, **options))
    except typer.Abort:
        if sys.stdin.isatty():
            raise
        raise AnswersEnded("the answers ended") from None


def _label_audit(run_id: int, labeller: str, db: Path) -> None:
    from callgate.judging.audit_sample import label_audit
    from callgate.judging.labelling import AnswersEnded
    from callgate.store.db import Store

    if not db.exists():
        raise _fail(f"{db}: no such database")
    try:
        with Store(db) as store:
            done = label_audit(store, run_id, labeller, ask=_ask_until_the_answers_end,
                               show=typer.echo)
            skipped = sum(1 for i in store.audit_items(run_id) if i["skip_reason"])
    except AnswersEnded as exc:
        raise _fail(f"stdin: {exc}") from None
    except CallgateError as exc:
        raise _fail(str(exc)) from None
    note = f"; {skipped} skipped (the audit is incomplete until they are labelled)" if (
        skipped) else ""
    typer.echo(f"labelled {done} audit item(s) of run {run_id} as {labeller}{note}; "
               f"see: callgate judge audit {run_id}")


@judge_app.command("audit")
def judge_audit(
    run_id: Annotated[int, typer.Argument(metavar="RUN", min=1, max=SQLITE_INT_MAX,
                                          help="Run id (see callgate score).")],
    n: Annotated[int | None, typer.Option(
        "--n", min=1, help="Audit size: draw a uniform random sample of this many judged "
                           "attempts, or grow the audit to it (default 40 for a new audit).")
    ] = None,
    seed: Annotated[int | None, typer.Option(
        "--seed", min=-SQLITE_INT_MAX - 1, max=SQLITE_INT_MAX,
        help="Seed of the sample (default: a random one, stored).")] = None,
    width: Annotated[float, typer.Option(
        "--width", callback=_width, help="Also say how many labels give a PPI interval of "
                                         "±WIDTH points (above 0, at most 100).")
    ] = 2.0,
    estimand: Annotated[str, typer.Option(
        "--estimand", help="What the PPI++ intervals are about: release (this release's "
                           "attempts, finite-population corrected: a full audit leaves no "
                           "judged uncertainty; what the gate uses) or agent (the agent's "
                           "rate, repeats of a case clustered).")] = "release",
    as_json: Annotated[bool, typer.Option("--json", help="Print the estimates and the drawn "
                                                         "items as JSON.")] = False,
    db: DbOption = Path("callgate.db"),
) -> None:
    """Audit a run's judged attempts: a seeded sample for a person to label, and estimates.

    Draws a uniform random sample (label it with callgate judge label --audit RUN) and reports
    the judged shares three ways: raw, Rogan–Gladen corrected, and prediction-powered (PPI++)
    from the labels so far."""
    from callgate.judging.audit import audit_report
    from callgate.judging.audit_sample import draw_audit
    from callgate.judging.audit_text import audit_lines
    from callgate.store.db import Store

    about = _estimand(estimand)
    if not db.exists():
        raise _fail(f"{db}: no such database")
    try:
        with Store(db) as store:
            existing = store.audit(run_id)
            if existing is None or n is not None:
                draw_audit(store, run_id, n or 40, seed)
            elif seed is not None and seed != existing["seed"]:
                draw_audit(store, run_id, len(store.audit_items(run_id)), seed)
            report = audit_report(store, run_id, about)
    except CallgateError as exc:
        raise _fail(str(exc)) from None
    if as_json:
        typer.echo(report.model_dump_json(indent=2))
        return
    for line in audit_lines(report, width / 100):
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
        "--run", metavar="RUN", min=1, max=SQLITE_INT_MAX,
        help="Plan an audit of this run instead.")] = None,
    width: Annotated[float, typer.Option(
        "--width", callback=_width, help="With --run: the PPI interval's half-width to "
                                         "reach, in points (above 0, at most 100).")
    ] = 2.0,
    estimand: Annotated[str, typer.Option(
        "--estimand", help="With --run: release (this release's attempts) or agent (the "
                           "agent's rate); see judge audit.")] = "release",
    db: DbOption = Path("callgate.db"),
) -> None:
    """How many more labels: per dimension and class to certify a judge (SPEC --set FILE), or
    audit labels for a ±WIDTH judged-share interval (--run RUN)."""
    if run_id is not None:
        _plan_run(run_id, width / 100, db, _estimand(estimand))
        return
    if spec is None or calibration_set is None:
        raise _fail("give SPEC --set FILE, or --run RUN")
    if rule not in (None, "point", "wilson"):
        raise _fail(f"--rule must be point or wilson, not {rule!r}")
    for line in _certificate_plan_lines(spec, calibration_set, rule, db):
        typer.echo(line)


def _certificate_plan_lines(spec: Path, calibration_set: Path, rule: str | None, db: Path
                            ) -> list[str]:
    from callgate.judging.audit_text import describe_class_plan, set_confusions
    from callgate.judging.bundled import calibration_set as bundled_set
    from callgate.judging.bundled import judge_spec
    from callgate.judging.judge import load_judge
    from callgate.judging.planning import certificate_plan
    from callgate.store.db import Store

    try:
        judge = load_judge(judge_spec(spec))
        if not db.exists():  # nothing judged yet, and planning never makes a store
            confusions, unjudged, test_items = set_confusions(
                judge, bundled_set(calibration_set), None)
        else:
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


def _estimand(value: str) -> Estimand:
    """--estimand's value, checked."""
    if value == "release":
        return "release"
    if value == "agent":
        return "agent"
    raise _fail(f"--estimand must be release or agent, not {value!r}")


def _plan_run(run_id: int, width: float, db: Path, estimand: Estimand) -> None:
    from callgate.judging.audit import judged_design_effects, width_plan
    from callgate.judging.audit_text import describe_width_plan
    from callgate.judging.certificates import Certificate, dimension_rates
    from callgate.judging.labelling import judged_run
    from callgate.scoring.stored import stored_scores
    from callgate.store.db import Store

    if not db.exists():
        raise _fail(f"{db}: no such database")
    try:
        with Store(db) as store:
            run, _ = judged_run(store, run_id)
            clusterings = judged_design_effects(store, run_id)
            cert_json = (store.certificate(run.judge_fingerprint)
                         if run.judge_fingerprint else None)
            report = None
            if store.audit(run_id) is not None:
                from callgate.judging.audit import audit_report
                report = audit_report(store, run_id, estimand)
    except CallgateError as exc:
        raise _fail(str(exc)) from None
    certificate = Certificate.model_validate_json(cert_json) if cert_json else None
    try:
        scores = stored_scores(run)
        stored = scores.judged if scores is not None else None
    except CallgateError as exc:
        raise _fail(str(exc)) from None
    for dim in ("tool_choice", "arguments"):
        rates = dimension_rates(certificate, dim) if certificate else None
        share = stored.share(dim) if stored is not None else None
        if report is not None:
            d = report.dimensions[dim]
            table, passes, judged, have = d.table, d.judged_passes, d.judged, d.labels
        else:
            judged = share.n if share is not None else 0
            passes = round((share.raw or 0) * judged / 100) if share is not None else 0
            table, have = None, 0
        corrected = share.corrected if share is not None else None
        plan = width_plan(table, passes, judged, width, rates[:2] if rates else None,
                          corrected / 100 if corrected is not None else None,
                          estimand=estimand,
                          clustering=report.dimensions[dim].clustering if report is not None
                          else clusterings.get(dim))
        typer.echo(f"{dim}: {describe_width_plan(plan, have, width)}")
