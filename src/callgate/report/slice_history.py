"""`history --by tool|tag`: each release's figures per expected tool or per tag, paired with the
previous release of the same suite (its change, the exact McNemar p, cases worse / better).
A release's figures leave out the cases its gate quarantined (gating.what_to_fix.slice_history),
and say how many."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rich import box
from rich.markup import escape
from rich.table import Table

from callgate.gating.gated import kept_gated
from callgate.gating.quarantine import quarantined_cases
from callgate.report.history import HistoryRow, short_release
from callgate.store.db import Store
from callgate.store.rows import StoredRun

if TYPE_CHECKING:
    from callgate.gating.slices import SliceFigure, SliceFigures


def gated_left_out(store: Store, runs: Sequence[StoredRun]) -> list[frozenset[str]]:
    """Per run, the cases its kept gate decision (gating.gated: `callgate gate`'s last)
    quarantined, by the gate's one rule (quarantine.quarantined_cases); none for a run never
    gated. What gating.what_to_fix.slice_history leaves out of each release's slices."""
    out = []
    for run in runs:
        kept = kept_gated(store, run.id)
        out.append(quarantined_cases(kept.decision().quarantined) if kept else frozenset())
    return out


def _num(value: float | None, fmt: str = "{:.1f}") -> str:
    return "–" if value is None else fmt.format(value)


def _delta(value: float | None) -> str:
    return "" if value is None else f"{value:+.1f}"


def _p(figure: SliceFigure) -> str:
    return "" if figure.mcnemar_p is None else f"{figure.mcnemar_p:.2g}"


def _counts(rows: Sequence[HistoryRow], left_out: Sequence[int] | None) -> list[int]:
    return [0] * len(rows) if left_out is None else list(left_out)


def slice_history_document(agent: str, rows: Sequence[HistoryRow],
                           slices: Sequence[Sequence[SliceFigures]], by: str,
                           left_out: Sequence[int] | None = None) -> dict[str, Any]:
    """`history --by ... --json`: each release with its slices of that kind, and how many
    cases its gate quarantined were left out of them (`quarantined_left_out`)."""
    releases = []
    for row, found, gone in zip(rows, slices, _counts(rows, left_out), strict=True):
        releases.append({**row.model_dump(mode="json"), "quarantined_left_out": gone,
                         "slices": [s.model_dump(mode="json") for s in found if s.kind == by]})
    return {"agent": agent, "model": agent, "by": by, "releases": releases}


def slice_history_tables(agent: str, rows: Sequence[HistoryRow],
                         slices: Sequence[Sequence[SliceFigures]], by: str,
                         left_out: Sequence[int] | None = None) -> list[Table]:
    """One table per suite, a section per slice, a row per release (oldest first): the change
    is against the previous release, on the cases both scored, less those the release's gate
    quarantined (a caption says how many, per release). Fits 80 columns."""
    tables = []
    counts = _counts(rows, left_out)
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
        table.caption = _left_out_note(
            [(row.release, gone) for row, gone in zip(rows, counts, strict=True)
             if row.suite_name == suite_name and gone])
        table.caption_justify = "left"
        tables.append(table)
    return tables


def _left_out_note(releases: Sequence[tuple[str, int]]) -> str | None:
    """The table's note on the quarantined cases left out, per release (None: none)."""
    if not releases:
        return None
    return escape("quarantined cases left out, as out of each release's gate: " + ", ".join(
        f"{short_release(release)} {gone}" for release, gone in releases))
