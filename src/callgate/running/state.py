"""What a live run holds while it runs: its inputs (suite, candidate, store, settings, client),
its counters (requests, retries, errors, spend), the answers waiting to be committed and the
run's links to them, and the switch that stops it cleanly. `LiveRunner` (module `run`) is built
on it, one concern a class: the cache, the calls, the conversations, the workers, the run."""

from __future__ import annotations

import os
import random
from collections.abc import Mapping
from dataclasses import dataclass, field

from rich.console import Console

from callgate.models.config import Candidate
from callgate.models.providers import Client
from callgate.running.cache import AnswerCache
from callgate.running.counters import RunCounters, StopSwitch
from callgate.running.settings import RunSettings
from callgate.scoring.pipeline import JudgeStep
from callgate.store.db import Store
from callgate.suites.suite import Suite


@dataclass
class RunnerState:
    """The inputs, counters and stop switch of one live run; `LiveRunner` is built on it."""

    suite: Suite
    candidate: Candidate
    store: Store
    release: str
    settings: RunSettings = field(default_factory=RunSettings)
    environ: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    console: Console = field(default_factory=lambda: Console(stderr=True))
    keep_verdicts: bool = True  # every verdict in the result, not only the first failures
    judge: JudgeStep | None = None  # decides the cases whose expectation is judge
    client: Client | None = None  # injected by tests; built from the candidate otherwise
    rng: random.Random = field(default_factory=random.Random)

    def __post_init__(self) -> None:
        self.counters = RunCounters()
        self.switch = StopSwitch()
        self.cache = AnswerCache(
            self.store,
            read=self.settings.cache or self.settings.offline,
            offline=self.settings.offline,
            commit_every=self.settings.commit_every,
        )

    def stop(self, reason: str = "interrupted") -> None:
        """Stop cleanly: no new requests, in-flight ones abandoned, answers kept."""
        self.switch.stop(reason)
