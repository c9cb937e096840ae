"""Stage 5, the gate: compare a release with the last released one of the same agent and suite.

A release belongs to an agent (a stable name; without one, the model id) and records the model
id it ran with: a model change under one agent is compared and named, and a first release of an
agent on a suite another agent has released on is inconclusive until the user says which line
it continues (`--baseline-agent`) or that it starts one (`--new-agent`).

The rule (Agent Wranglers' tool-choice gate): fail when right tool % or right arguments % is
more than `max_drop` points below the baseline; exactly `max_drop` below passes. Around the rule,
the figures a user needs to trust it: paired cases, an exact McNemar test, Wilson intervals and
the smallest drop the suite can detect (`statistics`).

The parts, in the order a gate goes through them: `cases` (a case's attempts tallied over its
repeats, and two releases' cases paired), `scores_file` (what is kept with a release),
`finding` (the release and its baseline), `decision` (the rule and the figures around it), and
`release` (a stored release gated and the decision recorded: `gate_release`).
"""
