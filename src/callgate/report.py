"""Stage 6, the report: tables for people and JSON documents for machines."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

from callgate.pipeline import RunResult
from callgate.scores import Figures, Scores, Share


def pct(share: Share) -> str:
    if share.pct is None:
        return "–"
    return f"{share.pct:5.1f}  [{share.low:4.1f}–{share.high:5.1f}]"


def _num(value: float | None, fmt: str = "{:.2f}") -> str:
    return "–" if value is None else fmt.format(value)


def figures_row(fig: Figures) -> list[str]:
    return [
        pct(fig.right_tool),
        pct(fig.right_arguments),
        _num(fig.calls_per_task),
        str(fig.scored),
    ]


def run_document(result: RunResult) -> dict[str, Any]:
    """The `--json` document: figures plus every attempt's verdicts and reasons."""
    return {
        "suite": {
            "name": result.suite.name,
            "fingerprint": result.suite.fingerprint,
            "cases": len(result.suite.cases),
        },
        "model": result.model,
        "release": result.release,
        "run_id": result.run_id,
        "scores": result.scores.model_dump(mode="json"),
        "missing_cases": result.missing,
        "attempts": [v.model_dump(mode="json") for v in result.verdicts],
    }


def scores_table(title: str, columns: Sequence[tuple[str, Scores]]) -> Table:
    """Figures side by side, one column per (label, scores)."""
    table = Table(title=title, title_justify="left", show_lines=False)
    table.add_column("figure", style="bold")
    for label, _ in columns:
        table.add_column(label, justify="right")
    rows: list[tuple[str, list[str]]] = [
        ("right tool % [95% CI]", [pct(s.figures.right_tool) for _, s in columns]),
        ("right arguments % [95% CI]", [pct(s.figures.right_arguments) for _, s in columns]),
        ("calls per task", [_num(s.figures.calls_per_task) for _, s in columns]),
        ("scored attempts", [str(s.figures.scored) for _, s in columns]),
        ("excluded: truncated", [str(s.excluded["truncated"]) for _, s in columns]),
        ("excluded: provider error", [str(s.excluded["provider_error"]) for _, s in columns]),
        ("excluded: pending judge", [str(s.excluded["pending_judge"]) for _, s in columns]),
    ]
    ks = sorted({k for _, s in columns for k in s.pass_hat_k})
    rows += [
        (f"pass^{k} (right arguments)", [_num(s.pass_hat_k.get(k), "{:.3f}") for _, s in columns])
        for k in ks
    ]
    rows += [
        (
            "cost USD",
            [
                _num(s.cost_usd, "{:.4f}")
                + (f" (+{s.cost_unknown} unknown)" if s.cost_unknown else "")
                for _, s in columns
            ],
        ),
        ("tokens in / out", [f"{s.prompt_tokens} / {s.completion_tokens}" for _, s in columns]),
        (
            "latency p50 / p95 ms",
            [
                f"{_num(s.latency_p50_ms, '{:.0f}')} / {_num(s.latency_p95_ms, '{:.0f}')}"
                for _, s in columns
            ],
        ),
    ]
    for name, cells in rows:
        table.add_row(name, *cells)
    return table


def tags_table(columns: Sequence[tuple[str, Scores]]) -> Table:
    table = Table(title="per tag: right tool % / right arguments % (scored)", title_justify="left")
    table.add_column("tag", style="bold")
    for label, _ in columns:
        table.add_column(label, justify="right")
    tags = sorted({t for _, s in columns for t in s.by_tag})
    for tag in tags:
        cells = []
        for _, s in columns:
            fig = s.by_tag.get(tag)
            cells.append(
                "–"
                if fig is None
                else f"{_num(fig.right_tool.pct, '{:.1f}')} / "
                f"{_num(fig.right_arguments.pct, '{:.1f}')} ({fig.scored})"
            )
        table.add_row(tag, *cells)
    return table


def failures_table(result: RunResult, limit: int = 20) -> Table:
    table = Table(title=f"attempts not fully right (first {limit})", title_justify="left")
    for name in ("case", "rep", "tool", "arguments", "reason"):
        table.add_column(name, overflow="fold")
    for v in result.failures[:limit]:
        table.add_row(v.case_id, str(v.repeat), v.tool or v.status, v.arguments or "",
                      v.reason)
    return table


def print_run(result: RunResult, console: Console | None = None) -> None:
    console = console or Console()
    label = f"{result.model} @ {result.release}"
    console.print(scores_table(f"{result.suite.name}: {label}", [(label, result.scores)]))
    console.print(tags_table([(label, result.scores)]))
    if result.failures:
        console.print(failures_table(result))
    if result.missing:
        console.print(
            f"[yellow]{len(result.missing)} case(s) had no response: "
            f"{', '.join(result.missing[:10])}[/yellow]"
        )
