"""`callgate run --until-decided`: after the run's first round, look at the paired test
against the release's baseline, and re-ask only the cases that decide the outcome, a round at a
time, until it is decided or the rounds run out (gating.adaptive, docs/noise.md). Each round is
the same run again with some cases asked more often: the answers stored are read back, only
the new repeats are called."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from callgate.gating.adaptive import Tally, readings_at, select
from callgate.gating.finding import baseline_in_store
from callgate.gating.noise import ALL_FIGURES
from callgate.gating.sequential import Reading, Tier, combined, explain
from callgate.running.limits import MAX_REPEATS
from callgate.running.run import LiveRun
from callgate.running.settings import RunSettings
from callgate.store.db import Store
from callgate.suites.suite import Suite

EXIT_CODES: dict[Tier, int] = {"pass": 0, "regression": 1, "cannot_tell": 3}


@dataclass
class Adaptive:
    """How `--until-decided` ended; tier None: no baseline to decide against."""

    tier: Tier | None
    readings: list[Reading]
    rounds: int
    reasked: int  # attempts added after the first round
    baseline: str | None
    live: LiveRun

    def lines(self) -> list[str]:
        if self.tier is None:
            return ["until decided: no released baseline of this agent on the suite; "
                    "nothing to decide against (the first round is the release)"]
        head = (f"until decided: {self.tier.replace('_', ' ')} against {self.baseline} after "
                f"{self.rounds} round(s), {self.reasked} attempt(s) re-asked")
        return [head, *(explain(r) for r in self.readings)]

    def document(self) -> dict[str, Any]:
        return {"tier": self.tier, "rounds": self.rounds, "reasked": self.reasked,
                "baseline": self.baseline, "exit_code": self.exit_code,
                "readings": [{"figure": r.figure, "tier": r.tier, "drop": r.drop.drop,
                              "se": r.drop.se, "cases": r.drop.cases, "p": r.p_value,
                              "needed": r.needed, "hiding": r.hiding}
                             for r in self.readings]}

    @property
    def exit_code(self) -> int:
        return 0 if self.tier is None else EXIT_CODES[self.tier]


def _tallies(store: Store, run_id: int) -> tuple[dict[str, Tally], dict[str, int]]:
    """A run's cases' tallies and attempts made (scored and excluded)."""
    rows = store.case_tallies(run_id)
    return ({r[0]: (r[1], r[2], r[3]) for r in rows}, {r[0]: r[1] + r[4] for r in rows})


def until_decided(store: Store, suite: Suite, agent: str, release: str,
                  settings: RunSettings, run_once: Callable[[RunSettings], LiveRun], *,
                  margin: float, max_rounds: int, max_excluded: float,
                  per_round: int | None = None) -> Adaptive:
    figures = suite.gate_figures or ALL_FIGURES
    live = run_once(settings)
    reasked = 0
    for look in range(1, max_rounds + 1):
        run = store.find_stored_run(suite.name, agent, release)
        if run is None or not store.has_case_tallies(run.id):
            return Adaptive(None, [], look, reasked, None, live)
        base_run, _ = baseline_in_store(store, run, max_excluded)
        if base_run is None:
            return Adaptive(None, [], look, reasked, None, live)
        baseline, _ = _tallies(store, base_run.id)
        current, made = _tallies(store, run.id)
        readings = readings_at(baseline, current, figures, margin, look, max_rounds, 0.05)
        tier = combined(readings)
        if tier != "cannot_tell" or look == max_rounds:
            return Adaptive(tier, readings, look, reasked, base_run.release, live)
        wanted = dict(settings.case_repeats)
        for case_id in select(baseline, current, figures,
                              per_round or max(1, len(baseline) // 4)):
            now = max(wanted.get(case_id, 0), made.get(case_id, 0))
            if now < MAX_REPEATS:
                wanted[case_id] = now + 1
                made[case_id] = now + 1
                reasked += 1
        settings = settings.model_copy(update={"case_repeats": wanted})
        live = run_once(settings)
    raise AssertionError("unreachable")  # the last look returns
