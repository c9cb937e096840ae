"""`callgate history --production`: an agent's production samples (scoring/production.py)
per UTC day or per release, oldest first, from the counts the store sums per group."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict
from rich import box
from rich.markup import escape
from rich.table import Table

from callgate.scoring.production_figures import ProductionFigures, ProductionShare, figures_of


class ProductionGroup(BaseModel):
    model_config = ConfigDict(frozen=True)
    key: str  # the UTC day (YYYY-MM-DD) or the release ("" for samples scored without one)
    first_trace: str  # the start of its first and last trace, UTC
    last_trace: str
    figures: ProductionFigures


def production_groups(counts: Sequence[Mapping[str, Any]],
                      violations: Mapping[str, Mapping[str, int]]) -> list[ProductionGroup]:
    """Groups from Store.production_counts and Store.production_violations."""
    return [ProductionGroup(key=row["key"], first_trace=row["first"], last_trace=row["last"],
                            figures=figures_of(row, violations.get(row["key"])))
            for row in counts]


def production_document(agent: str, by: str, groups: Sequence[ProductionGroup]
                        ) -> dict[str, Any]:
    return {"agent": agent, "by": by, "production": True,
            "groups": [{by: g.key or None, "first_trace": g.first_trace,
                        "last_trace": g.last_trace, **g.figures.model_dump(mode="json")}
                       for g in groups]}


def _pct(value: ProductionShare) -> str:
    return "–" if value.pct is None else f"{value.pct:.1f}"


def production_table(agent: str, by: str, groups: Sequence[ProductionGroup]) -> Table:
    """One row per group, within 80 columns; the intervals and violations by policy are in
    --json."""
    table = Table(title=escape(f"production samples of {agent} by {by} (UTC), oldest first"),
                  title_justify="left", box=box.SIMPLE_HEAD, show_edge=False, padding=(0, 1))
    table.add_column(by, overflow="fold", min_width=10)
    for name in ("traces", "errors", "valid %", "no viol. %", "calls/trace", "unknown %"):
        table.add_column(name, justify="right", no_wrap=True)
    for group in groups:
        f = group.figures
        table.add_row(escape(group.key or "–"), str(f.traces), str(f.provider_errors),
                      _pct(f.schema_valid), _pct(f.policy_clean),
                      "–" if f.calls_per_trace is None else f"{f.calls_per_trace:.2f}",
                      _pct(f.unknown_tool_calls))
    table.caption = ("valid: every call schema-valid against an offered tool; shares over the "
                     "traces the model answered (errors: provider errors, counted apart)")
    table.caption_justify = "left"
    return table
