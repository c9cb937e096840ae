"""What the user_fidelity judge reads of a scenario conversation (`run --user-judge`,
docs/simulated-user.md, "Blame"): the scenario the simulated user was given (instructions,
known facts, secrets, done_when) as the rubric, the case's opening messages as the
conversation, and as the response the whole conversation as the user saw it (the agent's
messages for context) with the turns the simulator wrote apart, the only ones it judges. No
tool is shown: calls and results are the agent's business. Its verdict `fail` (the user
contradicted the scenario, or volunteered or leaked what it should not) blames the simulator,
as the deterministic checks (checks.simulator_blame) do."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from callgate.errors import CallgateError
from callgate.judging.judge import JudgeOutput
from callgate.judging.step import JudgeStep, Outcome, Payloads
from callgate.store.db import Store
from callgate.suites.cases import Scenario

DIMENSION = "user_fidelity"


def scenario_rubric(scenario: Scenario) -> str:
    """The scenario as the judge reads it (secrets included: what the user must not say)."""
    return json.dumps({"instructions": scenario.instructions, "known": scenario.known,
                       "secret": scenario.secret, "done_when": scenario.done_when},
                      ensure_ascii=False, sort_keys=True)


def fidelity_payloads(opening: Sequence[dict[str, Any]], scenario: Scenario,
                      transcript: Sequence[dict[str, str]], simulated: Sequence[str]
                      ) -> Payloads:
    """The judge's (case, response) documents, and what its verdict is cached under."""
    case_doc = {"messages": list(opening), "tools": [], "rubric": scenario_rubric(scenario)}
    after = list(transcript)[_shown(opening):]  # the opening messages are in case_doc
    return case_doc, {"conversation": after, "simulated_user_turns": list(simulated)}


def _shown(opening: Sequence[dict[str, Any]]) -> int:
    """How many of the opening messages the user's transcript shows (as the simulator's
    prompt does, models.simulated_user: the ones with text, not the agent's calls)."""
    return sum(1 for m in opening if m.get("role") in ("user", "assistant")
               and isinstance(m.get("content"), str) and not m.get("tool_calls"))


def refuse_other(step: JudgeStep) -> None:
    """`--user-judge` must be a judge of user_fidelity (as --claims-judge of claim_support)."""
    if step.judge.spec.dimensions != (DIMENSION,):
        raise CallgateError(f"--user-judge: judge {step.judge.spec.name} decides "
                            f"{', '.join(step.judge.spec.dimensions)}, not {DIMENSION}")


def blame_of(outcome: Outcome) -> list[str]:
    """Why the judge blames the simulator (empty: it passed, or gave no verdict: a judge error
    leaves the failure the agent's, as without the judge)."""
    if isinstance(outcome, JudgeOutput) and outcome.user_fidelity == "fail":
        return [f"the user_fidelity judge: {outcome.reason or 'it did not play its part'}"]
    return []


async def judged_blame(step: JudgeStep, store: Store, payloads: Payloads) -> list[str]:
    """One conversation judged (from the judge's cache when it was before)."""
    done: dict[int, Outcome] = {}
    await step.judge_all(store, {0: payloads}, done)
    return blame_of(done.get(0, "not judged"))
