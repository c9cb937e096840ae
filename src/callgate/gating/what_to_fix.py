"""What to fix (issue 33): the figures per slice (expected tool, tag) with their paired change,
the confusion table of expected × first-called tool with its moved cells, the argument keys
that went wrong, and the opt-in slice rule's decision. Built by the pure functions of
gating/slices.py and gating/confusion.py from the store's counts (read here)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Sequence

from pydantic import BaseModel, ConfigDict, Field

from callgate.gating.cases import CaseRecord, Paired, Tally, kept_records, tally
from callgate.gating.confusion import Confusion, argument_problems, confusion, counted_cells
from callgate.gating.quarantine import Quarantined, quarantined_cases
from callgate.gating.scores_file import ReleaseScores
from callgate.gating.slices import (
    SliceFigure,
    SliceFigures,
    SliceGate,
    SliceRule,
    gate_slices,
    slice_figures,
    slice_pairs_of,
)
from callgate.gating.surface_gate import without
from callgate.store.db import Store
from callgate.store.gate_rows import MARK_SEPARATOR
from callgate.store.rows import StoredRun
from callgate.store.web_rows import tool_names


class WhatToFix(BaseModel):
    model_config = ConfigDict(frozen=True)
    slices: list[SliceFigures] = Field(default_factory=list)
    confusion: Confusion | None = None
    slice_gate: SliceGate | None = None  # with a slice rule
    notes: list[str] = Field(default_factory=list)

    @property
    def failed(self) -> list[str]:
        return self.slice_gate.failed if self.slice_gate else []

    def headline(self) -> list[str]:
        """What to fix, first: the slices that failed, then the calls that moved."""
        lines = [f"slice {label} failed the slice rule" for label in self.failed]
        if self.confusion is not None:
            lines += [moved.words for moved in self.confusion.moved]
        return lines


def build_what_to_fix(pairs: dict[str, Counter[tuple[Tally, Tally]]],
                      attempts: dict[str, tuple[int, int, int, int]], confusion_: Confusion |
                      None, rule: SliceRule | None, max_drop: float, notes: Sequence[str] = ()
                      ) -> WhatToFix:
    """The pure assembly: slices, the slice rule when one is given, the confusion table."""
    slices = slice_figures(pairs, attempts)
    gate = None
    if rule is not None and rule.active:
        slices, gate = gate_slices(slices, rule, max_drop)
    return WhatToFix(slices=slices, confusion=confusion_, slice_gate=gate, notes=list(notes))


def read_what_to_fix(store: Store, run: StoredRun, base_run: StoredRun | None,
                     current: ReleaseScores, baseline: ReleaseScores, rule: SliceRule | None,
                     max_drop: float, pairs_: Paired | None = None,
                     quarantined: Sequence[Quarantined] = ()) -> WhatToFix:
    """What to fix between a stored release and its baseline (a stored run, `base_run`, or a
    scores file: `baseline`, with its cases). `current`: the release's scores, with its cases
    when the gate read them (not paired in the store). `pairs_`: the cases paired in the store
    with their marks (finding.paired_releases); with both runs' slice counts kept, the slices
    are counted from those and the cases that changed, not from every case. `quarantined`:
    the entries the gate left out (its Noise.quarantined, for this suite): their cases are
    left out of the slices, the confusion table and the argument keys too, by the gate's own
    rule (quarantine.quarantined_cases), and a note says how many."""
    left_out = quarantined_cases(quarantined)
    notes = [quarantine_fix_note(quarantined)] if left_out else []
    pairs: dict[str, Counter[tuple[Tally, Tally]]]
    tallied = base_run is not None and store.has_case_tallies(run.id) and store.has_case_tallies(
        base_run.id)
    if left_out and not tallied:  # every case one by one, less those left out
        after = without(current.cases or _records(store, run), left_out)
        before = without(baseline.cases if base_run is None else (
            baseline.cases or _records(store, base_run)), left_out)
        pairs = slice_pairs_of(store.slice_marks(run.suite), before, after)
    elif left_out and base_run is not None:  # counted in the store, less those left out
        pairs = _counted_pairs(store, base_run, run)
        taken = slice_pairs_of(store.slice_marks_of(run.suite, left_out),
                               baseline.cases or _records(store, base_run),
                               current.cases or _records(store, run))
        for mark, gone in taken.items():
            pairs[mark].subtract(gone)
        pairs = {mark: +found for mark, found in pairs.items()}
    elif (base_run is not None and pairs_ is not None and store.has_slice_tallies(run.id)
            and store.has_slice_tallies(base_run.id)):
        pairs = kept_slice_pairs(store, base_run, pairs_)
    elif base_run is not None and tallied:
        pairs = _counted_pairs(store, base_run, run)
    else:
        after = current.cases or _records(store, run)
        before = baseline.cases if base_run is None else (baseline.cases
                                                          or _records(store, base_run))
        pairs = slice_pairs_of(store.slice_marks(run.suite), before, after)
    now_rows = _slice_calls(store, run, left_out)
    then_rows = _slice_calls(store, base_run, left_out) if base_run else []
    attempts: dict[str, list[int]] = {}
    for side, rows in ((0, then_rows), (2, now_rows)):
        for mark, _, number, calls in rows:
            counts = attempts.setdefault(mark, [0, 0, 0, 0])
            counts[side] += number
            counts[side + 1] += calls or 0
    catalogue = set(tool_names(store.suite_tools(run.suite)))
    now_cells, known = counted_cells(now_rows, catalogue)
    then_cells: Counter[tuple[str, str]] = Counter()
    if base_run is not None:
        base_catalogue = set(tool_names(store.suite_tools(base_run.suite)))
        then_cells, then_known = counted_cells(then_rows, base_catalogue)
        known = known and then_known
    else:
        known = False
        notes.append("the baseline is a scores file, which keeps no first calls: the "
                     "confusion table shows this release only, and no moved cells")
    if not known and base_run is not None:
        notes.append("a release scored before callgate kept each attempt's first call has no "
                     "confusion table cells of its own: score it again to compare them")
    problems = argument_problems(_failures(store, base_run, left_out) if base_run else [],
                                 _failures(store, run, left_out))
    table = confusion(then_cells, now_cells, problems, known)
    return build_what_to_fix(pairs, {k: (v[0], v[1], v[2], v[3]) for k, v in attempts.items()},
                             table, rule, max_drop, notes)


def _counted_pairs(store: Store, base_run: StoredRun, run: StoredRun
                   ) -> dict[str, Counter[tuple[Tally, Tally]]]:
    """Each slice's paired cases by (tally then, tally now), counted in the store."""
    pairs: dict[str, Counter[tuple[Tally, Tally]]] = {}
    for mark, *tallies, cases in store.slice_pairs(base_run.id, run.id, run.suite):
        pairs.setdefault(mark, Counter())[tuple(tallies[:3]), tuple(tallies[3:])] += cases
    return pairs


