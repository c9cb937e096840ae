"""Stage 5, the gate: compare a release with the last released one of the same agent and suite.

A release belongs to an agent (a stable name; without one, the model id) and records the model
id it ran with: a model change under one agent is compared and named, and a first release of an
agent on a suite another agent has released on is inconclusive until the user says which line
it continues (`--baseline-agent`) or that it starts one (`--new-agent`).

The rule (Agent Wranglers' tool-choice gate): fail when right tool % or right arguments % is
more than `max_drop` points below the baseline; exactly `max_drop` below passes. Around the rule,
the figures a user needs to trust it: paired cases, an exact McNemar test, Wilson intervals and
the smallest drop the suite can detect (computed in `gating.statistics`).

The parts, in the order a gate goes through them: `cases` (a case's attempts tallied over its
repeats), `scores_file` (what is kept with a release), `finding` (the release and its
baseline), `decision` (the rule and the figures around it). This module names them all.
"""

from __future__ import annotations

from callgate.gating.cases import CaseRecord, case_records, changed_cases, figures_of
from callgate.gating.decision import (
    DEFAULT_MAX_DROP,
    EPSILON,
    EXIT_CODES,
    CaseChange,
    FigureCheck,
    GateDecision,
    OtherAgent,
    decide,
    judge_as_given,
    record_of,
)
from callgate.gating.finding import (
    baseline_from_path,
    baseline_in_store,
    find_current,
    other_agent_in_store,
    paired_releases,
    stored_release,
    with_cases,
)
from callgate.gating.scores_file import (
    FORMAT,
    RELEASED,
    ReleaseScores,
    gate_of,
    read_release_file,
    release_from_run,
    why_not_a_baseline,
)
from callgate.scoring.result import GateRecord, Outcome, not_a_result

__all__ = [
    "DEFAULT_MAX_DROP", "EPSILON", "EXIT_CODES", "FORMAT", "RELEASED", "CaseChange",
    "CaseRecord", "FigureCheck", "GateDecision", "GateRecord", "OtherAgent", "Outcome",
    "ReleaseScores", "baseline_from_path", "baseline_in_store", "case_records",
    "changed_cases", "decide", "figures_of", "find_current", "gate_of", "judge_as_given",
    "not_a_result", "other_agent_in_store", "paired_releases", "read_release_file",
    "record_of", "release_from_run", "stored_release", "why_not_a_baseline", "with_cases",
]

