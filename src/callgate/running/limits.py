"""Bounds of a live run's counts, in a module light enough for the CLI to import before it
knows which command runs (its help text names them)."""

from __future__ import annotations

# Every repeat is one more paid call per case. pass^k is reported up to k = 8
# (scoring.scores.MAX_K), and at 100 repeats one case's pass rate is known within ±10 points
# (95% Wilson interval, the worst case); the gate pairs cases, so more evidence comes from more
# cases. Past 100, a repeat count is far more likely a typo (-k 30000) than a plan.
MAX_REPEATS = 100
# Requests in flight do not change what a run costs, only how hard it presses the provider;
# this bound only catches a typo before it opens thousands of connections.
MAX_CONCURRENCY = 4096
