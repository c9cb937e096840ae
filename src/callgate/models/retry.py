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

    def delay(self, retry: int, retry_after: float | None, rng: random.Random) -> float:
        """Seconds before retry number `retry` (1-based): jittered exponential backoff, and
        never less than the server's Retry-After."""
        backoff = min(self.max_delay, self.base_delay * 2 ** (retry - 1))
        delay = rng.uniform(backoff / 2, backoff)
        if retry_after is not None:
            # Spread the retries of everyone who was told the same Retry-After.
            delay = max(delay, retry_after + rng.uniform(0, min(1.0, retry_after / 10)))
        return delay
