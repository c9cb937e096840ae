"""When a failed request to a model is sent again (live runs and the judge alike)."""

from __future__ import annotations

import random

from pydantic import BaseModel, ConfigDict, Field


class RetryPolicy(BaseModel):
    """When a failed request is sent again."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    max_retries: int = Field(5, ge=0, description="per attempt")
    base_delay: float = Field(1.0, ge=0, description="seconds before the first retry")
    max_delay: float = Field(30.0, ge=0, description="cap of one backoff")
    max_wait: float = Field(300.0, ge=0, description="per attempt: no retry would end later")
    budget: int | None = Field(
        None, ge=0, description="retries for the whole run; default: one per attempt called, ≥ 20"
    )

    def give_up(self, tries: int, retries_left: int, elapsed: float,
                retry_after: float | None) -> str | None:
        """None to retry a retryable failure after `tries` tries and `elapsed` seconds, with
        `retries_left` of the run's budget; else a note on why not."""
        if tries > self.max_retries:
            return f" (gave up after {tries} tries)"
        if retries_left <= 0:
            return " (the run's retry budget is spent)"
        soonest = max(retry_after or 0.0, self.base_delay / 2)
        if elapsed + soonest > self.max_wait:
            return f" (a retry would pass the {self.max_wait:g} s wait limit)"
        return None

    def delay(self, retry: int, retry_after: float | None, rng: random.Random) -> float:
        """Seconds before retry number `retry` (1-based): jittered exponential backoff, and
        never less than the server's Retry-After."""
        backoff = min(self.max_delay, self.base_delay * 2 ** (retry - 1))
        delay = rng.uniform(backoff / 2, backoff)
        if retry_after is not None:
            # Spread the retries of everyone who was told the same Retry-After.
            delay = max(delay, retry_after + rng.uniform(0, min(1.0, retry_after / 10)))
        return delay
