"""Robustness (issue 38 point 3): a release's runs with the tool surface worded another way
(`run --perturb`), each paired with the release's clean run on the same cases.

Per perturbation: the right-tool and right-arguments shares on the paired cases, clean and
perturbed (each case weighing the same, its rate over its repeats), the drop with a 95%
interval from the paired statistics of gating.sequential (`paired_drop`: the standard error
from each case's own repeats), an exact McNemar test on the cases that flipped, and the tools
that lost their calls (per tool a case expects first: its right-tool share clean and perturbed,
and what was called instead).

The robustness figure of a release is the worst share kept: 100 × the lowest, over its
perturbations, of (perturbed right-arguments share ÷ clean right-arguments share), capped at
100 (a perturbation that helps keeps everything). Its change is against the baseline release's
figure over the perturbations both releases ran (the same kind, argument and seed). It is
gated only when asked: a release fails when its figure is more than `max_drop` points below
the baseline's."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from callgate.gating.cases import CaseRecord
from callgate.gating.finding import baseline_in_store, stored_cases
from callgate.gating.sequential import paired_drop
from callgate.gating.statistics import mcnemar_exact
from callgate.stats import Z95
from callgate.store.db import Store
from callgate.store.rows import StoredRun

FIGURES = ("right_tool", "right_arguments")
TOOLS_SHOWN = 5  # tools that lost calls, most points first
NO_CALL = "(no call)"
Decision = Literal["not_gated", "pass", "regression", "inconclusive"]


class FigureDrop(BaseModel):
    """One figure on the paired cases: clean and perturbed shares (points), the drop and its
    95% interval, and the cases that flipped (most repeats right clean, not perturbed)."""

    model_config = ConfigDict(frozen=True)
    clean: float
    perturbed: float
    drop: float
    low: float
    high: float
    worse: int
    better: int
    mcnemar_p: float


class ToolLoss(BaseModel):
    """A tool a case expects first, with its right-tool share clean and perturbed (scored
    attempts), and the tools called first instead under the perturbation (most first)."""

    model_config = ConfigDict(frozen=True)
    tool: str
    clean: float
    perturbed: float
    attempts: int  # perturbed scored attempts expecting it
    called_instead: dict[str, int] = Field(default_factory=dict)

    @property
    def drop(self) -> float:
        return self.clean - self.perturbed


class Perturbed(BaseModel):
    """One perturbation of a release, paired with its clean run."""

    model_config = ConfigDict(frozen=True)
    kind: str
    detail: str = ""
    fingerprint: str
    run: int
    cases: int  # paired cases (scored in both runs)
    right_tool: FigureDrop | None
    right_arguments: FigureDrop | None
    lost: list[ToolLoss] = Field(default_factory=list)

    @property
    def label(self) -> str:
        return f"{self.kind} ({self.detail})" if self.detail else self.kind

    @property
    def kept(self) -> float | None:
        """Perturbed right-arguments share ÷ clean (None when the clean share is 0)."""
        figure = self.right_arguments
        if figure is None or figure.clean <= 0:
            return None
        return figure.perturbed / figure.clean


class Robustness(BaseModel):
    model_config = ConfigDict(frozen=True)
    release: str
    clean_run: int
    perturbations: list[Perturbed]
    figure: float | None  # points: 100 × the worst share kept, capped at 100
    worst: str | None  # the perturbation that kept least
    baseline_release: str | None = None
    baseline_figure: float | None = None  # over the perturbations both releases ran
    shared_figure: float | None = None  # this release's figure over those perturbations
    compared_on: list[str] = Field(default_factory=list)  # those perturbations' labels
    change: float | None = None  # points, now − baseline
    max_drop: float | None = None
    decision: Decision = "not_gated"
    reason: str = ""

    @property
    def exit_code(self) -> int:
        return {"regression": 1, "inconclusive": 3}.get(self.decision, 0)

    def lines(self) -> list[str]:
        """What `run --perturb` prints, one line each."""
        out = []
        for p in self.perturbations:
            out.append(f"{p.label}: {p.cases} paired case(s)")
            for name in FIGURES:
                f = getattr(p, name)
                if f is None:
                    continue
                out.append(f"  {name.replace('_', ' ')}: {f.clean:.1f}% clean → "
                           f"{f.perturbed:.1f}% perturbed, drop {f.drop:.1f} points "
                           f"(95% {f.low:.1f} to {f.high:.1f}; {f.worse} case(s) worse, "
                           f"{f.better} better, McNemar p = {f.mcnemar_p:.3g})")
            for loss in p.lost:
                instead = ", ".join(f"{t} {n}" for t, n in loss.called_instead.items())
                out.append(f"  lost calls: {loss.tool} {loss.clean:.0f}% → {loss.perturbed:.0f}%"
                           f" right tool" + (f" (called instead: {instead})" if instead else ""))
        if self.figure is None:
            out.append("robustness: cannot tell (no perturbation with a clean right-arguments "
                       "share above 0)")
        else:
            out.append(f"robustness: {self.figure:.1f} (worst share kept: {self.worst})")
        if self.baseline_release is not None and self.change is not None:
            out.append(f"  against {self.baseline_release}: {self.baseline_figure:.1f} → "
                       f"{self.shared_figure:.1f} ({self.change:+.1f} points, on "
                       f"{', '.join(self.compared_on)})")
        if self.reason:
            out.append(f"  {self.reason}")
        return out


def figure_drop(clean: Mapping[str, CaseRecord], perturbed: Mapping[str, CaseRecord],
                name: str) -> FigureDrop | None:
    """One figure's paired drop over the cases both runs scored; None without one."""
    def right(record: CaseRecord) -> int:
        return record.right_tool if name == "right_tool" else record.right_arguments

    pairs: list[tuple[tuple[int, int], tuple[int, int], int]] = [
        ((c.trials, right(c)), (p.trials, right(p)), 1)
        for case_id, c in clean.items()
        if (p := perturbed.get(case_id)) is not None and c.trials and p.trials]
    drop = paired_drop(pairs)
    if drop is None:
        return None
    share = 100 * sum(then[1] / then[0] for then, _, _ in pairs) / len(pairs)
    passed = "passed_tool" if name == "right_tool" else "passed"
    worse = sum(1 for case_id, c in clean.items() if case_id in perturbed
                and perturbed[case_id].trials and c.trials
                and getattr(c, passed) and not getattr(perturbed[case_id], passed))
    better = sum(1 for case_id, c in clean.items() if case_id in perturbed
                 and perturbed[case_id].trials and c.trials
                 and not getattr(c, passed) and getattr(perturbed[case_id], passed))
    half = Z95 * drop.se
    return FigureDrop(clean=share, perturbed=share - drop.drop, drop=drop.drop,
                      low=drop.drop - half, high=drop.drop + half, worse=worse, better=better,
                      mcnemar_p=mcnemar_exact(worse, better))


