"""An agent's releases over time, each with the model id it ran with, from the figures stored
with each run (never its attempts), so listing 100 releases costs what reading 100 rows does."""

from __future__ import annotations

import re
from collections.abc import Container, Iterable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, field_serializer
from rich import box
from rich.markup import escape
from rich.table import Table

from callgate.scoring.scores import Figures, Scores
from callgate.scoring.stored import StoredScores, finished, stored_gate
from callgate.store.rows import StoredRun

_SHA = re.compile(r"[0-9a-f]{40}")


def short_release(release: str) -> str:
    """A 40-character commit SHA as its first 12 characters (as git shows it); any other label
    unchanged. The full label is in `history --json`."""
    return release[:12] if _SHA.fullmatch(release) else release


class HistoryRow(BaseModel):
    model_config = ConfigDict(frozen=True)
    suite_name: str
    suite_fingerprint: str
    agent: str
    model: str  # the model id the release ran with
    release: str
    created_at: str
    run_id: int
    attempts: int
    excluded: dict[str, int]
    # The stored figures as scored, validated once where the run's scores are read
    # (StoredRun.parsed: importing callgate.scoring.stored costs `callgate history` about 40 ms
    # CPU of its start, no litellm, no web stack).
    figures: Figures
    # Points since the previous release of the same agent on the same suite; None for the first.
    change_right_tool: float | None = None
    change_right_arguments: float | None = None
    judge_fingerprint: str | None = None
    uncalibrated: bool = False
    # The outcome of the release's latest gate decision, None when it was never gated.
    gate: str | None = None
    # How the shares were estimated: `checks` (every attempt decided deterministically),
    # `checks+judge` (judged attempts counted as the judge said), or `checks+judge, audited`
    # (a person audited a sample; `callgate judge audit RUN` gives the ppi++ estimates).
    estimator: str = "checks"
    # Cost (USD) and latency (ms) per right answer (scoring.scores), and their change in percent
    # since the previous release on the suite; None when unknown.
    cost_per_right_usd: float | None = None
    latency_per_right_ms: float | None = None
    change_cost_per_right_pct: float | None = None
    change_latency_per_right_pct: float | None = None
    # Cases whose repeats disagreed in this release (flaky: gating.flaky); None: not known
    flaky: int | None = None

    @field_serializer("figures")
    def _figures_as_stored(self, figures: Figures) -> dict[str, Any]:
        """The figures as the run stored them in `--json`: a field added to Figures since
        (a Share's design_effect, icc) is not shown for an older run."""
        return figures.model_dump(mode="json", exclude_unset=True)


def _pct(figures: Figures | None, name: str) -> float | None:
    if figures is None:
        return None
    if name == "right_tool":
        return figures.right_tool.pct
    if name == "right_arguments":
        return figures.right_arguments.pct
    raise ValueError(f"no share {name!r} in the figures")


def _change(now: float | None, then: float | None) -> float | None:
    return None if now is None or then is None else round(now - then, 6)


def estimator_of(scores: Scores, audited: bool) -> str:
    """Which estimator the stored shares of a run are (see HistoryRow.estimator)."""
    judged = scores.judged
    if judged is None or not any(share is not None and share.n
                                 for share in (judged.tool_choice, judged.arguments)):
        return "checks"
    return "checks+judge, audited" if audited else "checks+judge"