def _slice_calls(store: Store, run: StoredRun, left_out: Collection[str] = ()
                 ) -> list[tuple[str, str | None, int, int]]:
    """The run's (mark, first-called tool, scored attempts, calls), less the cases left out."""
    rows = (store.kept_slice_calls(run.id) if store.has_slice_tallies(run.id)
            else store.slice_attempts(run.id, run.suite))
    if not left_out:
        return rows
    counts: dict[tuple[str, str | None], list[int]] = {}
    for sign, found in ((1, rows), (-1, store.slice_attempts_of(run.id, run.suite, left_out))):
        for mark, first, number, calls in found:
            count = counts.setdefault((mark, first), [0, 0])
            count[0] += sign * number
            count[1] += sign * (calls or 0)
    return [(mark, first, number, calls) for (mark, first), (number, calls) in counts.items()
            if number > 0]


def _failures(store: Store, run: StoredRun, left_out: Collection[str]
              ) -> list[tuple[str | None, str | None, str, int]]:
    """The run's argument failures (Store.argument_failures), less the cases left out."""
    rows = store.argument_failures(run.id)
    if not left_out:
        return rows
    counts: Counter[tuple[str | None, str | None, str]] = Counter()
    for verdict, kind, reason, number in rows:
        counts[verdict, kind, reason] += number
    for verdict, kind, reason, number in store.argument_failures_of(run.id, left_out):
        counts[verdict, kind, reason] -= number
    return [(*key, number) for key, number in counts.items() if number > 0]


def quarantine_fix_note(quarantined: Sequence[Quarantined], shown: int = 10) -> str:
    """What to fix's line on the quarantined cases it leaves out."""
    ids = sorted(quarantined_cases(quarantined))
    more = f", and {len(ids) - shown} more" if len(ids) > shown else ""
    return (f"{len(ids)} quarantined case(s) left out of the slices, the confusion table and "
            f"the argument keys, as out of the gate: {', '.join(ids[:shown])}{more}")


