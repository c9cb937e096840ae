"""Live runs, one concern a module, lowest first: `settings` (what a run is asked to do),
`plan` (every attempt and conversation of the suite), `state` (inputs, counters, the stop
switch), `cache` (stored answers read back, new ones kept: resume), `calls` (one request with
retries), `conversation` (the loop over turns with the suite's environment), `workers` (the
concurrent calls and progress bar) and `run` (`LiveRunner` and `run_live`, tying them together);
`merge` joins shard stores and `limits` bounds the counts for the CLI."""