# An attempt as the tool losses read it: case id, scored, right tool, first tool called.
AttemptRow = tuple[str, bool, bool, str | None]


def tool_losses(expected: Mapping[str, str | None], clean: Iterable[AttemptRow],
                perturbed: Iterable[AttemptRow], shown: int = TOOLS_SHOWN) -> list[ToolLoss]:
    """The tools whose right-tool share fell under the perturbation, most points first."""
    def shares(rows: Iterable[AttemptRow]) -> tuple[Counter[str], Counter[str],
                                                    dict[str, Counter[str]]]:
        asked, right = Counter[str](), Counter[str]()
        instead: dict[str, Counter[str]] = {}
        for case_id, scored, right_tool, first in rows:
            tool = expected.get(case_id)
            if tool is None or not scored:
                continue
            asked[tool] += 1
            right[tool] += right_tool
            if not right_tool:
                called = first or NO_CALL
                instead.setdefault(tool, Counter())[called] += 1
        return asked, right, instead

    asked_then, right_then, _ = shares(clean)
    asked_now, right_now, instead_now = shares(perturbed)
    losses = []
    for tool in sorted(asked_then.keys() & asked_now.keys()):
        then = 100 * right_then[tool] / asked_then[tool]
        now = 100 * right_now[tool] / asked_now[tool]
        if now < then:
            losses.append(ToolLoss(tool=tool, clean=then, perturbed=now,
                                   attempts=asked_now[tool],
                                   called_instead=dict(instead_now.get(tool, Counter())
                                                       .most_common(3))))
    losses.sort(key=lambda loss: (-loss.drop, loss.tool))
    return losses[:shown]


def worst_kept(perturbations: Sequence[Perturbed]) -> tuple[float | None, str | None]:
    """The robustness figure (points) and the perturbation that kept least."""
    kept = [(p.kept, p.label) for p in perturbations if p.kept is not None]
    if not kept:
        return None, None
    share, label = min(kept, key=lambda item: (item[0], item[1]))
    return 100 * min(1.0, share), label


