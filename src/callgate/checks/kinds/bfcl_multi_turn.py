"""`bfcl_multi_turn`: BFCL's multi-turn checker (bfcl_eval/eval_checker/multi_turn_eval/
multi_turn_checker.py, `multi_turn_checker`), on the suite's BFCL environment.

The model's calls and the ground truth's run on two fresh sets of BFCL's instances, kept over
the user turns. After each user turn whose ground truth calls anything: the model must have
called something in it, every instance's public attributes must equal the ground truth's, and
the ground truth's results of the turn must all be among the model's results so far (as a
multiset, in any order). The first failing turn decides; docs/bfcl.md maps BFCL's reasons to
verdicts. The calls are replayed here, so a recorded answer and a live run score the same.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any, cast

from callgate.checks.attempt import Attempt, count_text, scored_verdict
from callgate.checks.verdict import ToolVerdict, Verdict
from callgate.suites.bfcl_environment import (
    BfclEnvironment,
    BfclEnvironments,
    parse_source_call,
    public_attributes,
)
from callgate.suites.cases import NOT_OFFERED, BfclMultiTurn, Case
from callgate.suites.environment import EnvironmentError_, EnvironmentFactory
from callgate.suites.responses import ReadTurns, Response

KIND = "bfcl_multi_turn"

Call = tuple[str, dict[str, Any]]

# What `import bfcl-results` records as the finish_reason of a result BFCL's runner fails before
# its checker runs (bfcl_eval/eval_checker/eval_runner.py, `multi_turn_runner`), and why.
INFERENCE_ERROR = "bfcl_inference_error"
FORCE_TERMINATED = "bfcl_force_terminated"
_RUNNER_FAILED = {
    INFERENCE_ERROR: "BFCL's inference failed on this entry (its result is not a list of "
                     "turns: multi_turn:inference_error), which BFCL scores as wrong",
    FORCE_TERMINATED: "BFCL's runner force-terminated this entry (its result has another "
                      "number of user turns than the case: multi_turn:force_terminated), which "
                      "BFCL scores as wrong",
}


def runner_failed(base: dict[str, Any], response: Response) -> Verdict | None:
    """The verdict on a recorded BFCL result its runner fails before checking it (None for any
    other): wrong, no call, and the reason says which of BFCL's rules failed it (not "no call in
    user turn 1"), with what BFCL recorded."""
    why = _RUNNER_FAILED.get(response.finish_reason or "")
    if why is None:
        return None
    recorded = next((turn.content for turn in response.assistant_turns if turn.content), None)
    if recorded:
        why = f"{why}: {_short(recorded)!r}"
    return Verdict(**base, status="scored", calls=0, tool="missing_call", tool_reason=why,
                   arguments="not_applicable", right_tool=False, right_arguments=False)


def checks_the_cut(case: Case, read: ReadTurns) -> bool:
    """Whether a user turn cut by the turn limit is checked like any other. BFCL's inference
    stops a user turn still calling after MAXIMUM_STEP_LIMIT steps and the conversation with it
    (base_handler.py, `force_quit`): cut in an earlier turn, the result is shorter than the
    ground truth and force-terminated (wrong, callgate's turn_limit); cut in its LAST user turn
    it has every turn, and multi_turn_checker checks its state and results as any other."""
    return (isinstance(case.expect, BfclMultiTurn) and read.hit_limit
            and read.reached == 1 + len(case.user_turns or ()))


def _called_name(case: Case, name: str) -> str:
    """The name the model called (BFCL's), from the catalogue name the call is checked as."""
    if name.startswith(NOT_OFFERED):
        return name[len(NOT_OFFERED):]
    return case.sent_names().get(name, name)


def model_turns(attempt: Attempt, user_turns: int) -> list[list[list[Call]]]:
    """The model's calls by user turn, then by step, as BFCL decodes them: a step with a call
    whose arguments are not a JSON object is dropped whole (BFCL's decoder fails on it)."""
    turns: list[dict[int, list[Call | None]]] = [{} for _ in range(user_turns)]
    for index, call in enumerate(attempt.calls):
        turn = attempt.call_turns[index] if attempt.call_turns else 0
        step = attempt.steps[index] if attempt.steps else 0
        entry = None if call.arguments is None else (
            _called_name(attempt.case, call.name), call.arguments)
        turns[min(turn, user_turns - 1)].setdefault(step, []).append(entry)
    return [[[c for c in step if c is not None] for _, step in sorted(by_step.items())
             if all(c is not None for c in step)] for by_step in turns]


