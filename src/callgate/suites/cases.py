"""The suite's data: tool objects, expected calls, expectations, match rules and cases, as
pydantic models (docs/formats.md). `callgate.suites.suite` loads and checks them."""

from __future__ import annotations

from collections.abc import Iterable
from functools import cached_property
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from callgate.suites.faults import AfterFault, FaultRule
from callgate.suites.matchers import Matcher, matcher_kind, read_matcher
from callgate.suites.policies import Policies

Mode = Literal["strict", "unordered", "superset", "subset"]
ArgRule = Literal["exact", "key", "ignore"]

EMPTY_PARAMETERS: dict[str, Any] = {"type": "object", "properties": {}}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class FunctionSpec(_Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9_.-]{1,64}$")
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: dict(EMPTY_PARAMETERS))
    strict: bool | None = None


class ToolHints(_Strict):
    """An MCP tool's annotations as `suite tools --mcp` keeps them in tools.json (a callgate
    extension beside `function`, never sent to the model): hints the server gives about what
    the tool does, absent where it gave none (docs/tool-surface.md)."""

    readOnlyHint: bool | None = None  # MCP spells them so
    destructiveHint: bool | None = None
    idempotentHint: bool | None = None
    openWorldHint: bool | None = None


class Tool(_Strict):
    type: Literal["function"] = "function"
    function: FunctionSpec
    annotations: ToolHints | None = None  # kept in tools.json, stripped from what is sent


class ArgSpec(_Strict):
    """Acceptable values of one key argument: listed values (`one_of`; a literal is a list of
    one) or one matcher of another kind (callgate.suites.matchers)."""

    one_of: tuple[Any, ...] = ()
    matcher: Matcher | None = None
    optional: bool = False

    @model_validator(mode="after")
    def _one_way(self) -> ArgSpec:
        if bool(self.one_of) == (self.matcher is not None):
            raise ValueError("a key argument is listed values (one_of) or one matcher")
        return self


def _parse_arg_spec(key: str, raw: Any, context: Any) -> ArgSpec:
    if isinstance(raw, dict) and "one_of" in raw and set(raw) <= {"one_of", "optional"}:
        if not isinstance(raw["one_of"], list) or not raw["one_of"]:
            raise ValueError("one_of must be a non-empty list of acceptable values")
        return ArgSpec.model_validate(raw)
    kind = matcher_kind(raw) if isinstance(raw, dict) else None
    if kind is None:
        return ArgSpec(one_of=(raw,))
    optional = raw.get("optional", False)
    if not isinstance(optional, bool):
        raise ValueError(f"{key}: optional must be true or false")
    fields = {key: value for key, value in raw.items() if key != "optional"}
    return ArgSpec(matcher=read_matcher(kind, fields, key, context), optional=optional)


class ExpectedCall(BaseModel):
    model_config = _Strict.model_config  # not on _Strict: two classes are built on this one
    tool: str
    args: dict[str, ArgSpec] = Field(default_factory=dict)

    @cached_property
    def memo(self) -> dict[Any, Any]:
        """Room for what the checks work out once from this call (its compiled matcher), kept
        with it and gone with it. Not a field: never dumped, compared or stored."""
        return {}

    @field_validator("args", mode="before")
    @classmethod
    def _args(cls, raw: Any, info: ValidationInfo) -> Any:
        if not isinstance(raw, dict):
            raise ValueError("args must be an object of key arguments")
        return {key: _parse_arg_spec(key, value, info.context) for key, value in raw.items()}


class TrajectoryCall(ExpectedCall):
    """A reference call of a trajectory; calls sharing a step may come in any order."""

    step: int = Field(ge=0)


class ReferenceCall(_Strict):
    """A call replayed on the environment: full arguments, passed to the tool as they are."""

    tool: str
    args: dict[str, Any] = Field(default_factory=dict)


class ScriptedToolResult(ExpectedCall):
    """What a call gets back when its tool and key arguments match (the first entry wins)."""

    result: Any


# The kind of text answer a no-call case needs (issue 37): a follow-up question for missing
# information, saying it cannot, an answer from what the agent knows, or any of them.
AnswerKind = Literal["ask", "cannot", "answer", "any"]
ANSWER_KINDS = {"ask": "a follow-up question", "cannot": "saying it cannot",
                "answer": "a direct answer", "any": "any text answer"}


class NoCall(_Strict):
    type: Literal["no_call"]
    # A call is never any of these kinds; which kind a text answer is is not decided here.
    answer: AnswerKind = "any"


class Calls(_Strict):
    type: Literal["calls"]
    mode: Mode = "strict"
    calls: list[ExpectedCall] = Field(min_length=1)


class Alternatives(_Strict):
    type: Literal["alternatives"]
    mode: Mode = "strict"
    alternatives: list[list[ExpectedCall]] = Field(min_length=1)

    @field_validator("alternatives")
    @classmethod
    def _non_empty(cls, value: list[list[ExpectedCall]]) -> list[list[ExpectedCall]]:
        for index, calls in enumerate(value):
            if not calls:
                raise ValueError(f"alternative {index} is empty; use a no_call expectation")
        return value


