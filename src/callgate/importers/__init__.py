"""Suites imported from public benchmarks (`bfcl`: the Berkeley Function Calling Leaderboard)."""
