"""The settings of a live run: repeats, concurrency (None: adaptive), per-request timeout,
cache and offline switches, the retry policy, how often answers are committed, the progress
bar, the shard, whether server errors count as wrong answers and the share of excluded
attempts above which a finished run is not a result.
Checked at the boundary (pydantic), so a bad value is refused before any call is made."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from callgate.checks.verdict import ServerErrors
from callgate.models.retry import RetryPolicy
from callgate.running.limits import MAX_CONCURRENCY, MAX_REPEATS
from callgate.suites.shard import Shard


class RunSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    repeats: int = Field(3, ge=1, le=MAX_REPEATS)
    # More repeats for some cases (an adaptive run's re-asked cases, `run --until-decided`):
    # case id -> repeats, above `repeats`; the first repeats come from the store
    case_repeats: dict[str, Annotated[int, Field(ge=1, le=MAX_REPEATS)]] = Field(
        default_factory=dict)
    concurrency: int | None = Field(
        None, ge=1, le=MAX_CONCURRENCY,
        description="requests in flight, exactly; None adapts to the provider (models.pacing)")
    timeout: float = Field(120.0, gt=0, description="seconds per request")
    cache: bool = Field(True, description="reuse stored answers; False calls every attempt")
    offline: bool = Field(False, description="never call: a missing answer is an error")
    retry: RetryPolicy = RetryPolicy()
    commit_every: float = Field(0.25, gt=0, description="seconds between commits of answers")
    progress: bool = True
    shard: Shard | None = Field(None, description="run only the cases of this shard")
    server_errors: ServerErrors = Field(
        "exclude", description="count: a server error after retries is a wrong answer")
    max_excluded: float | None = Field(
        None, ge=0, le=1, description="a finished run with a larger share of its attempts "
        "excluded is stored marked not a result (scoring.result); None: never marked")
    max_cost: float | None = Field(
        None, gt=0, description="USD: start no attempt that would take the spend past it")
    max_attempts: int | None = Field(
        None, ge=1, description="call at most this many attempts (the store's do not count)")
    perturbation: str | None = Field(
        None, description="the run's tool surface worded another way (run --perturb): its "
        "marker (JSON, suites/perturb.py), stored with the run and salting its cache keys")
