"""Stage 1, the dataset: a tool catalogue plus cases with expectations.

A suite is a directory holding `tools.json` (OpenAI function-tool objects, exactly what is sent
to the model), `cases.jsonl` (one case per line) and an optional `suite.json`. See
docs/formats.md for the format.
"""

from __future__ import annotations

import difflib
import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from jsonschema import Draft7Validator
from jsonschema.exceptions import SchemaError
from pydantic import ValidationError

from callgate.errors import InputError, from_validation_error
from callgate.reading import canonical_json, json_lines, names_lines, read_json, validate
from callgate.suites import schemas
from callgate.suites.case_checks import check_case, feasibility
from callgate.suites.case_table import CaseTable, case_expect_types, case_tags
from callgate.suites.cases import (
    DEFAULT_MATCH,
    Alternatives,
    AnyCall,
    ArgRule,
    ArgSpec,
    Calls,
    Case,
    Expectation,
    ExpectedCall,
    FinalState,
    JudgeRubric,
    MatchRules,
    Mode,
    NoCall,
    SuiteDefaults,
    Tool,
    Trajectory,
    top_level_schema,
)
from callgate.suites.environment import (
    EnvironmentFactory,
    SuiteFunctions,
    environment_fingerprint,
    load_environment,
    spec_fingerprinted,
)
from callgate.suites.faults import RunFaults
from callgate.suites.interception import ToolResults, ToolResultTransform, compose
from callgate.suites.matchers import Predicate
from callgate.suites.policies import (
    NO_POLICIES,
    POLICY_NAMES,
    Policies,
    check_confirmation,
    check_policies,
    suite_policies,
)

# The models live in callgate.suites.cases and the case table in callgate.suites.case_table;
# their names are kept here too, where most of the code has always taken them from.
__all__ = [
    "DEFAULT_MATCH",
    "Alternatives",
    "AnyCall",
    "ArgRule",
    "ArgSpec",
    "Calls",
    "Case",
    "Expectation",
    "ExpectedCall",
    "FinalState",
    "JudgeRubric",
    "MatchRules",
    "Mode",
    "NoCall",
    "canonical_json",
    "case_tags",
]


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
    environment_spec: str | dict[str, Any] | None = None  # module:Class or {"mcp": ...}
    defaults: SuiteDefaults | None = None  # suite.json's shared system message and tools
    # suite.json's `gate.figures`: the figures the gate fails on (None: both); verdicts do
    # not depend on it, so the fingerprint leaves it out
    gate_figures: tuple[str, ...] | None = None
    policies: Policies = NO_POLICIES  # suite.json's (docs/policies.md)

    def policies_of(self, case: Case) -> Policies:
        """The policies an attempt of this case is checked on: the suite's, with the case's."""
        return self.policies.merged(case.policies)

    def policy_names(self) -> list[str]:
        """Every policy the suite or one of its cases declares."""
        names = set(self.policies.declared())
        for case_id, raw in self.raw_cases.items():  # only the cases that declare some
            if "policies" in raw:
                names.update(self.policies_of(self.cases[case_id]).declared())
        return [name for name in POLICY_NAMES if name in names]

    # The fault plan on the tool results' seam: each case's own `faults`, and the run's
    # (`run --faults`); the fingerprint covers the cases' own, never the run's.
    faults: RunFaults = field(default_factory=RunFaults, repr=False)
    # What else a run puts on the seam for a case (an attack's transform), after the faults;
    # None, or None for a case: nothing more.
    result_transform: Callable[[Case], ToolResultTransform | None] | None = field(
        default=None, repr=False)

    def tool_results(self, case: Case, repeat: int) -> ToolResults:
        """The interception seam of one attempt of `case`: every tool result its calls get
        goes through it (suites.interception)."""
        extra = self.result_transform(case) if self.result_transform is not None else None
        # The attack first, the fault after it: a fault replaces whatever the tool returned,
        # and its kind is the one recorded (the fault plan's replay and recovery read it).
        made = [t for t in (extra, self.faults.transform(case)) if t is not None]
        if not made:
            return ToolResults(case.id, repeat)
        return ToolResults(case.id, repeat, made[0] if len(made) == 1 else compose(*made))

    @cached_property
    def parameter_schemas(self) -> dict[str, dict[str, Any]]:
        """Each tool's parameters schema by tool name: what the checks read beside
        `validators`. Built once per suite."""
        return {name: tool.function.parameters for name, tool in self.tools.items()}

    def case_tags(self) -> Mapping[str, Sequence[str]]:
        """Tags by case id (without building every case of a CaseTable)."""
        return case_tags(self.cases)

    def case_expect_types(self) -> Mapping[str, str]:
        """Expectation type by case id (without building every case of a CaseTable)."""
        return case_expect_types(self.cases)

    def loops(self, case: Case) -> bool:
        """True when the case's calls get results, so the model gets further turns."""
        plays = self.environment is not None and (
            case.state is not None or not getattr(self.environment, "state_only", False))
        return (case.tool_results is not None or plays or case.user_turns is not None
                or case.scenario is not None)

    @cached_property
    def sent_tools(self) -> list[dict[str, Any]]:
        """tools.json as the model is sent it: without the `annotations` callgate keeps beside
        `function` (an OpenAI tool object holds `type` and `function` only)."""
        return [{k: v for k, v in t.items() if k != "annotations"} if "annotations" in t else t
                for t in self.raw_tools]

    def offered_tools(self, case: Case) -> list[dict[str, Any]]:
        """The tool objects sent to the model for this case, in catalogue order, under the
        names the case offers them as."""
        keys = case.tool_keys()
        if keys is None:
            return list(self.sent_tools)
        sent = case.sent_names()
        offered = [t for t in self.sent_tools if t["function"]["name"] in set(keys)]
        if not sent:
            return offered
        return [_renamed(t, sent[t["function"]["name"]]) if t["function"]["name"] in sent else t
                for t in offered]


