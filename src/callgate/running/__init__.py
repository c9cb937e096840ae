"""Live runs, one concern a module, lowest first: `settings` (what a run is asked to do),
`plan` (every attempt and conversation of the suite), `counters` (counts, progress bar, stop
switch), `cache` (stored answers read back, new ones kept: resume), `calls` (`Caller`: one
request with retries), `conversation` (`converse`: the loop over turns with the suite's
environment), `record` (what the run answered, linked and counted), `workers` (the concurrent
loop) and `run` (`LiveRunner`, which wires them for one run, and `run_live`); `limits` bounds
the counts for the CLI. Shard stores are joined by `callgate.merging`."""
