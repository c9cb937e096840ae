"""What the judge sees of a case and a response: the same view for scoring and calibration."""

from __future__ import annotations

from typing import Any

from callgate.checks.parsing import parse_calls
from callgate.checks.tool_answers import ToolAnswers
from callgate.suites.environment import EnvironmentError_
from callgate.suites.responses import AssistantMessage, Response, read_turns
from callgate.suites.suite import Case, JudgeRubric, Suite
from callgate.suites.tool_messages import tool_message_content


def _message_doc(message: AssistantMessage | None) -> dict[str, Any]:
    return {
        "content": message.content if message else None,
        "tool_calls": [{"name": c.name, "arguments": c.arguments}
                       for c in (message.tool_calls if message else ())],
    }


def trajectory_messages(suite: Suite, case: Case, response: Response) -> list[dict[str, Any]]:
    """A multi-turn attempt as the judge reads it: each assistant turn the checks count (up to
    max_turns) and, before the next turn, one `tool` message per call with the result it got
    back, computed again by the live loop's own code on a fresh environment (so the same JSON
    text the model was sent; a recorded attempt gets the results a live one would have). A turn
    whose calls the environment failed on gets no results, as in the loop; so do the turns of
    a case whose calls get no results at all. A later user turn's messages come before its
    first answer, and its calls get the results of the tools offered by then."""
    read = read_turns(case, response)
    turns, later = read.turns, suite.raw_cases[case.id].get("user_turns") or []
    answer = (ToolAnswers(suite, case, suite.tool_results(case, response.repeat))
              if suite.loops(case) else None)
    out: list[dict[str, Any]] = []
    for index, turn in enumerate(turns):
        user_turn = read.user_turn[index]
        if index and user_turn != read.user_turn[index - 1]:  # a later user turn's messages
            out.extend(later[user_turn - 1]["messages"])
        out.append({"role": "assistant", **_message_doc(turn)})
        if answer is None or index == len(turns) - 1:
            continue
        answer.offer_turn(user_turn)
        calls = parse_calls(turn.tool_calls, case.called_as())
        try:
            results = [answer(call) for call in calls]
        except EnvironmentError_:
            answer = None  # the loop stopped here; the state after it is unknown
            continue
        out.extend({"role": "tool", "name": call.name,
                    "content": tool_message_content(result)}
                   for call, result in zip(calls, results, strict=True))
    return out


def judge_payloads(suite: Suite, case: Case, response: Response
                   ) -> tuple[dict[str, Any], dict[str, Any]]:
    """What the judge sees of a case and a response (and what its verdict is cached under).

    One turn: its `content` and `tool_calls`. Several turns: `turns`, the whole trajectory with
    the tool results between the turns (see `trajectory_messages`)."""
    rubric = case.expect.rubric if isinstance(case.expect, JudgeRubric) else ""
    case_doc = {"messages": suite.raw_cases[case.id]["messages"],
                "tools": suite.offered_tools(case), "rubric": rubric}
    if case.user_turns is not None:
        case_doc["user_turns"] = suite.raw_cases[case.id]["user_turns"]
    turns = response.turns[: case.max_turns] if response.turns is not None else None
    if turns is not None and len(turns) > 1:
        return case_doc, {"turns": trajectory_messages(suite, case, response)}
    return case_doc, _message_doc(turns[0] if turns else response.message)
