"""`callgate history --production`: an agent's production samples (scoring/production.py)
per UTC day or per release, oldest first, from the counts the store sums per group."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict
from rich import box
from rich.markup import escape
from rich.table import Table

from callgate.scoring.production_figures import (
    ProductionFigures,
    ProductionShare,
    figures_of,
    share,
)


class ProductionClaims(BaseModel):
    """The claim_support judge's verdicts over a group (`--claims-judge`): the share of the
    judged traces whose final answer makes a claim their tool results do not back. Traces with
    no text answer or no tool result are not judged; judge errors (no verdict after the
    retries) are the judge's: both counted apart, in no share."""

    model_config = ConfigDict(frozen=True)
    asked: int  # answered traces the judge was asked about
    judged: int
    unsupported: ProductionShare  # over the judged traces
    not_judged: int  # no text answer, or no tool result
    judge_errors: int


def claims_of(counts: Mapping[str, Any]) -> ProductionClaims | None:
    """From the claims_* counts (the store's sums per group, production_claims.claim_counts
    of one file); None when the judge was asked about none of the traces."""
    def get(name: str) -> int:
        return int(counts.get(f"claims_{name}") or 0)

    asked, judged = get("asked"), get("judged")
    if not asked:
        return None
    return ProductionClaims(asked=asked, judged=judged,
                            unsupported=share(get("unsupported"), judged),
                            not_judged=get("not_judged"), judge_errors=get("judge_errors"))


class ProductionGroup(BaseModel):
    model_config = ConfigDict(frozen=True)
    key: str  # the UTC day (YYYY-MM-DD) or the release ("" for samples scored without one)
    first_trace: str  # the start of its first and last trace, UTC
    last_trace: str
    figures: ProductionFigures
    claims: ProductionClaims | None = None  # None: the claim judge was asked about none


def production_groups(counts: Sequence[Mapping[str, Any]],
                      violations: Mapping[str, Mapping[str, int]]) -> list[ProductionGroup]:
    """Groups from Store.production_counts and Store.production_violations."""
    return [ProductionGroup(key=row["key"], first_trace=row["first"], last_trace=row["last"],
                            figures=figures_of(row, violations.get(row["key"])),
                            claims=claims_of(row))
            for row in counts]


def production_document(agent: str, by: str, groups: Sequence[ProductionGroup]
                        ) -> dict[str, Any]:
    return {"agent": agent, "by": by, "production": True,
            "groups": [{by: g.key or None, "first_trace": g.first_trace,
                        "last_trace": g.last_trace, **g.figures.model_dump(mode="json"),
                        "claims": g.claims.model_dump(mode="json") if g.claims else None}
                       for g in groups]}


def _pct(value: ProductionShare) -> str:
    return "–" if value.pct is None else f"{value.pct:.1f}"


def production_table(agent: str, by: str, groups: Sequence[ProductionGroup]) -> Table:
    """One row per group, within 80 columns; the intervals and violations by policy are in
    --json."""
    table = Table(title=escape(f"production samples of {agent} by {by} (UTC), oldest first"),
                  title_justify="left", box=box.SIMPLE_HEAD, show_edge=False, padding=(0, 1))
    table.add_column(by, overflow="fold", min_width=10)
    claims = any(g.claims is not None for g in groups)  # the claim judge's columns too
    names = (("traces", "errors", "valid %", "no viol. %", "calls/t", "unkn. %", "judged",
              "unsup. %") if claims  # two columns more: shorter headers, no padding, to fit
             else ("traces", "errors", "valid %", "no viol. %", "calls/trace", "unknown %"))
    if claims:
        table.padding = (0, 0)
    for name in names:
        table.add_column(name, justify="right", no_wrap=True)
    for group in groups:
        f, c = group.figures, group.claims
        table.add_row(escape(group.key or "–"), str(f.traces), str(f.provider_errors),
                      _pct(f.schema_valid), _pct(f.policy_clean),
                      "–" if f.calls_per_trace is None else f"{f.calls_per_trace:.2f}",
                      _pct(f.unknown_tool_calls),
                      *((str(c.judged) if c else "–", _pct(c.unsupported) if c else "–")
                        if claims else ()))
    table.caption = ("valid: every call schema-valid against an offered tool; shares over the "
                     "traces the model answered (errors: provider errors, counted apart)"
                     + ("; unsup.: judged traces whose final "
                        "answer claims what its tool results do not back (not judged: no text "
                        "answer or no tool result, and judge errors: in --json)"
                        if claims else ""))
    table.caption_justify = "left"
    return table