class JudgeRubric(_Strict):
    type: Literal["judge"]
    rubric: str = Field(min_length=1)


class Trajectory(_Strict):
    """The sequence of calls over every turn, compared in a mode (docs/formats.md)."""

    type: Literal["trajectory"]
    mode: Mode = "strict"
    args: ArgRule = "key"
    per_tool: dict[str, ArgRule] = Field(default_factory=dict)
    calls: list[TrajectoryCall] = Field(min_length=1)

    @field_validator("calls", mode="before")
    @classmethod
    def _default_steps(cls, raw: Any) -> Any:
        # A call without a step gets its position: one call per step, in order.
        if not isinstance(raw, list):
            return raw
        return [
            {"step": index, **item} if isinstance(item, dict) and "step" not in item else item
            for index, item in enumerate(raw)
        ]


class FinalState(_Strict):
    """Right when the agent's calls leave the environment as the reference calls do; with
    `per_turn` (the reference calls of each user turn), at the end of every user turn."""

    type: Literal["final_state"]
    calls: list[ReferenceCall]
    per_turn: list[list[ReferenceCall]] | None = None

    @model_validator(mode="before")
    @classmethod
    def _calls_of_every_turn(cls, raw: Any) -> Any:
        # `calls` is the whole conversation's reference: per_turn's calls in order.
        if not isinstance(raw, dict) or not isinstance(raw.get("per_turn"), list):
            return raw
        if not all(isinstance(turn, list) for turn in raw["per_turn"]):
            return raw
        every = [call for turn in raw["per_turn"] for call in turn]
        if "calls" in raw and raw["calls"] != every:
            raise ValueError("calls: give the reference calls once: in calls, or by user turn "
                             "in per_turn")
        return {**raw, "calls": every}


class AnyCall(_Strict):
    """Right with any tool call at all (BFCL's relevance): arguments are not compared."""

    type: Literal["any_call"]


class BfclMultiTurn(_Strict):
    """BFCL's multi-turn check: per user turn, the ground-truth calls (as BFCL writes them,
    `cd(folder='x')`) and the model's run on separate instances of the suite's BFCL
    environment, then compared by state and by results (docs/bfcl.md)."""

    type: Literal["bfcl_multi_turn"]
    ground_truth: list[list[str]] = Field(min_length=1)


Expectation = Annotated[
    NoCall | Calls | Alternatives | JudgeRubric | AnyCall | Trajectory | FinalState
    | BfclMultiTurn,
    Field(discriminator="type"),
]


class MatchRules(_Strict):
    """How a suite's calls are judged, where it carries rules other than callgate's defaults.

    Read from suite.json's optional `match` object; the defaults are callgate's own rules.
    docs/formats.md describes each field and docs/bfcl.md why BFCL's suites need them.
    """

    values: Literal["json", "bfcl"] = "json"
    unlisted_args: Literal["ignore", "reject"] = "ignore"
    pairing: Literal["optimal", "first_fit"] = "optimal"
    schema_: Literal["full", "top_level"] = Field("full", alias="schema")
    source_types: dict[str, dict[str, dict[str, str]]] = {}  # Java/JS types (docs/bfcl.md)


DEFAULT_MATCH = MatchRules()


def top_level_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """What `schema: top_level` validates: required parameters given, none undeclared."""
    out: dict[str, Any] = {
        "type": "object",
        "properties": {key: {} for key in schema.get("properties", {})},
    }
    if "required" in schema:
        out["required"] = schema["required"]
    return out


class Message(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)
    role: Literal["system", "developer", "user", "assistant", "tool"]


class OfferedAs(_Strict):
    """A catalogue tool offered in one case under another name: the model sees `name`, and its
    calls to `name` are checked as calls to `tool` (docs/formats.md)."""

    tool: str
    name: str = Field(pattern=r"^[A-Za-z0-9_.-]{1,64}$")


# A call to a catalogue name that this case sends under another name, so never offered as such.
NOT_OFFERED = "(not offered) "


class SuiteDefaults(_Strict):
    """suite.json's `system` message and `tools`, for every case that carries none of its
    own: a case without a system or developer message gets `system` first, a case without
    `tools` is offered these (docs/formats.md). Applied to each case's line as it is read, so
    what is sent, stored and fingerprinted is the case as applied."""

    system: Message | None = None
    tools: list[str | OfferedAs] | None = None

    def applied(self, raw: dict[str, Any]) -> dict[str, Any]:
        """A case's JSON object as it is sent and kept: `raw` itself when nothing applies."""
        out = raw
        messages = raw.get("messages")
        if self.system is not None and isinstance(messages, list) and not any(
                isinstance(message, dict) and message.get("role") in ("system", "developer")
                for message in messages):
            out = {**out, "messages": [self.system.model_dump(), *messages]}
        if self.tools is not None and raw.get("tools") is None:
            out = {**out, "tools": [entry if isinstance(entry, str) else entry.model_dump()
                                    for entry in self.tools]}
        return out

    @field_validator("system", mode="before")
    @classmethod
    def _system_text(cls, raw: Any) -> Any:
        if isinstance(raw, str):
            if not raw:
                raise ValueError("must be a non-empty string or a system message object")
            return {"role": "system", "content": raw}
        return raw

    @field_validator("system")
    @classmethod
    def _system_role(cls, message: Message | None) -> Message | None:
        if message is not None and message.role not in ("system", "developer"):
            raise ValueError("must be a message of role system or developer")
        return message


