"""Figures per slice (per expected tool, "no call" included, and per tag) on the cases two
releases share, paired like the overall figures: each slice's shares then and now, their
change, the exact McNemar p-value of its flips, and calls per task; and the opt-in slice rule.

The slice rule (issue 33): a gated slice fails when one of its figures dropped more than the
margin AND that figure's paired test of a drop (the one-sided exact McNemar test: a slice only
fails on a drop) rejects after Holm's correction over the tests of every gated slice (two a
slice: right tool and right arguments), so the chance that any slice fails when nothing
changed is at most alpha. Tests whose flipped cases are too few ever to reach significance
(Tarone 1990: n flips give p 2^-n at best) are left out of the correction: they cannot reject
anyway, and counting them would only cost the others power. A gated slice that did not fail,
and whose paired cases cannot see a drop of the margin (80% power at the level Holm's first
step uses, alpha / the tests corrected, at its observed flip share or the margin, whichever is
larger: a drop of the margin flips at least that share), says "cannot tell". The rule only
adds failures to the overall one.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from callgate.gating.cases import CaseRecord, Figure, Paired, Tally
from callgate.gating.holm import tarone_holm_adjusted
from callgate.gating.statistics import detectable_drop_paired, mcnemar_exact

DEFAULT_ALPHA = 0.05
EPSILON = 1e-9  # as decision.EPSILON: a drop of exactly the margin passes
NO_CALL = "no call"
SliceKind = Literal["tool", "tag"]
SliceVerdict = Literal["failed", "cannot tell", "passed"]
FIGURES: tuple[Figure, Figure] = ("right_tool", "right_arguments")


def slice_of(mark: str) -> tuple[SliceKind, str] | None:
    """The slice a store mark names (store/web_rows.py): `expect:TOOL` (`expect:` no call,
    `expect:*KIND` an expectation naming no tool first) and `tag:TAG`; None for others."""
    if mark.startswith("expect:"):
        tool = mark[len("expect:"):]
        if not tool:
            return "tool", NO_CALL
        return "tool", f"({tool[1:]})" if tool.startswith("*") else tool
    if mark.startswith("tag:"):
        return "tag", mark[len("tag:"):]
    return None


class SliceRule(BaseModel):
    """Which slices are gated (none by default) and the family-wise error rate."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    per_tool: bool = False
    per_tag: list[str] = Field(default_factory=list)  # "all": every tag
    alpha: float = Field(default=DEFAULT_ALPHA, gt=0, lt=1)

    @property
    def active(self) -> bool:
        return self.per_tool or bool(self.per_tag)

    def gates(self, kind: SliceKind, name: str) -> bool:
        if kind == "tool":
            return self.per_tool and not name.startswith("(")
        return "all" in self.per_tag or name in self.per_tag


class SliceFigure(BaseModel):
    """One figure of a slice, then and now on its paired cases (points)."""

    model_config = ConfigDict(frozen=True)
    baseline: float | None
    current: float | None
    change: float | None
    mcnemar_p: float | None
    worse: int  # cases that passed this figure then and fail it now
    better: int
    detectable_drop: float | None  # points; 80% power at the slice rule's level
    holm_p: float | None = None  # when gated: the one-sided test of a drop, Holm-adjusted


class SliceFigures(BaseModel):
    model_config = ConfigDict(frozen=True)
    kind: SliceKind
    name: str
    cases: int  # paired: scored in both releases
    attempts: int  # scored attempts now, the slice's cases in this release's suite
    baseline_attempts: int
    right_tool: SliceFigure
    right_arguments: SliceFigure
    calls_per_task: float | None
    baseline_calls_per_task: float | None
    gated: bool = False
    verdict: SliceVerdict | None = None  # when gated

    @property
    def label(self) -> str:
        return f"{'tool' if self.kind == 'tool' else 'tag'} {self.name}"

    def figure(self, name: Figure) -> SliceFigure:
        return self.right_tool if name == "right_tool" else self.right_arguments


class SliceGate(BaseModel):
    """What the slice rule decided: the slices gated, the tests corrected, and the statement
    of the error rate."""

    model_config = ConfigDict(frozen=True)
    rule: SliceRule
    gated: int
    tests: int
    corrected: int  # the tests that can reach significance, Holm-corrected (Tarone's set)
    failed: list[str]  # slice labels
    cannot_tell: list[str]
    statement: str


def slice_figures(pairs: Mapping[str, Mapping[tuple[Tally, Tally], int]],
                  attempts: Mapping[str, tuple[int, int, int, int]]) -> list[SliceFigures]:
    """The figures of each slice. `pairs`: by store mark, the slice's paired cases counted by
    (tally then, tally now) as Paired.counts; `attempts`: by mark, (scored attempts then, their
    calls, scored attempts now, their calls). Tools first, then tags, by name."""
    out = []
    for mark in sorted(pairs.keys() | attempts.keys()):
        named = slice_of(mark)
        if named is None:
            continue
        counts = pairs.get(mark, {})
        paired = Paired(counts=counts, changed=[], unscored=[], scored_before=0)
        then_n, then_calls, now_n, now_calls = attempts.get(mark, (0, 0, 0, 0))
        then_fig, now_fig = paired.figures()
        shares = {name: (getattr(then_fig, name).pct, getattr(now_fig, name).pct,
                         paired.flipped(name)) for name in FIGURES}
        out.append(SliceFigures(
            kind=named[0], name=named[1], cases=paired.shared, attempts=now_n,
            baseline_attempts=then_n,
            right_tool=_figure(*shares["right_tool"], paired.shared),
            right_arguments=_figure(*shares["right_arguments"], paired.shared),
            calls_per_task=now_calls / now_n if now_n else None,
            baseline_calls_per_task=then_calls / then_n if then_n else None))
    out.sort(key=lambda s: (s.kind != "tool", s.name.startswith("("), s.name))
    return out


