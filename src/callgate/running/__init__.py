"""Live runs, one concern a module, lowest first: `settings` (what a run is asked to do), `plan`
(every attempt and conversation of the suite), `counters` (counts, progress bar, stop switch),
`cache` (stored answers read back, new ones kept: resume), `source` (the one protocol of what
answers a run: ask for the next assistant message given the conversation so far), `calls`
(`Caller`: one request to any source with retries and pacing), `conversation` (`converse`: the
one loop over user turns), `model_source` (a model, and its turns with the suite's environment;
`targets` holds the agent under test), `record` (what the run answered, linked and counted),
`workers` (the concurrent loop) and `run` (`LiveRunner`, which wires them for one run, and
`run_live`); `limits` bounds the counts for the CLI. Shard stores are joined by
`callgate.merging`."""
