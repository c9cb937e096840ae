"""`history --by tool|tag`: each release's figures per expected tool or per tag, paired with the
previous release of the same suite (its change, the exact McNemar p, cases worse / better)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rich import box
from rich.markup import escape
from rich.table import Table

from callgate.report.history import HistoryRow, short_release

if TYPE_CHECKING:
    from callgate.gating.slices import SliceFigure, SliceFigures


def _num(value: float | None, fmt: str = "{:.1f}") -> str:
    return "–" if value is None else fmt.format(value)


def _delta(value: float | None) -> str:
    return "" if value is None else f"{value:+.1f}"


def _p(figure: SliceFigure) -> str:
    return "" if figure.mcnemar_p is None else f"{figure.mcnemar_p:.2g}"


def slice_history_document(agent: str, rows: Sequence[HistoryRow],
                           slices: Sequence[Sequence[SliceFigures]], by: str
                           ) -> dict[str, Any]:
    """`history --by ... --json`: each release with its slices of that kind."""
    releases = []
    for row, found in zip(rows, slices, strict=True):
        releases.append({**row.model_dump(mode="json"),
                         "slices": [s.model_dump(mode="json") for s in found if s.kind == by]})
    return {"agent": agent, "model": agent, "by": by, "releases": releases}


def slice_history_tables(agent: str, rows: Sequence[HistoryRow],
                         slices: Sequence[Sequence[SliceFigures]], by: str) -> list[Table]:
    """One table per suite, a section per slice, a row per release (oldest first): the change
    is against the previous release, on the cases both scored. Fits 80 columns."""
    tables = []
    for suite_name in dict.fromkeys(r.suite_name for r in rows):
        table = Table(title=escape(f"history of {agent} on {suite_name} per "
                                   f"{'expected tool' if by == 'tool' else 'tag'}, oldest "
                                   "first; Δ and p (exact McNemar): against the previous "
                                   "release, on the cases both scored"),
                      title_justify="left", box=box.SIMPLE_HEAD, show_edge=False,
                      padding=(0, 1), pad_edge=False)
        table.add_column(f"{by} / release", overflow="fold", min_width=12)
        # cases worse / better are in --json: with them the table is wider than 80 columns
        for name in ("cases", "tool %", "Δ", "p", "args %", "Δ", "p", "calls"):
            table.add_column(name, justify="right", no_wrap=True)
        by_name: dict[str, list[tuple[HistoryRow, SliceFigures]]] = {}
        for row, found in zip(rows, slices, strict=True):
            if row.suite_name != suite_name:
                continue
            for s in found:
                if s.kind == by:
                    by_name.setdefault(s.name, []).append((row, s))
        for index, (name, entries) in enumerate(sorted(by_name.items())):
            if index:
                table.add_section()
            table.add_row(f"[bold]{escape(name)}[/bold]")
            for row, s in entries:
                table.add_row(
                    "  " + escape(short_release(row.release)), str(s.cases),
                    _num(s.right_tool.current), _delta(s.right_tool.change), _p(s.right_tool),
                    _num(s.right_arguments.current), _delta(s.right_arguments.change),
                    _p(s.right_arguments), _num(s.calls_per_task, "{:.2f}"))
        tables.append(table)
    return tables