def _renamed(tool: dict[str, Any], name: str) -> dict[str, Any]:
    return {**tool, "function": {**tool["function"], "name": name}}


def load_tools(path: Path) -> tuple[dict[str, Tool], dict[str, Draft7Validator],
                                   list[dict[str, Any]]]:
    raw = read_json(path, missing="file not found (a suite needs tools.json)")
    if not isinstance(raw, list):
        raise InputError(path, "must be a JSON array of OpenAI function-tool objects")
    tools: dict[str, Tool] = {}
    validators: dict[str, Draft7Validator] = {}
    # The schemas checked already, as canonical JSON: the checks are functions of the schema
    # alone, and a schema refused stops the load at its first tool (a BFCL multi-turn suite
    # offers 192 tools with 103 distinct schemas; the meta-schema check is slow).
    checked: set[str] = set()
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
        key = canonical_json(schema)
        if key in checked:
            tools[name] = tool
            validators[name] = schemas.tool_validator(schema)
            continue
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
        checked.add(key)
        tools[name] = tool
        validators[name] = schemas.tool_validator(schema)
    return tools, validators, raw


def load_cases(
    path: Path,
    tools: dict[str, Tool],
    validators: dict[str, Draft7Validator],
    environment: EnvironmentFactory | None = None,
    match: MatchRules = DEFAULT_MATCH,
    functions: SuiteFunctions | None = None,
    defaults: SuiteDefaults | None = None,
    policies: Policies = NO_POLICIES,
    digest: CasesDigest | None = None,
) -> tuple[CaseTable, Mapping[str, dict[str, Any]]]:
    """The cases of cases.jsonl, checked against the tools; `functions` imports the
    predicates they name (from beside cases.jsonl when not given), `defaults` are suite.json's
    system message and tools for the cases without their own; `digest` is fed each case as
    it is read (the suite's fingerprint, without decoding the cases a second time)."""
    context: dict[str, Any] = {"predicates": functions or SuiteFunctions(path.parent)}
    cases = CaseTable(context)
    for line_no, raw, _ in json_lines(path, missing="file not found (a suite needs cases.jsonl)"):
        try:
            case = Case.model_validate(raw, context=context)  # errors name the line's fields
            applied = defaults.applied(raw) if defaults is not None else raw
            if applied is not raw:
                raw, case = applied, Case.model_validate(applied, context=context)
        except ValidationError as exc:
            raise from_validation_error(path, line_no, exc) from None
        if case.id in cases:
            raise InputError(path, f"duplicate case id {case.id!r}", line=line_no, field="id")
        check_case(path, line_no, case, tools, validators, environment, match)
        if case.policies is not None:
            check_policies(case.policies, tools, path, line_no, case=True)
            check_confirmation(policies.merged(case.policies), path, line_no)
        cases.add(case, raw)
        if digest is not None:
            digest.add(raw)
    if not cases:
        raise InputError(path, "no cases")
    return cases, cases.raw


