"""The verdict: what the checks (and the judge) decided about one attempt (case × repeat).

The store keeps one row per verdict in table `verdicts` (`callgate.store.schema.VERDICT_COLUMNS`
names its columns, which are this model's fields and the run's id).
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, field_validator

ToolVerdict = Literal[
    "right", "wrong_tool", "unexpected_call", "missing_call", "extra_call", "turn_limit"
]
ArgsVerdict = Literal["right", "invalid_json", "schema_violation", "wrong_value", "not_applicable"]
# judge_error: the judge's reply was not a verdict (after the spec's retries); excluded and
# counted like a provider error.
# target_error: the agent under test (`run --target`) crashed, hung or gave no readable reply;
# excluded like a provider error, never the model's mistake.
# user_error: the simulated user (a case's scenario, `run --user`) failed the conversation: it
# ended before any call, said a secret, or its model failed; excluded and counted apart.
Status = Literal["scored", "truncated", "provider_error", "environment_error", "pending_judge",
                 "judge_error", "target_error", "user_error"]
# What a server error (a 5xx after retries) is: excluded like every provider error (the default),
# or counted as a wrong answer, when the serving stack is what is released.
ServerErrors = Literal["count", "exclude"]
SchemaKind = Literal["missing_required", "wrong_type", "bad_enum", "unknown_param", "other"]
# What the JSON and schema checks found: (verdict, schema sub-kind, reason), or None.
Problems = tuple[ArgsVerdict, SchemaKind | None, str] | None



class Violation(BaseModel):
    """A policy the attempt broke (callgate.checks.policies), with why."""

    model_config = ConfigDict(frozen=True)
    policy: str
    reason: str


class Verdict(BaseModel):
    """The outcome of one attempt (case × repeat), with reasons a person can act on."""

    model_config = ConfigDict(frozen=True)
    case_id: str
    repeat: int
    status: Status
    tool: ToolVerdict | None = None
    tool_reason: str = ""
    arguments: ArgsVerdict | None = None
    schema_kind: SchemaKind | None = None
    arguments_reason: str = ""
    calls: int = 0
    right_tool: bool = False
    right_arguments: bool = False
    state_hash: str | None = None  # the final state's SHA-256, for final_state expectations
    # The catalogue name of the first call made ("" for none) on a scored attempt; None where
    # no answer was read (excluded) or in a store scored before it was kept. The gate's
    # confusion table (expected tool x first-called tool) is counted from it.
    first_tool: str | None = None
    # The policies the attempt broke; the store keeps them as JSON (NULL: none).
    violations: tuple[Violation, ...] = ()

    @field_validator("violations", mode="before")
    @classmethod
    def _stored(cls, raw: Any) -> Any:
        if raw is None:
            return ()
        return json.loads(raw) if isinstance(raw, str) else raw

    @property
    def reason(self) -> str:
        parts = [p for p in (self.tool_reason, self.arguments_reason) if p]
        return "; ".join(parts)
