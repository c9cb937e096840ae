"""The figures of production samples (traces without expected answers, docs/traces.md): the
share of traces whose every call is schema-valid against the tools it was offered, the share
with no policy violation, calls per trace and the share of calls to tools not offered, over
the traces whose model answered; provider errors are counted apart.

Light on purpose (pydantic and the Wilson interval only): `callgate history --production`
reads these from the store's counts without importing the scoring pipeline."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict

from callgate.stats import wilson


class ProductionShare(BaseModel):
    """A percentage with its Wilson 95% interval (points, 0-100); each trace is one
    independent sample (no repeats of a case to correct for)."""

    model_config = ConfigDict(frozen=True)
    successes: int
    n: int
    pct: float | None
    low: float | None
    high: float | None


def share(successes: int, n: int) -> ProductionShare:
    bounds = wilson(successes, n)
    if bounds is None:
        return ProductionShare(successes=successes, n=n, pct=None, low=None, high=None)
    return ProductionShare(successes=successes, n=n, pct=round(100 * successes / n, 4),
                           low=round(100 * bounds[0], 4), high=round(100 * bounds[1], 4))


class ProductionFigures(BaseModel):
    model_config = ConfigDict(frozen=True)
    traces: int  # every trace read, provider errors included
    provider_errors: int  # traces whose last model call failed: counted apart
    scored: int  # traces - provider_errors: what the shares are over
    schema_valid: ProductionShare  # traces whose every call is valid against an offered tool
    policy_clean: ProductionShare  # traces with no policy violation
    calls: int
    calls_per_trace: float | None
    unknown_tool_calls: ProductionShare  # calls to a tool the model call was not offered
    violations: dict[str, int]  # policy -> violations, over the scored traces


# The counts every figure is made of; the store sums them per day or release.
COUNTS = ("traces", "provider_errors", "schema_valid", "policy_clean", "calls",
          "unknown_calls")


def figures_of(counts: Mapping[str, Any], violations: Mapping[str, int] | None = None,
               ) -> ProductionFigures:
    """The figures from summed counts (COUNTS, each over the scored traces but `traces` and
    `provider_errors`)."""
    traces, errors = int(counts["traces"]), int(counts["provider_errors"])
    scored = traces - errors
    calls = int(counts["calls"])
    return ProductionFigures(
        traces=traces, provider_errors=errors, scored=scored,
        schema_valid=share(int(counts["schema_valid"]), scored),
        policy_clean=share(int(counts["policy_clean"]), scored),
        calls=calls, calls_per_trace=round(calls / scored, 4) if scored else None,
        unknown_tool_calls=share(int(counts["unknown_calls"]), calls),
        violations=dict(sorted((violations or {}).items())),
    )