# What suite.json may hold (docs/formats.md); source and skipped are written by importers.
SUITE_JSON_FIELDS = ("name", "description", "match", "environment", "system", "tools", "source",
                     "skipped", "gate", "policies")
GATE_FIGURES = ("right_tool", "right_arguments")


def read_suite_json(meta_path: Path) -> dict[str, Any]:
    """suite.json's fields (empty without the file), its unknown ones refused."""
    if not meta_path.exists():
        return {}
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
    if "name" in meta and (not isinstance(meta["name"], str) or not meta["name"]):
        raise InputError(meta_path, "must be a non-empty string", field="name")
    return meta


def _gate_figures(meta: dict[str, Any], meta_path: Path) -> tuple[str, ...] | None:
    """suite.json's `"gate": {"figures": [...]}`: which of the two shares the gate fails on."""
    if "gate" not in meta:
        return None
    gate = meta["gate"]
    if not isinstance(gate, dict) or set(gate) - {"figures"}:
        raise InputError(meta_path, 'must be an object {"figures": [...]}', field="gate")
    figures = gate.get("figures")
    if (not isinstance(figures, list) or not figures
            or any(f not in GATE_FIGURES for f in figures) or len(set(figures)) < len(figures)):
        raise InputError(meta_path, f"must list {' and/or '.join(GATE_FIGURES)}, each once",
                         field="gate.figures")
    return tuple(figures)


def _suite_defaults(meta: dict[str, Any], meta_path: Path, tools: Mapping[str, Tool]
                    ) -> SuiteDefaults | None:
    """suite.json's shared `system` and default `tools`, the tools checked in the catalogue."""
    given = {key: meta[key] for key in ("system", "tools") if key in meta}
    if not given:
        return None
    defaults = validate(SuiteDefaults, given, meta_path)
    sent: set[str] = set()
    for index, entry in enumerate(defaults.tools or ()):
        key, name = (entry, entry) if isinstance(entry, str) else (entry.tool, entry.name)
        if key not in tools:
            raise InputError(meta_path, f"unknown tool {key!r}", field=f"tools[{index}]")
        if name in sent:
            raise InputError(meta_path, f"two tools offered as {name!r}", field=f"tools[{index}]")
        sent.add(name)
    return defaults


