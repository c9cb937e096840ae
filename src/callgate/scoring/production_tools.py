"""What production samples are checked against (docs/traces.md, "Production samples"): a
production folder's `tools.json` (optional when the traces record the tools each model call
was offered) and `suite.json`'s `name` and `policies` (docs/policies.md); `cases.jsonl`, if
the folder is a suite, is not read. And the tools a span records, each compiled once into
callgate's one Draft 7 validator (suites.schemas) however many spans offer it."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jsonschema import Draft7Validator
from jsonschema.exceptions import SchemaError
from pydantic import ValidationError

from callgate.errors import InputError
from callgate.reading import canonical_json, names_lines
from callgate.suites import schemas
from callgate.suites.cases import Tool
from callgate.suites.environment import SuiteFunctions
from callgate.suites.policies import NO_POLICIES, Policies, check_confirmation, suite_policies
from callgate.suites.suite import load_tools, read_suite_json


@dataclass(frozen=True)
class Offered:
    """The tools one model call was offered: name -> parameters schema and its validator (a
    tool of another type than `function` has neither: offered, its arguments not checked)."""

    schemas: dict[str, dict[str, Any]]
    validators: dict[str, Draft7Validator]
    names: frozenset[str]


@dataclass
class ToolBook:
    """Each distinct tool list compiled once (a day's export offers the same few lists in
    thousands of spans)."""

    compiled: dict[str, Offered] = field(default_factory=dict)

    def offered(self, tools: tuple[dict[str, Any], ...]) -> Offered:
        """Raises ValueError naming the tool (by its index) and what is wrong with it."""
        key = canonical_json(list(tools))
        found = self.compiled.get(key)
        if found is None:
            found = self.compiled[key] = _compile(tools)
        return found


def _compile(tools: Iterable[dict[str, Any]]) -> Offered:
    found: dict[str, dict[str, Any]] = {}
    validators: dict[str, Draft7Validator] = {}
    names: set[str] = set()
    for index, raw in enumerate(tools):
        function = raw.get("function") or {}
        if raw.get("type", "function") != "function":
            names.add(str(function.get("name")))
            continue
        try:
            tool = Tool.model_validate(raw)
        except ValidationError as exc:
            error = exc.errors()[0]
            where = ".".join(str(part) for part in error["loc"])
            raise ValueError(f"tool [{index}]: {where}: {error['msg']}") from None
        name, schema = tool.function.name, tool.function.parameters
        try:
            schemas.audit(schema)
            schemas.check_schema(schema)
        except schemas.SchemaRefused as exc:
            raise ValueError(f"tool {name}: {exc.message}") from None
        except SchemaError as exc:
            raise ValueError(f"tool {name}: not a valid JSON Schema Draft 7 document: "
                             f"{exc.message}") from None
        names.add(name)
        found[name] = schema
        validators[name] = schemas.tool_validator(schema)
    return Offered(found, validators, frozenset(names))


@dataclass(frozen=True)
class ProductionFolder:
    path: Path
    name: str
    tools: Offered | None  # tools.json's; None without one
    raw_tools: list[dict[str, Any]] | None
    raw_policies: dict[str, Any] | None  # suite.json's, read against the tools once known

    def fingerprint(self, policies: Policies) -> str:
        """What the samples were checked against: tools.json and the policies."""
        text = canonical_json({"tools": self.raw_tools,
                               "policies": policies.model_dump(mode="json", exclude_none=True)})
        return hashlib.sha256(text.encode()).hexdigest()

    def policies(self, offered: Iterable[str]) -> Policies:
        """suite.json's policies, their tools checked against tools.json and the tools the
        traces were offered (`offered`)."""
        if self.raw_policies is None:
            return NO_POLICIES
        meta = self.path / "suite.json"
        known = dict.fromkeys([*(self.tools.names if self.tools else ()), *offered])
        policies = suite_policies(self.raw_policies, meta, known,
                                  {"predicates": SuiteFunctions(self.path)})
        check_confirmation(policies, meta, None)
        return policies


@names_lines
def load_production_folder(path: Path | str) -> ProductionFolder:
    """A production folder: `tools.json` and `suite.json`, each optional. Raises InputError
    naming file, line and field."""
    root = Path(path)
    if not root.is_dir():
        raise InputError(root, "a production folder is a directory (tools.json and suite.json "
                         "with its policies, each optional)")
    meta_path = root / "suite.json"
    meta: Mapping[str, Any] = read_suite_json(meta_path)  # the suite's one reader of it
    name = meta.get("name") or root.resolve().name
    tools = raw_tools = None
    if (root / "tools.json").exists():
        loaded, validators, raw_tools = load_tools(root / "tools.json")
        tools = Offered({n: t.function.parameters for n, t in loaded.items()}, validators,
                        frozenset(loaded))
    raw_policies = meta.get("policies")
    if raw_policies is not None and not isinstance(raw_policies, dict):
        raise InputError(meta_path, "must be an object of policies", field="policies")
    return ProductionFolder(root, str(name), tools, raw_tools, raw_policies)