def _figure(then: float | None, now: float | None, flips: tuple[int, int], cases: int,
            alpha: float = DEFAULT_ALPHA) -> SliceFigure:
    worse, better = flips
    return SliceFigure(
        baseline=then, current=now,
        change=None if then is None or now is None else now - then,
        mcnemar_p=mcnemar_exact(worse, better) if cases else None,
        worse=worse, better=better, detectable_drop=_detectable(cases, worse + better, alpha))


def _detectable(cases: int, flips: int, alpha: float, floor: float = 0.0) -> float | None:
    """The smallest drop (points) `cases` paired cases detect with 80% power at level alpha,
    at their observed flip share (one flip assumed when none was seen, as the overall
    figures do) or `floor` (a share) when larger: a drop of d needs at least d flipping."""
    if not cases:
        return None
    drop = detectable_drop_paired(cases, max(max(flips, 1) / cases, floor), alpha)
    return None if drop is None else 100 * drop


def drop_p(worse: int, better: int) -> float:
    """The one-sided exact McNemar p-value of a drop: P(X >= worse) for X ~ Binomial(worse +
    better, 1/2), half the two-sided one when more cases got worse; 1 (a bound) otherwise."""
    return mcnemar_exact(worse, better) / 2 if worse > better else 1.0


def gate_slices(slices: Sequence[SliceFigures], rule: SliceRule, max_drop: float
                ) -> tuple[list[SliceFigures], SliceGate]:
    """Apply the slice rule: the slices with each gated one's Holm p-values and verdict, and
    what the rule decided."""
    gated = [i for i, s in enumerate(slices) if rule.gates(s.kind, s.name) and s.cases]
    tests = [(i, name) for i in gated for name in FIGURES]
    flips = [(slices[i].figure(n).worse, slices[i].figure(n).better) for i, n in tests]
    # a test of n flipped cases can reach p 2^-n at best (all of them worse)
    holm, tested = tarone_holm_adjusted([drop_p(w, b) for w, b in flips],
                                        [0.5 ** (w + b) for w, b in flips], rule.alpha)
    adjusted = dict(zip(tests, holm, strict=True))
    level = rule.alpha / max(tested, 1)  # what Holm's first step asks of a p-value
    out = list(slices)
    failed: list[str] = []
    cannot_tell: list[str] = []
    for i in gated:
        s = slices[i]
        figures: dict[str, SliceFigure] = {}
        verdict: SliceVerdict = "passed"
        for name in FIGURES:
            fig = s.figure(name)
            holm_p = adjusted.get((i, name))
            fig = fig.model_copy(update={
                "holm_p": holm_p,
                "detectable_drop": _detectable(s.cases, fig.worse + fig.better, level,
                                               max_drop / 100)})
            figures[name] = fig
            dropped = fig.change is not None and -fig.change > max_drop + EPSILON
            if dropped and holm_p is not None and holm_p <= rule.alpha:
                verdict = "failed"
        if verdict != "failed" and any(
                f.detectable_drop is None or f.detectable_drop > max_drop + EPSILON
                for f in figures.values()):
            verdict = "cannot tell"
        if verdict == "failed":
            failed.append(s.label)
        elif verdict == "cannot tell":
            cannot_tell.append(s.label)
        out[i] = s.model_copy(update={**figures, "gated": True, "verdict": verdict})
    statement = (f"slice rule: {len(gated)} slice(s) gated, {len(tests)} paired tests of a "
                 "drop (one-sided exact McNemar, right tool and right arguments per slice), "
                 f"Holm-corrected over the {tested} with enough flipped cases to reject "
                 "(Tarone): the chance that "
                 f"any slice fails when nothing changed is at most {rule.alpha:.0%}; a slice "
                 f"fails when a figure drops more than {max_drop:g} points and its test "
                 "rejects")
    return out, SliceGate(rule=rule, gated=len(gated), tests=len(tests), corrected=tested,
                          failed=failed, cannot_tell=cannot_tell, statement=statement)


def slice_pairs_of(marks: Iterable[tuple[str, str]], before: Mapping[str, CaseRecord],
                   after: Mapping[str, CaseRecord]
                   ) -> dict[str, Counter[tuple[Tally, Tally]]]:
    """Each mark's paired cases counted by (tally then, tally now), from (mark, case id) rows
    and the two releases' case records (a scores-file baseline's, or records read whole): what
    Store.slice_pairs counts inside SQLite. A case counts when both scored it."""
    out: dict[str, Counter[tuple[Tally, Tally]]] = {}
    for mark, case_id in marks:
        then, now = before.get(case_id), after.get(case_id)
        if then is None or now is None or not then[0] or not now[0]:
            continue
        out.setdefault(mark, Counter())[(then[0], then[1], then[2]),
                                        (now[0], now[1], now[2])] += 1
    return out
