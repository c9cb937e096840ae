"""The agent under test as the thing a live run calls (`run --target`): a Python function, an
HTTP endpoint or a pool of JSON Lines processes, all speaking one contract (`contract`), asked
once per attempt through the run's retries, timeouts and cache (`caller`, `session`)."""
