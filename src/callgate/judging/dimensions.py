"""The dimensions a judge decides, and the JSON it replies with: the tool-choice judge's
tool_choice and arguments, or the one dimension of a judge beyond the call (`answer_kind`: the
kind of a text answer on a no-call case that names one; `claim_support`: whether the trace
backs the final answer's claims; docs/guides/judge.md)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any, Literal, TypeVar

T = TypeVar("T")

Dimension = Literal["tool_choice", "arguments", "answer_kind", "claim_support", "user_fidelity"]
DIMENSIONS: tuple[Dimension, ...] = ("tool_choice", "arguments")
# The judges beyond the call, one dimension each: the kind of a text answer on a no-call case
# that names one, whether the trace backs the final answer's claims (docs/guides/judge.md), and
# whether a scenario's simulated user played its part (docs/simulated-user.md, "Blame").
BEHAVIOUR_DIMENSIONS: tuple[Dimension, ...] = ("answer_kind", "claim_support", "user_fidelity")
AnswerKind = Literal["ask", "cannot", "answer"]
ANSWER_KINDS: tuple[AnswerKind, ...] = ("ask", "cannot", "answer")

OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "tool_choice": {"enum": ["pass", "fail"]},
        "arguments": {"enum": ["pass", "fail", "n/a"]},
        "reason": {"type": "string"},
    },
    "required": ["tool_choice", "arguments", "reason"],
}



def output_schema(dimensions: Sequence[str]) -> dict[str, Any]:
    """The JSON a judge replies with: OUTPUT_SCHEMA for the tool-choice judge, its one
    dimension and a reason for a judge beyond the call."""
    behaviour = [dim for dim in dimensions if dim in BEHAVIOUR_DIMENSIONS]
    if not behaviour:
        return OUTPUT_SCHEMA
    dim = behaviour[0]
    values = list(ANSWER_KINDS) if dim == "answer_kind" else ["pass", "fail"]
    return {"type": "object",
            "properties": {dim: {"enum": values}, "reason": {"type": "string"}},
            "required": [dim, "reason"]}


def vote(outputs: Sequence[T], dim: str) -> T:
    """The sample whose `dim` most samples gave; a tie (three kinds can tie) goes to the
    earliest of the tied samples."""
    votes = Counter(getattr(o, dim) for o in outputs)
    most = max(votes.values())
    return next(o for o in outputs if votes[getattr(o, dim)] == most)
