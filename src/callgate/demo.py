"""`callgate demo`: the whole offline pipeline on the bundled, hand-written example."""

from __future__ import annotations

from importlib.resources import as_file, files
from pathlib import Path

from rich.console import Console

from callgate.gate import case_outcomes, changed_cases
from callgate.pipeline import score_file
from callgate.report import scores_table, tags_table
from callgate.store import Store
from callgate.suite import load_suite

EXAMPLE = "examples/order_support"
MODEL = "example-agent"
RELEASES = ("2026.10", "2026.11")


def example_path() -> Path:
    with as_file(files("callgate") / EXAMPLE) as path:
        return Path(path)


def run_demo(db: Path, console: Console) -> None:
    root = example_path()
    suite = load_suite(root)
    console.print(
        f"[bold]callgate demo[/bold]: suite [cyan]{suite.name}[/cyan] ({len(suite.cases)} cases, "
        f"{len(suite.tools)} tools), two releases of a hand-written example agent.\n"
        "Every response is a hand-written example, not the output of a real model."
    )
    results = []
    with Store(db) as store:
        for release in RELEASES:
            results.append(
                score_file(
                    suite, root / f"responses-{release}.jsonl", store, model=MODEL, release=release
                )
            )
    columns = [(r.release, r.scores) for r in results]
    console.print(scores_table(f"{suite.name}: {MODEL}", columns))
    console.print(tags_table(columns))
    before, after = (case_outcomes(r.verdicts) for r in results)
    worse, better = changed_cases(before, after)
    console.print(
        f"[bold]{len(worse)} case(s) got worse[/bold] from {RELEASES[0]} to "
        f"{RELEASES[1]}; {len(better)} got better."
    )
    for case_id in worse:
        console.print(f"  [red]-[/red] {case_id}: {after[case_id].reason}", highlight=False)
    for case_id in better:
        console.print(f"  [green]+[/green] {case_id}", highlight=False)
    console.print(
        f"Stored in {db}: browse it with any SQLite tool, e.g. "
        f"`sqlite3 {db} 'select * from scores'`."
    )
