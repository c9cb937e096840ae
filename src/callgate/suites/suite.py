"""Stage 1, the dataset: a tool catalogue plus cases with expectations.

A suite is a directory holding `tools.json` (OpenAI function-tool objects, exactly what is sent
to the model), `cases.jsonl` (one case per line) and an optional `suite.json`. See
docs/formats.md for the format.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import sys
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Annotated, Any, Literal

from jsonschema import Draft7Validator
from jsonschema.exceptions import SchemaError
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from callgate.errors import InputError
from callgate.reading import canonical_json, json_lines, names_lines, read_json, validate
from callgate.suites import schemas
from callgate.suites.environment import (
    EnvironmentError_,
    EnvironmentFactory,
    environment_fingerprint,
    load_environment,
    replay,
)

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


class Tool(_Strict):
    type: Literal["function"] = "function"
    function: FunctionSpec


class ArgSpec(_Strict):
    """Acceptable values of one key argument."""

    one_of: tuple[Any, ...] = Field(min_length=1)
    optional: bool = False


def _parse_arg_spec(raw: Any) -> ArgSpec:
    if isinstance(raw, dict) and "one_of" in raw and set(raw) <= {"one_of", "optional"}:
        if not isinstance(raw["one_of"], list):
            raise ValueError("one_of must be a list of acceptable values")
        return ArgSpec.model_validate(raw)
    return ArgSpec(one_of=(raw,))


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
    def _args(cls, raw: Any) -> Any:
        if not isinstance(raw, dict):
            raise ValueError("args must be an object of key arguments")
        return {key: _parse_arg_spec(value) for key, value in raw.items()}


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


class NoCall(_Strict):
    type: Literal["no_call"]


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
    """Right when the agent's calls leave the environment as the reference calls do."""

    type: Literal["final_state"]
    calls: list[ReferenceCall]


class AnyCall(_Strict):
    """Right with any tool call at all (BFCL's relevance): arguments are not compared."""

    type: Literal["any_call"]