def kept_slice_pairs(store: Store, base_run: StoredRun, pairs: Paired
                     ) -> dict[str, Counter[tuple[Tally, Tally]]]:
    """Each slice's paired cases counted by (tally then, tally now) as Paired.counted counts
    the whole: the baseline's kept counts by slice, the cases whose tally differs now taken
    out under the baseline suite's marks, and those scored now put back under the release
    suite's (the marks end each row: Store.paired_tallies with `marks`). A case marked alike
    in both suites (its expectation unchanged) stays in its slices; one whose expectation
    changed moves with it."""
    out: dict[str, Counter[tuple[Tally, Tally]]] = {}
    for mark, trials, tool, arguments, cases in store.kept_slice_tallies(base_run.id):
        if mark not in out:
            out[mark] = Counter()
        out[mark][(trials, tool, arguments), (trials, tool, arguments)] += cases
    # counted by the marks' joined text first: a suite has few distinct sets of marks
    taken = Counter((row[11], row[1:4]) for row in pairs.changed + pairs.dropped)
    put = Counter((row[12] if row[12] is not None else row[11], row[1:4], row[6:9])
                  for row in pairs.changed)
    for (marks, then), number in taken.items():
        for mark in (marks or "").split(MARK_SEPARATOR) if marks else ():
            if mark not in out:
                out[mark] = Counter()
            out[mark][then, then] -= number
    for (marks, then, now), number in put.items():
        for mark in marks.split(MARK_SEPARATOR) if marks else ():
            if mark not in out:
                out[mark] = Counter()
            out[mark][then, now] += number
    return {mark: +found for mark, found in out.items()}


def _records(store: Store, run: StoredRun) -> dict[str, CaseRecord]:
    """As finding.stored_cases (which imports the decision, which imports this module)."""
    kept = store.case_tallies(run.id)
    return kept_records(kept) if kept else tally(store.gate_rows(run.id))


def slice_history(store: Store, runs: Sequence[StoredRun],
                  left_out: Sequence[Collection[str]] | None = None
                  ) -> list[list[SliceFigures]]:
    """Per run (oldest first, as Store.stored_runs gives them), its slices against the
    previous run of the same suite name, paired on the cases both scored (the first run of a
    suite against itself: its own figures, no change). Runs without kept tallies (finished
    before they were kept) have none. `left_out`: per run, the cases taken out of its figures
    and of its previous run's (the cases its gate quarantined: report.slice_history.
    gated_left_out); none without it."""
    if left_out is None:
        left_out = [()] * len(runs)
    out: list[list[SliceFigures]] = []
    previous: dict[str, StoredRun] = {}
    for run, gone in zip(runs, left_out, strict=True):
        before = previous.get(run.suite_name, run)
        previous[run.suite_name] = run
        if not (store.has_case_tallies(run.id) and store.has_case_tallies(before.id)):
            out.append([])
            continue
        pairs = _counted_pairs(store, before, run)
        if gone:  # as read_what_to_fix: the store's counts less those of the cases left out
            taken = slice_pairs_of(store.slice_marks_of(run.suite, gone),
                                   _records(store, before), _records(store, run))
            for mark, found in taken.items():
                pairs.setdefault(mark, Counter()).subtract(found)
            pairs = {mark: +found for mark, found in pairs.items()}
        attempts: dict[str, list[int]] = {}
        for side, rows in ((0, _slice_calls(store, before, gone)),
                           (2, _slice_calls(store, run, gone))):
            for mark, _, number, calls in rows:
                counts = attempts.setdefault(mark, [0, 0, 0, 0])
                counts[side] += number
                counts[side + 1] += calls or 0
        slices = slice_figures(pairs, {k: (v[0], v[1], v[2], v[3]) for k, v in attempts.items()})
        if before is run:  # a first release: its figures, nothing to change from
            slices = [_first(s) for s in slices]
        out.append(slices)
    return out


def _first(s: SliceFigures) -> SliceFigures:
    def alone(figure: SliceFigure) -> SliceFigure:
        return figure.model_copy(update={"baseline": None, "change": None, "mcnemar_p": None})

    return s.model_copy(update={"right_tool": alone(s.right_tool),
                                "right_arguments": alone(s.right_arguments),
                                "baseline_calls_per_task": None})