def gate(figure: float | None, baseline: float | None, max_drop: float | None
         ) -> tuple[Decision, str]:
    """The robustness gate: off unless `max_drop` is given; a regression when the figure is
    more than `max_drop` points below the baseline's; a pass without a baseline figure
    (said so); inconclusive when the release's figure cannot be told."""
    if max_drop is None:
        return "not_gated", ""
    if figure is None:
        return "inconclusive", "robustness gate: inconclusive, the figure cannot be told"
    if baseline is None:
        return "pass", ("robustness gate: no baseline figure on the same perturbations; "
                        "recorded, passes")
    drop = baseline - figure
    if drop > max_drop + 1e-9:
        return "regression", (f"robustness gate: FAIL, {drop:.1f} points below the baseline "
                              f"(allowed {max_drop:g})")
    return "pass", f"robustness gate: pass (a drop of at most {max_drop:g} points allowed)"


def _marker(run: Mapping[str, Any]) -> dict[str, Any]:
    return dict(json.loads(run["perturbation"]))


def _attempts(store: Store, run_id: int) -> list[AttemptRow]:
    return [(row["case_id"], row["status"] == "scored", bool(row["right_tool"]),
             row["first_tool"]) for row in store.verdicts(run_id)]


def paired(store: Store, clean: Mapping[str, Any], run: Mapping[str, Any],
           expected: Mapping[str, str | None] | None = None) -> Perturbed:
    """A stored perturbed run paired with its release's clean run (`expected`: each case's
    first expected tool, for the tools that lost calls; None: not read)."""
    then, now = stored_cases(store, clean["id"]), stored_cases(store, run["id"])
    marker = _marker(run)
    lost = (tool_losses(expected, _attempts(store, clean["id"]), _attempts(store, run["id"]))
            if expected is not None else [])
    return Perturbed(kind=marker["kind"], detail=marker.get("detail") or "",
                     fingerprint=marker["fingerprint"], run=run["id"],
                     cases=sum(1 for c, r in then.items() if r.trials and c in now
                               and now[c].trials),
                     right_tool=figure_drop(then, now, "right_tool"),
                     right_arguments=figure_drop(then, now, "right_arguments"), lost=lost)


def release_robustness(store: Store, suite_name: str, agent: str, release: str, *,
                       expected: Mapping[str, str | None] | None = None,
                       only: Iterable[str] | None = None, max_drop: float | None = None,
                       max_excluded: float | None = None) -> Robustness | None:
    """A release's robustness from the store: its perturbed runs (`only`: of these
    fingerprints) paired with its clean run, its change against the baseline release, and the
    gate's decision when `max_drop` is given. None without a clean run or a perturbed one."""
    clean = store.find_stored_run(suite_name, agent, release)
    if clean is None:
        return None
    wanted = set(only) if only is not None else None
    runs = [r for r in store.perturbed_runs(suite_name, agent, release)
            if wanted is None or _marker(r)["fingerprint"] in wanted]
    if not runs:
        return None
    perturbations = [paired(store, clean, run, expected) for run in runs]
    figure, worst = worst_kept(perturbations)
    out = Robustness(release=release, clean_run=clean.id, perturbations=perturbations,
                     figure=figure, worst=worst, max_drop=max_drop)
    out = _against_baseline(store, clean, out, max_excluded)
    shared = out.shared_figure if out.baseline_figure is not None else out.figure
    decision, reason = gate(shared, out.baseline_figure, max_drop)
    return out.model_copy(update={"decision": decision, "reason": reason})


def _against_baseline(store: Store, clean: StoredRun, out: Robustness,
                      max_excluded: float | None) -> Robustness:
    """`out` with the baseline release's figure over the perturbations both ran."""
    base, _ = (baseline_in_store(store, clean) if max_excluded is None
               else baseline_in_store(store, clean, max_excluded))
    if base is None:
        return out
    ours = {p.fingerprint for p in out.perturbations}
    theirs = [r for r in store.perturbed_runs(base.suite_name, base.agent, base.release)
              if _marker(r)["fingerprint"] in ours]
    if not theirs:
        return out
    then = [paired(store, base, run) for run in theirs]
    shared = {p.fingerprint for p in then}
    now_figure, _ = worst_kept([p for p in out.perturbations if p.fingerprint in shared])
    then_figure, _ = worst_kept(then)
    if now_figure is None or then_figure is None:
        return out
    return out.model_copy(update={
        "baseline_release": base.release, "baseline_figure": then_figure,
        "compared_on": sorted(p.label for p in then), "shared_figure": now_figure,
        "change": now_figure - then_figure})