Expectation = Annotated[
    NoCall | Calls | Alternatives | JudgeRubric | AnyCall | Trajectory | FinalState,
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
    max_turns: int = Field(10, ge=1)

    @model_validator(mode="after")
    def _last_message_is_not_assistant(self) -> Case:
        if self.messages[-1].role == "assistant":
            raise ValueError(
                "messages: the last message is the assistant's; nothing is left to answer")
        return self

    def tool_keys(self) -> list[str] | None:
        """The catalogue names of the tools this case offers (None: the whole catalogue)."""
        if self.tools is None:
            return None
        return [t.tool if isinstance(t, OfferedAs) else t for t in self.tools]

    def offered_names(self, catalogue: Iterable[str]) -> set[str]:
        """The catalogue names of the tools offered in this case: its `tools`, else all."""
        keys = self.tool_keys()
        return set(keys) if keys is not None else set(catalogue)

    def sent_names(self) -> dict[str, str]:
        """Catalogue name -> the name the model is sent, for the tools offered under another."""
        return {t.tool: t.name for t in self.tools or () if isinstance(t, OfferedAs)}

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


class CaseTable(Mapping[str, "Case"]):
    """A suite's cases by id, kept compact: each as its JSON text (about the size of its line)
    plus its tags and expectation type, and built into a `Case` when used. The most recently
    used cases stay built (CACHE of them), so a run over a suite of any size holds a bounded
    number of models; a case built again costs about 10 µs.

    `raw` is the same cases as decoded JSON objects (`Suite.raw_cases`)."""

    CACHE = 1024

    def __init__(self) -> None:
        self._text: dict[str, str] = {}
        self._tags: dict[str, tuple[str, ...]] = {}
        self._expect_type: dict[str, str] = {}
        self._built: OrderedDict[str, Case] = OrderedDict()
        self._shared: dict[Any, Any] = {}  # one object per distinct tag tuple / type
        self.raw = RawCases(self._text)
        self.tags = _Column(self._text, self._tags)
        self.expect_type = _Column(self._text, self._expect_type)

    def add(self, case: Case, raw: dict[str, Any]) -> None:
        self._text[case.id] = json.dumps(raw, ensure_ascii=False, separators=(",", ":"))
        tags = tuple(sys.intern(tag) for tag in case.tags)
        self._tags[case.id] = self._shared.setdefault(tags, tags)
        self._expect_type[case.id] = self._shared.setdefault(case.expect.type, case.expect.type)
        self._keep(case.id, case)

    def _keep(self, case_id: str, case: Case) -> None:
        self._built[case_id] = case
        if len(self._built) > self.CACHE:
            self._built.popitem(last=False)

    def __getitem__(self, case_id: str) -> Case:
        case = self._built.get(case_id)
        if case is not None:
            self._built.move_to_end(case_id)
            return case
        case = Case.model_validate_json(self._text[case_id])  # KeyError when unknown
        self._keep(case_id, case)
        return case

    def __contains__(self, case_id: object) -> bool:
        return case_id in self._text

    def __iter__(self) -> Iterator[str]:
        return iter(self._text)

    def __len__(self) -> int:
        return len(self._text)


class RawCases(Mapping[str, dict[str, Any]]):
    """Cases as the JSON objects of their lines, decoded on each access."""

    def __init__(self, text: dict[str, str]) -> None:
        self._text = text

    def __getitem__(self, case_id: str) -> dict[str, Any]:
        return json.loads(self._text[case_id])

    def __iter__(self) -> Iterator[str]:
        return iter(self._text)

    def __len__(self) -> int:
        return len(self._text)


class _Column(Mapping[str, Any]):
    """One per-case field kept without building the case (tags, expectation type)."""

    def __init__(self, text: dict[str, str], values: dict[str, Any]) -> None:
        self._text, self._values = text, values

    def __getitem__(self, case_id: str) -> Any:
        return self._values[case_id]

    def get(self, case_id: str, default: Any = None) -> Any:  # read for every attempt scored
        return self._values.get(case_id, default)

    def __iter__(self) -> Iterator[str]:
        return iter(self._text)

    def __len__(self) -> int:
        return len(self._text)


def case_tags(cases: Mapping[str, Case]) -> Mapping[str, Sequence[str]]:
    """Tags by case id, without building every case of a CaseTable."""
    if isinstance(cases, CaseTable):
        return cases.tags
    return {case_id: case.tags for case_id, case in cases.items()}


def case_expect_types(cases: Mapping[str, Case]) -> Mapping[str, str]:
    """Expectation type by case id, without building every case of a CaseTable."""
    if isinstance(cases, CaseTable):
        return cases.expect_type
    return {case_id: case.expect.type for case_id, case in cases.items()}


@dataclass(frozen=True)
class Suite:
    name: str
    path: Path
    fingerprint: str
    tools: dict[str, Tool]
    cases: Mapping[str, Case]  # a CaseTable when loaded from files
    validators: dict[str, Draft7Validator] = field(repr=False)
    raw_tools: list[dict[str, Any]] = field(repr=False)
    raw_cases: Mapping[str, dict[str, Any]] = field(repr=False)
    match: MatchRules = DEFAULT_MATCH
    environment: EnvironmentFactory | None = field(default=None, repr=False)
    environment_spec: str | None = None

    def case_tags(self) -> Mapping[str, Sequence[str]]:
        """Tags by case id (without building every case of a CaseTable)."""
        return case_tags(self.cases)

    def case_expect_types(self) -> Mapping[str, str]:
        """Expectation type by case id (without building every case of a CaseTable)."""
        return case_expect_types(self.cases)

    def loops(self, case: Case) -> bool:
        """True when the case's calls get results, so the model gets further turns."""
        return case.tool_results is not None or self.environment is not None

    def offered_tools(self, case: Case) -> list[dict[str, Any]]:
        """The tool objects sent to the model for this case, in catalogue order, under the
        names the case offers them as."""
        keys = case.tool_keys()
        if keys is None:
            return list(self.raw_tools)
        sent = case.sent_names()
        offered = [t for t in self.raw_tools if t["function"]["name"] in set(keys)]
        if not sent:
            return offered
        return [_renamed(t, sent[t["function"]["name"]]) if t["function"]["name"] in sent else t
                for t in offered]


def _renamed(tool: dict[str, Any], name: str) -> dict[str, Any]:
    return {**tool, "function": {**tool["function"], "name": name}}


def load_tools(path: Path) -> tuple[dict[str, Tool], dict[str, Draft7Validator], list[dict]]:
    raw = read_json(path, missing="file not found (a suite needs tools.json)")
    if not isinstance(raw, list):
        raise InputError(path, "must be a JSON array of OpenAI function-tool objects")
    tools: dict[str, Tool] = {}
    validators: dict[str, Draft7Validator] = {}
    for index, item in enumerate(raw):
        if not isinstance(item, dict):
            raise InputError(
                path, "must be an OpenAI function-tool object ({\"type\": \"function\", ...})",
                field=f"[{index}]",
            )
        tool = validate(Tool, item, path, prefix=f"[{index}].")
        name = tool.function.name
        if name in tools:
            raise InputError(
                path, f"duplicate tool name {name!r}", field=f"[{index}].function.name"
            )
        schema = tool.function.parameters
        try:
            # References and patterns first: the meta-schema check takes neither.
            schemas.audit(schema)
        except schemas.SchemaRefused as exc:
            raise InputError(
                path, f"tool {name}: {exc.message}",
                field=f"[{index}].function.parameters{schemas.field_of(exc.pointer)}",
            ) from None
        try:
            schemas.check_schema(schema)
        except SchemaError as exc:
            where = "/".join(str(p) for p in exc.path)
            raise InputError(
                path,
                f"not a valid JSON Schema Draft 7 document: {exc.message}"
                + (f" (at {where})" if where else ""),
                field=f"[{index}].function.parameters",
            ) from None
        if schema.get("type", "object") != "object":
            raise InputError(
                path,
                "the parameters schema must describe an object",
                field=f"[{index}].function.parameters.type",
            )
        tools[name] = tool
        validators[name] = schemas.tool_validator(schema)
    return tools, validators, raw


def _check_call(
    path: Path,
    line: int,
    call: ExpectedCall,
    where: str,
    tools: dict[str, Tool],
    validators: dict[str, Draft7Validator],
    offered: set[str] | None,
) -> None:
    """The tool exists (and is offered, when `offered` is given); key arguments can pass."""
    if call.tool not in tools:
        raise InputError(path, f"unknown tool {call.tool!r}", line=line, field=f"{where}.tool")
    if offered is not None and call.tool not in offered:
        raise InputError(
            path,
            f"tool {call.tool!r} is expected but not offered in this case",
            line=line,
            field=f"{where}.tool",
        )
    properties = tools[call.tool].function.parameters.get("properties", {})
    for key, spec in call.args.items():
        if key not in properties:
            raise InputError(
                path,
                f"{key!r} is not a parameter of {call.tool}",
                line=line,
                field=f"{where}.args.{key}",
            )
        # The validator's own schema: reduced under `match.schema` "top_level".
        checked = validators[call.tool].schema.get("properties", {})
        prop_validator = validators[call.tool].evolve(schema=checked.get(key, {}))
        for value in spec.one_of:
            error = next(iter(prop_validator.iter_errors(value)), None)
            if error is not None:
                raise InputError(
                    path,
                    f"expected value {value!r} can never pass the schema: {error.message}",
                    line=line,
                    field=f"{where}.args.{key}",
                )


def _check_case(
    path: Path,
    line: int,
    case: Case,
    tools: dict[str, Tool],
    validators: dict[str, Draft7Validator],
    environment: EnvironmentFactory | None = None,
) -> None:
    """Cross-checks pydantic cannot do alone: tool names and key arguments against the schema,
    and what a multi-turn case needs from its suite."""
    offered = case.offered_names(tools)
    sent: set[str] = set()
    for index, (key, entry) in enumerate(zip(case.tool_keys() or (), case.tools or (),
                                             strict=True)):
        where = f"tools[{index}]" if isinstance(entry, str) else f"tools[{index}].tool"
        if key not in tools:
            raise InputError(path, f"unknown tool {key!r}", line=line, field=where)
        name = entry.name if isinstance(entry, OfferedAs) else key
        if name in sent:
            raise InputError(path, f"two tools offered as {name!r}", line=line,
                             field=f"tools[{index}]")
        sent.add(name)
    for alt_index, calls in enumerate(case.expected_call_lists()):
        prefix = (
            "expect.calls" if case.expect.type == "calls" else f"expect.alternatives[{alt_index}]"
        )
        for call_index, call in enumerate(calls):
            _check_call(
                path, line, call, f"{prefix}[{call_index}]", tools, validators, offered
            )
    expect = case.expect
    if isinstance(expect, Trajectory):
        _check_trajectory(path, line, expect, tools, validators, offered)
    if case.tool_results is not None:
        if environment is not None:
            raise InputError(
                path,
                "a case gets its tool results from the suite's environment or from "
                "tool_results, not both",
                line=line,
                field="tool_results",
            )
        for index, scripted in enumerate(case.tool_results):
            _check_call(path, line, scripted, f"tool_results[{index}]", tools, validators, None)
    if case.state is not None and environment is None:
        raise InputError(
            path,
            "a state needs an environment: name one in suite.json (\"environment\": "
            "\"module:Class\")",
            line=line,
            field="state",
        )
    if isinstance(expect, FinalState):
        _check_final_state(path, line, case, expect, tools, validators, offered, environment)


def _check_trajectory(
    path: Path,
    line: int,
    expect: Trajectory,
    tools: dict[str, Tool],
    validators: dict[str, Draft7Validator],
    offered: set[str],
) -> None:
    for name in expect.per_tool:
        if name not in tools:
            raise InputError(
                path, f"unknown tool {name!r}", line=line, field=f"expect.per_tool.{name}"
            )
    for index, call in enumerate(expect.calls):
        where = f"expect.calls[{index}]"
        _check_call(path, line, call, where, tools, validators, offered)
        if expect.per_tool.get(call.tool, expect.args) != "exact":
            continue
        # Compared exactly, a call must carry every required argument: list them all.
        required = tools[call.tool].function.parameters.get("required", [])
        left_out = [key for key in required if key not in call.args]
        if left_out:
            raise InputError(
                path,
                f"arguments are compared exactly, but the required {left_out[0]!r} is not "
                "listed, so no valid call can match",
                line=line,
                field=f"{where}.args",
            )


def _check_final_state(
    path: Path,
    line: int,
    case: Case,
    expect: FinalState,
    tools: dict[str, Tool],
    validators: dict[str, Draft7Validator],
    offered: set[str],
    environment: EnvironmentFactory | None,
) -> None:
    if environment is None:
        raise InputError(
            path,
            "a final_state expectation needs an environment: name one in suite.json "
            "(\"environment\": \"module:Class\")",
            line=line,
            field="expect",
        )
    if case.state is None:
        raise InputError(
            path, "a final_state expectation needs the case's initial state", line=line,
            field="state",
        )
    for index, call in enumerate(expect.calls):
        where = f"expect.calls[{index}]"
        if call.tool not in tools:
            raise InputError(path, f"unknown tool {call.tool!r}", line=line, field=f"{where}.tool")
        if call.tool not in offered:
            raise InputError(
                path,
                f"tool {call.tool!r} is called by the reference but not offered in this case",
                line=line,
                field=f"{where}.tool",
            )
        error = next(iter(validators[call.tool].iter_errors(call.args)), None)
        if error is not None:
            at = ".".join(str(p) for p in error.absolute_path)
            raise InputError(
                path,
                f"the reference call does not pass the schema: {error.message}",
                line=line,
                field=f"{where}.args" + (f".{at}" if at else ""),
            )
    try:
        replay(environment, case.state, [(call.tool, call.args) for call in expect.calls])
    except EnvironmentError_ as exc:
        raise InputError(
            path,
            f"replaying the reference calls fails in the environment: {exc}",
            line=line,
            field="expect.calls",
        ) from None


def load_cases(
    path: Path,
    tools: dict[str, Tool],
    validators: dict[str, Draft7Validator],
    environment: EnvironmentFactory | None = None,
) -> tuple[CaseTable, Mapping[str, dict[str, Any]]]:
    cases = CaseTable()
    for line_no, raw, _ in json_lines(path, missing="file not found (a suite needs cases.jsonl)"):
        case = validate(Case, raw, path, line=line_no)
        if case.id in cases:
            raise InputError(path, f"duplicate case id {case.id!r}", line=line_no, field="id")
        _check_case(path, line_no, case, tools, validators, environment)
        cases.add(case, raw)
    if not cases:
        raise InputError(path, "no cases")
    return cases, cases.raw


# What suite.json may hold (docs/formats.md); source and skipped are written by importers.
SUITE_JSON_FIELDS = ("name", "description", "match", "environment", "source", "skipped")


@names_lines
def load_suite(path: Path | str) -> Suite:
    """Load and check a suite directory.

    Args:
        path: the suite's folder: tools.json, cases.jsonl and optionally suite.json (its
            name, match rules and environment); docs/formats.md describes them.

    Returns the Suite (cases are built from their JSON lines when used). Raises InputError
    naming file, line and field."""
    root = Path(path)
    if not root.is_dir():
        raise InputError(root, "a suite is a directory with tools.json and cases.jsonl")
    name = root.resolve().name
    match = DEFAULT_MATCH
    environment: EnvironmentFactory | None = None
    environment_spec: str | None = None
    meta_path = root / "suite.json"
    if meta_path.exists():
        meta = read_json(meta_path)
        if not isinstance(meta, dict):
            raise InputError(meta_path, "must be a JSON object")
        for key in meta:
            if key not in SUITE_JSON_FIELDS:
                close = difflib.get_close_matches(key, SUITE_JSON_FIELDS, n=1)
                hint = f"did you mean {close[0]!r}? " if close else ""
                raise InputError(
                    meta_path,
                    f"unknown field; {hint}suite.json holds {', '.join(SUITE_JSON_FIELDS)}",
                    field=key,
                )
        if "name" in meta:
            if not isinstance(meta["name"], str) or not meta["name"]:
                raise InputError(meta_path, "must be a non-empty string", field="name")
            name = meta["name"]
        if "match" in meta:
            match = validate(MatchRules, meta["match"], meta_path, prefix="match.")
        if "environment" in meta:
            environment_spec = meta["environment"]
            if not isinstance(environment_spec, str) or not environment_spec:
                raise InputError(
                    meta_path, "must be a string naming module:Class", field="environment"
                )
            environment = load_environment(environment_spec, root, meta_path)
    tools, validators, raw_tools = load_tools(root / "tools.json")
    if match.schema_ == "top_level":
        validators = {
            tool_name: schemas.tool_validator(
                top_level_schema(tool.function.parameters), formats=False
            )
            for tool_name, tool in tools.items()
        }
    cases, raw_cases = load_cases(root / "cases.jsonl", tools, validators, environment)
    fingerprinted: dict[str, Any] = {"tools": raw_tools}
    if match != DEFAULT_MATCH:  # rules change verdicts; default suites keep their fingerprint
        # source_types only when given, so suites imported before it keep their fingerprint
        fingerprinted["match"] = match.model_dump(
            by_alias=True, exclude=None if match.source_types else {"source_types"})
    if environment is not None:  # its code decides results and verdicts
        fingerprinted["environment"] = {
            "spec": environment_spec,
            "source": environment_fingerprint(environment),
        }
    digest = _suite_digest(raw_cases.values(), fingerprinted)
    return Suite(
        name=name,
        path=root,
        fingerprint=digest,
        tools=tools,
        cases=cases,
        validators=validators,
        raw_tools=raw_tools,
        raw_cases=raw_cases,
        match=match,
        environment=environment,
        environment_spec=environment_spec,
    )


def _suite_digest(raw_cases: Iterable[dict[str, Any]], rest: dict[str, Any]) -> str:
    """sha256 of canonical_json({"cases": [...], **rest}), without holding every case at once.

    The bytes are those of canonical_json on the whole object (keys sorted, "cases" first of
    "cases", "environment", "match", "tools"), so fingerprints stay as they were."""
    assert all(key > "cases" for key in rest)
    digest = hashlib.sha256(b'{"cases":[')
    for index, raw in enumerate(raw_cases):
        digest.update((b"," if index else b"") + canonical_json(raw).encode())
    digest.update(b"]")
    for key in sorted(rest):
        digest.update(f",{json.dumps(key)}:{canonical_json(rest[key])}".encode())
    digest.update(b"}")
    return digest.hexdigest()


def lint(suite: Suite) -> list[str]:
    """Warnings about a suite that loads but measures less than it should."""
    warnings: list[str] = []
    kinds = [case.expect.type for case in suite.cases.values()]
    if "no_call" not in kinds:
        warnings.append(
            "no case expects no call: a needless call is still a call, and this suite cannot see it"
        )
    tags = {tag for case in suite.cases.values() for tag in case.tags}
    if not tags & {"ambiguous", "imprecise"}:
        warnings.append("no case is tagged ambiguous or imprecise: only clean requests are tested")
    used = {
        call.tool
        for case in suite.cases.values()
        for calls in case.expected_call_lists()
        for call in calls
    }
    for case in suite.cases.values():
        if isinstance(case.expect, Trajectory | FinalState):
            used.update(call.tool for call in case.expect.calls)
    unused = sorted(set(suite.tools) - used)
    if unused:
        warnings.append(f"tools never expected by any case: {', '.join(unused)}")
    for name, tool in suite.tools.items():
        warnings.extend(schemas.pattern_warnings(name, tool.function.parameters))
    return warnings