def history_rows(runs: Iterable[StoredRun], audited: Container[int] = (),
                 flaky: Mapping[int, int] | None = None) -> list[HistoryRow]:
    """Rows for finished runs given oldest first (Store.stored_runs), each with its change since
    the previous release on the same suite. `audited`: the ids of runs with a judge audit;
    `flaky`: each run's number of flaky cases, by run id."""
    rows: list[HistoryRow] = []
    previous: dict[str, StoredScores] = {}
    for run in runs:
        scores = finished(run)
        figures = scores.figures
        before = previous.get(run.suite_name)
        then = before.figures if before is not None else None
        rows.append(HistoryRow(
            suite_name=run.suite_name, suite_fingerprint=run.suite,
            agent=run.agent, model=run.model,
            release=run.release, created_at=run["created_at"], run_id=run.id,
            attempts=scores.attempts, excluded=scores.excluded, figures=figures,
            change_right_tool=_change(_pct(figures, "right_tool"), _pct(then, "right_tool")),
            change_right_arguments=_change(_pct(figures, "right_arguments"),
                                           _pct(then, "right_arguments")),
            judge_fingerprint=run.judge_fingerprint,
            uncalibrated=scores.uncalibrated,
            gate=record.outcome if (record := stored_gate(run)) else None,
            estimator=estimator_of(scores, run.id in audited),
            cost_per_right_usd=scores.cost_per_right_usd,
            latency_per_right_ms=scores.latency_per_right_ms,
            change_cost_per_right_pct=_change_pct(
                scores.cost_per_right_usd, before.cost_per_right_usd if before else None),
            change_latency_per_right_pct=_change_pct(
                scores.latency_per_right_ms, before.latency_per_right_ms if before else None),
            flaky=(flaky or {}).get(run.id),
        ))
        previous[run.suite_name] = scores
    return rows


def _change_pct(now: float | None, then: float | None) -> float | None:
    """The change from `then` to `now` in percent of `then` (None without both, or from 0)."""
    return 100 * (now - then) / then if now is not None and then else None


def history_document(agent: str, rows: Iterable[HistoryRow]) -> dict[str, Any]:
    """The `history --json` document: full release labels, each release's agent and model,
    figures with intervals. `model` is kept for readers of the document before agents: the
    name the history was asked for."""
    return {"agent": agent, "model": agent,
            "releases": [row.model_dump(mode="json") for row in rows]}


# --------------------------------------------------------------------------- the table
# Here rather than in callgate.report.console, which imports the whole pipeline (about a second).


def _num(value: float | None, fmt: str = "{:.1f}") -> str:
    return "–" if value is None else fmt.format(value)


def history_tables(agent: str, rows: Sequence[HistoryRow]) -> list[Table]:
    """One table per suite, laid out to fit 80 columns: nothing is cut. Release labels wrap
    (a commit SHA shows as its first 12 characters); the model a release ran with is the
    line under it when it is not the agent's own name (an agent named apart from its model),
    so a model change shows where it happened. The creation day is shown, its time is in
    --json: with it, a gate column of `first_release` beside a 10-point change was cut."""
    tables = []
    for suite_name in dict.fromkeys(r.suite_name for r in rows):
        suite_rows = [r for r in rows if r.suite_name == suite_name]
        named = any(r.model != r.agent for r in suite_rows)
        table = Table(title=escape(f"history of {agent} on {suite_name}, oldest first"),
                      title_justify="left", box=box.SIMPLE_HEAD, show_edge=False,
                      padding=(0, 0))
        table.add_column("release / model" if named else "release", overflow="fold",
                         min_width=12)
        for name in ("created UTC", "tool %", "Δ", "args %", "Δ", "calls", "scored", "gate"):
            table.add_column(name, justify="right", no_wrap=True)
        for r in suite_rows:
            label = escape(short_release(r.release))
            if named:
                label += f"\n[dim]{escape(r.model)}[/dim]"
            table.add_row(label, r.created_at[:10],
                          _num(_pct(r.figures, "right_tool")), _delta(r.change_right_tool),
                          _num(_pct(r.figures, "right_arguments")),
                          _delta(r.change_right_arguments),
                          _num(r.figures.calls_per_task, "{:.2f}"),
                          str(r.figures.scored), r.gate or "–")
        judged = {r.estimator for r in suite_rows} - {"checks"}
        if judged:
            table.caption = escape("shares with judged attempts count the judge's verdicts as "
                                   "given; `judge audit RUN` estimates them from a person's "
                                   "sample (ppi++); --json names each row's estimator")
            table.caption_justify = "left"
        tables.append(table)
    return tables


def _delta(value: float | None) -> str:
    return "" if value is None else f"{value:+.1f}"
