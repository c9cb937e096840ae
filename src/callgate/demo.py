"""`callgate demo`: the whole offline pipeline on the bundled, hand-written example."""

from __future__ import annotations

from importlib.resources import as_file, files
from pathlib import Path

from rich.console import Console

from callgate.gate import decide, stored_release
from callgate.pipeline import score_file
from callgate.report import print_gate, scores_table, tags_table
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
    with Store(db) as store:
        results = [
            score_file(suite, root / f"responses-{release}.jsonl", store, model=MODEL,
                       release=release, keep_verdicts=False)
            for release in RELEASES
        ]
        columns = [(r.release, r.scores) for r in results]
        console.print(scores_table(f"{suite.name}: {MODEL}", columns))
        console.print(tags_table(columns))
        baseline, current = (stored_release(store, store.run(r.run_id)) for r in results)
    decision = decide(current, baseline, baseline_source=f"store {db}")
    console.print(f"\n[bold]The gate[/bold]: `callgate gate --model {MODEL} --release "
                  f"{RELEASES[1]} --db {db}` decides:")
    print_gate(decision, console)
    console.print(f"\n(`callgate gate` would exit {decision.exit_code}.) Stored in {db}: browse "
                  f"it with any SQLite tool, e.g. `sqlite3 {db} 'select * from scores'`.",
                  highlight=False)