class UserTurn(_Strict):
    """A later user turn of a conversation: its messages, sent after the model has answered
    the turn before without a call, and the catalogue tools offered from this turn on."""

    messages: list[Message] = Field(min_length=1)
    add_tools: list[str | OfferedAs] = Field(default_factory=list)

    def added_keys(self) -> list[str]:
        """The catalogue names of the tools this turn adds."""
        return [t.tool if isinstance(t, OfferedAs) else t for t in self.add_tools]

    @field_validator("messages")
    @classmethod
    def _user_messages(cls, messages: list[Message]) -> list[Message]:
        for index, message in enumerate(messages):
            if message.role != "user":
                raise ValueError(f"[{index}].role: a later user turn holds user messages only, "
                                 f"not {message.role!r}")
        return messages


class Scenario(_Strict):
    """A model plays the user instead of scripted later turns (docs/simulated-user.md): who
    they are and what they want, what they know (and may tell when asked), what they must
    never say, and when they are done."""

    instructions: str = Field(min_length=1)
    known: dict[str, str | int | float | bool] = Field(default_factory=dict)
    # Values the simulated user must never say (what the agent must find out with a tool, an
    # expected argument): one said is the simulator's failure, not the agent's.
    secret: list[Annotated[str, Field(min_length=1)]] = Field(default_factory=list)
    done_when: str | None = Field(None, min_length=1)
    max_user_turns: int = Field(5, ge=1, le=50)  # simulated user turns after `messages`


class Case(_Strict):
    id: str = Field(min_length=1)
    messages: list[Message] = Field(min_length=1)
    tools: list[str | OfferedAs] | None = None
    tags: list[str] = Field(default_factory=list)
    expect: Expectation
    note: str | None = None
    # Why no answer can be right (a benchmark's case whose own answer key cannot be met): the
    # case counts in every share and its arguments verdict is never right.
    never_right: str | None = Field(None, min_length=1)
    state: dict[str, Any] | None = None  # the environment's initial state
    tool_results: list[ScriptedToolResult] | None = None
    max_turns: int = Field(10, ge=1)  # per user turn
    user_turns: list[UserTurn] | None = Field(None, min_length=1)  # after `messages`
    policies: Policies | None = None  # replace the suite's, field by field (docs/policies.md)
    # Calls that fail on their way to the model, and what it should do then (docs/faults.md)
    faults: list[FaultRule] | None = Field(None, min_length=1)
    after_fault: AfterFault | None = None
    scenario: Scenario | None = None  # a model writes the later user turns (run --user)

    @model_validator(mode="after")
    def _last_message_is_not_assistant(self) -> Case:
        if self.messages[-1].role == "assistant":
            raise ValueError(
                "messages: the last message is the assistant's; nothing is left to answer")
        if self.scenario is not None and self.user_turns is not None:
            raise ValueError("scenario: a case gives scripted user_turns or a scenario for a "
                             "simulated user, not both")
        return self

    def tool_keys(self) -> list[str] | None:
        """The catalogue names of the tools this case offers (None: the whole catalogue)."""
        if self.tools is None:
            return None
        return [t.tool if isinstance(t, OfferedAs) else t for t in self.tools]

    def offered_names(self, catalogue: Iterable[str], user_turn: int | None = None) -> set[str]:
        """The catalogue names of the tools offered in this case: its `tools` (and those its
        user turns add, up to `user_turn`, 0 being `messages`; None: every turn), else all."""
        keys = self.tool_keys()
        if keys is None:
            return set(catalogue)
        later = self.user_turns or []
        if user_turn is not None:
            later = later[:user_turn]
        return set(keys).union(*(turn.added_keys() for turn in later))

    def sent_names(self) -> dict[str, str]:
        """Catalogue name -> the name the model is sent, for the tools offered under another."""
        if self.user_turns is None and not self.tools:  # (asked once per attempt checked)
            return {}
        added = [t for turn in self.user_turns or () for t in turn.add_tools]
        return {t.tool: t.name for t in [*(self.tools or ()), *added] if isinstance(t, OfferedAs)}

    def called_as(self) -> dict[str, str]:
        """A called name -> the catalogue name it is checked as, where they differ (empty for a
        case that offers every tool under its own name)."""
        sent = self.sent_names()
        if not sent:
            return {}
        renames = {key: NOT_OFFERED + key for key in sent if key not in sent.values()}
        renames.update({name: key for key, name in sent.items()})
        return renames

    def expected_call_lists(self) -> list[list[ExpectedCall]]:
        """The listed valid answers: one list for `calls`, several for `alternatives`."""
        expect = self.expect
        if isinstance(expect, Calls):
            return [expect.calls]
        if isinstance(expect, Alternatives):
            return expect.alternatives
        return []
