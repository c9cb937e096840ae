"""A decision that re-asks until it is sure (`run --until-decided`): after the first round,
only the cases that decide the outcome are asked again, a round at a time, until the paired test
(gating.sequential, its error rate spent over the rounds) decides every gated figure or the
rounds run out. Pure: the asking is a function given by the caller (the live run, or a test's
simulated model)."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from callgate.gating.sequential import (
    DEFAULT_ALPHA,
    PairedDrop,
    Reading,
    Tier,
    combined,
    drop_of,
    read,
)

Tally = tuple[int, int, int]  # scored attempts, right tool, right arguments
# Asked the cases (with repeats: a case id twice is asked twice), the answers' verdicts:
# (case id, right tool, right arguments) for every scored attempt.
Ask = Callable[[Sequence[str]], Iterable[tuple[str, bool, bool]]]
FIGURES = ("right_tool", "right_arguments")


@dataclass
class Outcome:
    """How an adaptive decision ended: its tier, each gated figure's reading at the last look,
    the rounds taken (the first included) and the attempts asked after the first round."""

    tier: Tier
    readings: list[Reading]
    rounds: int
    extra_attempts: int
    current: dict[str, Tally] = field(repr=False)


def pairs_of(baseline: Mapping[str, Tally], current: Mapping[str, Tally]
             ) -> dict[tuple[Tally, Tally], int]:
    """The shared scored cases counted by their tallies (as Paired.counts)."""
    counts: dict[tuple[Tally, Tally], int] = {}
    for case_id, then in baseline.items():
        now = current.get(case_id)
        if now is None or not then[0] or not now[0]:
            continue
        key = ((then[0], then[1], then[2]), (now[0], now[1], now[2]))
        counts[key] = counts.get(key, 0) + 1
    return counts


def readings_at(baseline: Mapping[str, Tally], current: Mapping[str, Tally],
                figures: Sequence[str], margin: float, look: int, looks: int,
                alpha: float) -> list[Reading]:
    counts = pairs_of(baseline, current)
    out = []
    for figure in figures:
        drop = drop_of(counts, figure) or PairedDrop(cases=0, drop=0.0, se=0.0)
        out.append(read(figure, drop, margin, look=look, looks=looks, alpha=alpha))
    return out


def priority(then: Tally, asked: int, figures: Sequence[str]) -> float:
    """How much one more attempt of a case narrows the gated figures' drop: the case's
    variance, as its earlier repeats show it (the baseline's: a case flaky then is likely
    flaky now), falls by v / (n (n + 1)) at n attempts, v shrunk so that a case the baseline
    always got right (or wrong) still counts a little. Nothing of this round's answers is
    read: choosing by them (re-asking the cases that look worse now) biases each case's rate
    towards the candidate, since a case stops being asked once it looks good."""
    score = 0.0
    for figure in figures:
        f = 1 if figure == "right_tool" else 2
        shrunk = (then[f] + 0.5) / (then[0] + 1)
        variance = shrunk * (1 - shrunk)
        score += variance / ((asked + 1) * (asked + 2)) if asked else variance
    return score


def select(baseline: Mapping[str, Tally], current: Mapping[str, Tally],
           figures: Sequence[str], size: int) -> list[str]:
    """The next `size` attempts: each to the shared case whose next attempt narrows the drop
    most (a case may be asked several times in a round; ties by case id). A schedule fixed by
    the baseline and by how often each case was asked, never by what it answered."""
    asked = {c: current[c][0] for c, then in baseline.items() if then[0] and c in current}
    heap = [(-priority(baseline[c], n, figures), c) for c, n in asked.items()]
    heapq.heapify(heap)
    out: list[str] = []
    while heap and len(out) < size:
        _, case_id = heapq.heappop(heap)
        out.append(case_id)
        asked[case_id] += 1
        heapq.heappush(heap, (-priority(baseline[case_id], asked[case_id], figures), case_id))
    return out


def until_decided(baseline: Mapping[str, Tally], current: Mapping[str, Tally], ask: Ask, *,
                  margin: float = 2.0, figures: Sequence[str] = FIGURES,
                  max_rounds: int = 5, per_round: int | None = None,
                  alpha: float = DEFAULT_ALPHA, stop_on_pass: bool = True) -> Outcome:
    """Look after the first round (`current`: its tallies), then re-ask and look again until
    every gated figure is decided (regression or pass) or `max_rounds` rounds (the first
    included) are spent. `per_round`: attempts a round (default: a quarter of the cases,
    at least one). `stop_on_pass=False` looks at every round unless sure of a regression
    (the worst case for the false-regression rate, which the benchmark measures)."""
    if max_rounds < 1:
        raise ValueError("max_rounds must be at least 1")
    now: dict[str, Tally] = {case_id: (t[0], t[1], t[2]) for case_id, t in current.items()}
    size = per_round or max(1, len(baseline) // 4)
    extra = 0
    look = 1
    while True:
        readings = readings_at(baseline, now, figures, margin, look, max_rounds, alpha)
        tier = combined(readings)
        if tier == "regression" or look == max_rounds or (tier == "pass" and stop_on_pass):
            return Outcome(tier=tier, readings=readings, rounds=look, extra_attempts=extra,
                           current=now)
        asked = select(baseline, now, figures, size)
        for case_id, tool, arguments in ask(asked):
            n, t, a = now[case_id]
            now[case_id] = (n + 1, t + int(tool), a + int(arguments))
            extra += 1
        look += 1
