"""`callgate demo`: the whole offline pipeline on the bundled, hand-written example."""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from importlib.resources import as_file, files
from pathlib import Path

from rich.console import Console

from callgate.checks.verdict import Verdict
from callgate.cli.common import command_name
from callgate.gating.decision import GateDecision
from callgate.gating.release import gate_release
from callgate.report.console import gate_lines, print_gate, scores_table, tags_table
from callgate.scoring.pipeline import RunResult, score_file
from callgate.store.db import Store
from callgate.suites.suite import Suite, load_suite

EXAMPLE = "examples/order_support"
MULTI_TURN_EXAMPLE = "examples/order_store"
MODEL = "example-agent"
RELEASES = ("2026.10", "2026.11")
POLICY_RELEASE = "2026.12"  # 2026.10's answers, one of them breaking the suite's policy


def example_path(example: str = EXAMPLE) -> Path:
    with as_file(files("callgate") / example) as path:
        return Path(path)


def run_demo(db: Path, console: Console) -> None:
    root = example_path()
    suite = load_suite(root)
    console.print(
        f"[bold]callgate demo[/bold]: suite [cyan]{suite.name}[/cyan] ({len(suite.cases)} cases, "
        f"{len(suite.tools)} tools), two releases of a hand-written example agent.\n"
        "Every response is a hand-written example, not the output of a real model."
    )
    results, decision = _score_both_releases(suite, root, db)
    columns = [(r.release, r.scores) for r in results]
    console.print(scores_table(f"{suite.name}: {MODEL}", columns))
    console.print(tags_table(columns))
    command = command_name()
    console.print(f"\n[bold]The gate[/bold]: `{command} gate --model {MODEL} --release "
                  f"{RELEASES[1]} --db {db}` decides:")
    print_gate(decision, console)
    console.print(f"\n(`callgate gate` would exit {decision.exit_code}.) Stored in {db}: browse "
                  f"it with any SQLite tool, e.g. `sqlite3 {db} 'select * from scores'`.",
                  highlight=False)
    run_policy_demo(suite, root, console)
    run_multi_turn_demo(db, console)
    console.print(f"\nTo look at what it stored (the chart, each attempt, calibration sessions): "
                  f"run `{command} serve --db {db}` and open http://127.0.0.1:8765/",
                  highlight=False, markup=False, soft_wrap=True)


def run_policy_demo(suite: Suite, root: Path, console: Console) -> None:
    """A release whose shares held and that breaks the suite's policy (docs/policies.md): its
    gate fails. Scored in a scratch store, so the demo's store keeps its two releases."""
    console.print(
        f"\n[bold]A policy[/bold]: {suite.name}'s suite.json forbids a card number in an "
        f"escalation summary. Release {POLICY_RELEASE} answers as {RELEASES[0]} did, but one "
        "summary quotes the customer's card: the call is right, the policy is broken.")
    with tempfile.TemporaryDirectory(prefix="callgate-demo-") as scratch, \
            Store(Path(scratch) / "policy.db") as store:
        for release in (RELEASES[0], POLICY_RELEASE):
            score_file(suite, root / f"responses-{release}.jsonl", store, model=MODEL,
                       release=release)
            decision, _ = gate_release(store, MODEL, release, suite=suite.name)
    print_gate(decision, console)


def run_multi_turn_demo(db: Path, console: Console) -> None:
    """The order_store example: trajectories and final states over several turns."""
    root = example_path(MULTI_TURN_EXAMPLE)
    suite = load_suite(root)
    console.print(
        f"\n[bold]Several calls and several turns[/bold]: suite [cyan]{suite.name}[/cyan] "
        f"({len(suite.cases)} multi-turn cases run against {suite.environment_spec}), the same "
        "two releases. Tool results are recomputed by running the calls on the environment."
    )
    results, decision = _score_both_releases(suite, root, db)
    console.print(scores_table(f"{suite.name}: {MODEL}", [(r.release, r.scores) for r in results]))
    console.print("[bold]cases that changed[/bold] (right attempts per release; the first "
                  "failure):")
    kinds = {case_id: case.expect.type for case_id, case in suite.cases.items()}
    for line in _changed_cases(results, kinds):
        console.print(f"  {line}", highlight=False, markup=False)
    console.print(f"The gate on {suite.name}: {gate_lines(decision)[0]}", highlight=False,
                  markup=False)


def _score_both_releases(suite: Suite, root: Path, db: Path
                         ) -> tuple[list[RunResult], GateDecision]:
    """Score the example's two recorded releases and gate each as CI would, so the store
    records the decisions (`callgate history` and `serve` show them): the first is the first
    release, the second is gated against it."""
    with Store(db) as store:
        results = []
        for release in RELEASES:
            results.append(score_file(suite, root / f"responses-{release}.jsonl", store,
                                      model=MODEL, release=release))
            decision, _ = gate_release(store, MODEL, release, suite=suite.name)
    return results, decision


def _changed_cases(results: list[RunResult], kinds: Mapping[str, str]) -> list[str]:
    """One line per case whose number of right attempts changed, with a failure to explain it."""
    (old_release, before), (new_release, after) = (
        (r.release, _by_case(r.verdicts)) for r in results
    )
    lines = []
    for case_id, old in before.items():
        new = after.get(case_id, [])
        if _right(old) == _right(new):
            continue
        line = f"{case_id} ({kinds[case_id]}) {_right(old)}/{len(old)} → {_right(new)}/{len(new)}"
        for release, verdicts in ((new_release, new), (old_release, old)):
            failing = next((v for v in verdicts if not v.right_arguments), None)
            if failing is not None:
                verdict = failing.tool if not failing.right_tool else failing.arguments
                line += f": {release} #{failing.repeat} {verdict}: {failing.reason}"
                break
        lines.append(line)
    return lines


def _by_case(verdicts: list[Verdict]) -> dict[str, list[Verdict]]:
    found: dict[str, list[Verdict]] = {}
    for verdict in verdicts:
        found.setdefault(verdict.case_id, []).append(verdict)
    return found


def _right(verdicts: list[Verdict]) -> int:
    return sum(v.status == "scored" and v.right_arguments for v in verdicts)
