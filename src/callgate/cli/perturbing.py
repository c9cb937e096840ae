"""`run --perturb KIND ...`: the clean run (from the store where it can), then the same cases
with the tool surface worded each way asked for, each stored marked with its perturbation, and
the release's robustness against the clean run and the baseline release (docs/robustness.md)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from callgate.errors import CallgateError
from callgate.gating.robustness import Robustness, release_robustness
from callgate.reading import canonical_json
from callgate.running.estimate import RunEstimate, estimate_run, total_estimate
from callgate.running.run import LiveRun
from callgate.running.settings import RunSettings
from callgate.store.db import Store
from callgate.suites.perturb import Spec, Variant, expected_first, parse_spec
from callgate.suites.perturbed import perturbed_suite
from callgate.suites.suite import Suite


@dataclass
class PerturbedRuns:
    """The clean run, each perturbed run with its variant, and the robustness they give."""

    clean: LiveRun
    runs: list[tuple[Variant, LiveRun]]
    robustness: Robustness | None

    def summary(self) -> list[dict[str, Any]]:
        return [{"kind": v.kind, "detail": v.detail, "fingerprint": v.fingerprint,
                 "run_id": live.result.run_id, "called": live.called, "cached": live.cached,
                 "changed_cases": v.changed_cases, "changed_tools": v.changed_tools}
                for v, live in self.runs]


def specs_of(texts: Sequence[str], seed: int) -> list[Spec]:
    """The --perturb values, each kind once."""
    specs: list[Spec] = []
    for text in texts:
        try:
            spec = parse_spec(text, seed)
        except ValueError as exc:
            raise CallgateError(str(exc)) from None
        if any(s.kind == spec.kind and s.argument == spec.argument for s in specs):
            raise CallgateError(f"--perturb {text}: given twice")
        specs.append(spec)
    return specs


def run_perturbed(store: Store, suite: Suite, agent: str, release: str, settings: RunSettings,
                  specs: Sequence[Spec], run: Callable[[Suite, RunSettings], LiveRun], *,
                  max_drop: float | None, max_excluded: float | None,
                  base: Path | None = None) -> PerturbedRuns:
    """Every variant is made before anything is called (a bad file stops the run with nothing
    written); then the clean run, then one run per variant, each with the clean run's settings
    and its own marker (which also keeps its answers apart in the cache)."""
    made: list[tuple[Suite, Variant]] = []
    for spec in specs:
        try:
            made.append(perturbed_suite(suite, spec, base))
        except ValueError as exc:
            raise CallgateError(str(exc)) from None
    clean = run(suite, settings)
    runs: list[tuple[Variant, LiveRun]] = []
    if _ended_early(clean):
        return PerturbedRuns(clean, runs, None)
    for other, variant in made:
        marked = settings.model_copy(update={"perturbation": canonical_json(variant.marker())})
        live = run(other, marked)
        runs.append((variant, live))
        if _ended_early(live):
            return PerturbedRuns(clean, runs, None)
    expected = {case_id: expected_first(suite.raw_cases[case_id]) for case_id in suite.cases}
    robustness = release_robustness(
        store, suite.name, agent, release, expected=expected,
        only=[variant.fingerprint for variant, _ in runs], max_drop=max_drop,
        max_excluded=max_excluded)
    return PerturbedRuns(clean, runs, robustness)


def estimate_perturbed(store: Store, suite: Suite, candidate: Any, settings: RunSettings,
                       specs: Sequence[Spec], base: Path | None = None) -> RunEstimate:
    """`run --perturb ... --estimate`: the clean run and every variant's run, counted and
    priced as `run --estimate` does, each variant's answers looked up under its own marker."""
    parts = [("clean run", estimate_run(suite, candidate, store, settings))]
    for spec in specs:
        try:
            other, variant = perturbed_suite(suite, spec, base)
        except ValueError as exc:
            raise CallgateError(str(exc)) from None
        marked = settings.model_copy(update={"perturbation": canonical_json(variant.marker())})
        parts.append((f"{variant.kind} run", estimate_run(other, candidate, store, marked)))
    return total_estimate(parts)


def _ended_early(live: LiveRun) -> bool:
    return bool(live.stopped or live.budget or live.result.not_a_result)