def state_difference(model: BfclEnvironment, reference: BfclEnvironment) -> str | None:
    """multi_turn_checker.py `state_checker`: the first class whose public attributes differ."""
    for class_name, expected in reference.instances.items():
        got = public_attributes(model.instances[class_name])
        differing = [name for name, value in public_attributes(expected).items()
                     if got.get(name) != value]
        if differing:
            return f"{class_name} differs from the ground truth's in {', '.join(differing)}"
    return None


def missing_results(expected: Sequence[str], got: Sequence[str]) -> list[str]:
    """multi_turn_checker.py `_is_subsequence_unordered`: the expected results not among
    `got`, each one taken once."""
    left = list(got)
    missing = []
    for item in expected:
        if item in left:
            left.remove(item)
        else:
            missing.append(item)
    return missing


def _short(text: str) -> str:
    return text if len(text) <= 80 else text[:77] + "..."


def _failed(attempt: Attempt, turn: int, steps: list[list[Call]], ground: list[str],
            why: str) -> Verdict:
    """The verdict on the first failing user turn: the tools, by name, of the model's calls
    in it against the ground truth's; the same tools, so the arguments (or order) are wrong."""
    got = Counter(name for step in steps for name, _ in step)
    want = Counter(parse_source_call(text)[0] for text in ground)
    missing, extra = want - got, got - want
    where = f"user turn {turn + 1}"
    tool: ToolVerdict = "right"
    if not got:
        tool, reason = "missing_call", f"no call in {where}; BFCL's ground truth calls " \
            f"{count_text(want)}"
    elif missing and extra:
        tool, reason = "wrong_tool", f"{where}: called {count_text(got)} where BFCL's ground " \
            f"truth calls {count_text(want)}"
    elif missing:
        tool, reason = "missing_call", f"{where}: no call to {count_text(missing)}"
    elif extra:
        tool, reason = "extra_call", f"{where}: also called {count_text(extra)}"
    else:
        reason = ""
    if tool != "right":
        reason = f"{reason}; {why}"
    return scored_verdict(attempt.base, len(attempt.calls), tool, reason, None,
                          lambda: f"{where}: {why}")


# The model's instances and the ground truth's, started for one attempt.
Started = tuple[BfclEnvironment, BfclEnvironment]


def plays_on(factory: EnvironmentFactory | None) -> bool:
    return isinstance(factory, BfclEnvironments)


def _fresh(factory: BfclEnvironments, state: dict[str, Any]) -> BfclEnvironment:
    """A new set of BFCL's instances, as suites.environment.fresh starts one (the state is not
    copied first: BfclEnvironment only reads it, and copies each class's configuration)."""
    try:
        return factory(state)
    except EnvironmentError_:
        raise
    except Exception as exc:
        raise EnvironmentError_(f"the environment could not start: {exc!r}") from exc


def start(factory: EnvironmentFactory | None, case: Case) -> Started:
    """The two sets of instances an attempt's check plays on; EnvironmentError_ when BFCL's
    classes cannot start."""
    if not isinstance(factory, BfclEnvironments):
        raise ValueError(f"case {case.id}: a bfcl_multi_turn expectation needs a BFCL "
                         "environment")
    state = case.state or {}
    return _fresh(factory, state), _fresh(factory, state)


def check(attempt: Attempt, expect: BfclMultiTurn) -> Verdict:
    try:
        model, reference = cast(Started, attempt.started) or start(attempt.environment,
                                                                   attempt.case)
    except EnvironmentError_ as exc:
        return Verdict(**attempt.base, status="environment_error", calls=len(attempt.calls),
                       tool_reason=f"environment error, not the model's: {exc}")
    so_far: list[str] = []  # every result the model's calls got, over the turns
    for turn, (ground, steps) in enumerate(zip(expect.ground_truth,
                                               model_turns(attempt, len(expect.ground_truth)),
                                               strict=True)):
        for step in steps:
            so_far += model.run_all(step)
        expected = [reference.call_source(text) for text in ground]
        if not ground:  # a turn where the request cannot be met: anything goes
            continue
        if not steps:
            return _failed(attempt, turn, steps, ground, "BFCL's empty-turn rule")
        difference = state_difference(model, reference)
        if difference is not None:
            return _failed(attempt, turn, steps, ground, f"state: {difference}")
        missing = missing_results(expected, so_far)
        if missing:
            return _failed(attempt, turn, steps, ground,
                           f"{len(missing)} of the ground truth's results never came, first "
                           f"{_short(missing[0])!r}")
    return scored_verdict(attempt.base, len(attempt.calls), "right", "", None, lambda: None,
                          right_reason="state and results as BFCL's ground truth's, at the "
                          "end of every user turn")
