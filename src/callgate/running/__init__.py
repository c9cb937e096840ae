"""Live runs: the plan, the conversation loop with the model and the suite's environment, and
the recording of each attempt (`run`)."""