@names_lines
def load_suite(path: Path | str) -> Suite:
    """Load and check a suite directory.

    Args:
        path: the suite's folder: tools.json, cases.jsonl and optionally suite.json (its
            name, match rules, environment, shared system message and default tools);
            docs/formats.md describes them.

    Returns the Suite (cases are built from their JSON lines when used). Raises InputError
    naming file, line and field."""
    root = Path(path)
    if not root.is_dir():
        raise InputError(root, "a suite is a directory with tools.json and cases.jsonl")
    meta_path = root / "suite.json"
    meta = read_suite_json(meta_path)
    name = meta.get("name") or root.resolve().name
    match = DEFAULT_MATCH
    if "match" in meta:
        match = validate(MatchRules, meta["match"], meta_path, prefix="match.")
    environment_spec: str | dict[str, Any] | None = meta.get("environment")
    environment: EnvironmentFactory | None = None
    if environment_spec is not None:
        environment = load_environment(environment_spec, root, meta_path)
    tools, validators, raw_tools = load_tools(root / "tools.json")
    if match.schema_ == "top_level":
        validators = {
            tool_name: schemas.tool_validator(
                top_level_schema(tool.function.parameters), formats=False
            )
            for tool_name, tool in tools.items()
        }
    defaults = _suite_defaults(meta, meta_path, tools)
    gate_figures = _gate_figures(meta, meta_path)
    functions = SuiteFunctions(root)
    policies = NO_POLICIES
    if "policies" in meta:
        policies = suite_policies(meta["policies"], meta_path, tools, {"predicates": functions})
        check_confirmation(policies, meta_path, None)
    cases_digest = CasesDigest()
    cases, raw_cases = load_cases(root / "cases.jsonl", tools, validators, environment, match,
                                  functions, defaults, policies, cases_digest)
    fingerprinted: dict[str, Any] = {"tools": raw_tools}
    if match != DEFAULT_MATCH:  # rules change verdicts; default suites keep their fingerprint
        # source_types only when given, so suites imported before it keep their fingerprint
        fingerprinted["match"] = match.model_dump(
            by_alias=True, exclude=None if match.source_types else {"source_types"})
    if environment is not None:  # its code decides results and verdicts
        fingerprinted["environment"] = {
            "spec": spec_fingerprinted(environment_spec),
            "source": environment_fingerprint(environment),
        }
    if "policies" in meta:  # they decide the verdicts' violations
        fingerprinted["policies"] = meta["policies"]
    if functions.loaded:  # the predicates' code decides verdicts too
        fingerprinted["predicates"] = functions.fingerprint()
    digest = _suite_digest(cases_digest, fingerprinted)
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
        defaults=defaults,
        gate_figures=gate_figures,
        policies=policies,
    )


class CasesDigest:
    """The sha256 of a suite's fingerprint as far as its cases, fed one case at a time."""

    def __init__(self) -> None:
        self.hash = hashlib.sha256(b'{"cases":[')
        self.count = 0

    def add(self, raw: dict[str, Any]) -> None:
        self.hash.update((b"," if self.count else b"") + canonical_json(raw).encode())
        self.count += 1


def _suite_digest(cases: CasesDigest, rest: dict[str, Any]) -> str:
    """sha256 of canonical_json({"cases": [...], **rest}), without holding every case at once
    (`cases` was fed each case in order).

    The bytes are those of canonical_json on the whole object (keys sorted, "cases" first of
    "cases", "environment", "match", "predicates", "tools"), so fingerprints stay
    as they were."""
    assert all(key > "cases" for key in rest)
    digest = cases.hash
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
    warnings.extend(_undecided_matchers(suite))
    return warnings


def _undecided_matchers(suite: Suite) -> list[str]:
    """The matchers suite check could neither refuse nor find a schema-valid value for (a
    predicate is never tried but on an enum, so it is left out)."""
    found: list[str] = []
    for case in suite.cases.values():
        for calls in case.expected_call_lists():
            for call in calls:
                checked = suite.validators[call.tool].schema.get("properties", {})
                for key, spec in call.args.items():
                    if spec.matcher is None or isinstance(spec.matcher, Predicate):
                        continue
                    validator = suite.validators[call.tool].evolve(schema=checked.get(key, {}))
                    if not feasibility(spec.matcher, validator).found:
                        found.append(
                            f"case {case.id}: {call.tool}.{key}: found no value the schema "
                            f"allows that {spec.matcher.describe()} matches, nor could show "
                            "there is none")
    return found
