"""Import the Berkeley Function Calling Leaderboard (BFCL) as callgate suites.

Two halves, both pure functions where possible:

- the importer: BFCL entries (function docs, questions, possible answers) from a data folder or
  the `bfcl-eval` wheel, into a suite directory (tools.json, cases.jsonl, suite.json);
- BFCL's value rules live in `callgate.checks.bfcl_rules` (the checks apply them when a suite's
  `match.values` is "bfcl"); the importer uses them to write answers.

Line references are to bfcl-eval 2026.3.23 (Apache-2.0): `ast_checker.py` is
bfcl_eval/eval_checker/ast_eval/ast_checker.py, `handler utils` is
bfcl_eval/model_handler/utils.py. docs/bfcl.md states every mapping decision.
"""

from __future__ import annotations

import copy
import heapq
import itertools
import json
import os
import re
import secrets
import shutil
import zipfile
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from callgate.checks.bfcl_rules import declared_type
from callgate.errors import InputError, decode
from callgate.reading import canonical_json, json_lines_in, read_text, validate
from callgate.suites.suite import ArgSpec, Case, ExpectedCall, Suite, load_suite

Kind = Literal["ast", "irrelevance", "relevance"]

CATEGORIES: dict[str, Kind] = {
    "simple_python": "ast",
    "multiple": "ast",
    "parallel": "ast",
    "parallel_multiple": "ast",
    "irrelevance": "irrelevance",
    "live_simple": "ast",
    "live_multiple": "ast",
    "live_parallel": "ast",
    "live_parallel_multiple": "ast",
    "live_irrelevance": "irrelevance",
    "live_relevance": "relevance",
}

# The rules an imported suite carries so that callgate's verdicts equal BFCL's (docs/bfcl.md).
MATCH_RULES: dict[str, str] = {
    "values": "bfcl",
    "unlisted_args": "reject",
    "pairing": "first_fit",
    "schema": "top_level",
}

# handler utils: _get_language_specific_hint, added to every description of a Python category.
LANGUAGE_HINT = " Note that the provided function is in Python 3 syntax."
FLOAT_HINT = " This is a float type value."

# bfcl_eval/constants/type_mappings.py: GORILLA_TO_OPENAPI.
GORILLA_TO_OPENAPI: dict[str, str] = {
    "integer": "integer",
    "number": "number",
    "float": "number",
    "string": "string",
    "boolean": "boolean",
    "bool": "boolean",
    "array": "array",
    "list": "array",
    "dict": "object",
    "object": "object",
    "tuple": "array",
    "any": "string",
    "byte": "integer",
    "short": "integer",
    "long": "integer",
    "double": "number",
    "char": "string",
    "ArrayList": "array",
    "Array": "array",
    "HashMap": "object",
    "Hashtable": "object",
    "Queue": "array",
    "Stack": "array",
    "Any": "string",
    "String": "string",
    "Bigint": "integer",
}
_JSON_TYPES = {"string", "integer", "number", "boolean", "array", "object", "null"}
OPENAI_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
MAX_NAME = 64


# --------------------------------------------------------------------------- BFCL records


class _Record(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)


class BfclFunction(_Record):
    name: str = Field(min_length=1)
    description: str = ""
    parameters: dict[str, Any]


class BfclEntry(_Record):
    id: str = Field(min_length=1)
    question: list[list[dict[str, Any]]] = Field(min_length=1)
    function: list[BfclFunction]


class BfclAnswer(_Record):
    id: str = Field(min_length=1)
    ground_truth: list[dict[str, dict[str, Any]]] = Field(min_length=1)


@dataclass(frozen=True)
class CategoryData:
    category: str
    entries: list[BfclEntry]
    answers: dict[str, BfclAnswer]
    origin: str  # where the files were read, for suite.json
    version: str | None  # the bfcl-eval package version, when read from a wheel


_DATA_FILE = re.compile(r"^BFCL_v(\d+)_(.+)\.json$")


def _pick(names: Sequence[str], category: str) -> tuple[str, str | None] | None:
    """The question file of a category and its possible-answer file, among archive paths.

    The highest BFCL version wins, then the shallowest path; unused datasets are ignored."""
    found: list[tuple[int, int, str]] = []
    for name in names:
        path = PurePosixPath(name)
        match = _DATA_FILE.match(path.name)
        if match is None or match.group(2) != category:
            continue
        if "possible_answer" in path.parts or "unused_datasets" in path.parts:
            continue
        found.append((-int(match.group(1)), len(path.parts), name))
    if not found:
        return None
    question = PurePosixPath(min(found)[2])
    answer = str(question.parent / "possible_answer" / question.name)
    return str(question), answer if answer in set(names) else None


def _parse_lines(text: str, where: str, model: type[BaseModel]) -> list[Any]:
    return [validate(model, raw, where, line=line_no)
            for line_no, raw, _ in json_lines_in(where, text.splitlines())]


def read_category(source: Path | str, category: str) -> CategoryData:
    """Read one category from a BFCL data folder (any folder above the files will do) or from
    the `bfcl-eval` wheel read as a zip archive."""
    if category not in CATEGORIES:
        raise InputError(source, f"unknown category {category!r}; one of {', '.join(CATEGORIES)}")
    root = Path(source)
    version: str | None = None
    if root.is_file() and zipfile.is_zipfile(root):
        with zipfile.ZipFile(root) as archive:
            names = archive.namelist()
            picked = _pick(names, category)
            if picked is None:
                raise InputError(root, f"no BFCL data file for category {category!r}")
            question_name, answer_name = picked
            question_text = decode(f"{root.name}!{question_name}", archive.read(question_name))
            answer_text = (
                decode(f"{root.name}!{answer_name}", archive.read(answer_name))
                if answer_name else None
            )
            metadata = next((n for n in names if n.endswith(".dist-info/METADATA")), None)
            if metadata is not None:
                header = archive.read(metadata).decode("utf-8", "replace")
                found = re.search(r"^Version: (.+)$", header, re.MULTILINE)
                version = found.group(1).strip() if found else None
        origin = f"{root.name}!{question_name}"
        where_q, where_a = origin, f"{root.name}!{answer_name}"
    elif root.is_dir():
        names = [p.relative_to(root).as_posix() for p in root.rglob("BFCL_v*_*.json")]
        picked = _pick(names, category)
        if picked is None:
            raise InputError(root, f"no BFCL data file for category {category!r}")
        question_name, answer_name = picked
        question_text = read_text(root / question_name)
        answer_text = read_text(root / answer_name) if answer_name else None
        origin = where_q = str(root / question_name)
        where_a = str(root / answer_name) if answer_name else ""
    else:
        raise InputError(root, "not a BFCL data folder nor a zip archive (the bfcl-eval wheel)")
    entries: list[BfclEntry] = _parse_lines(question_text, where_q, BfclEntry)
    answers: dict[str, BfclAnswer] = {}
    if CATEGORIES[category] == "ast":
        if answer_text is None:
            raise InputError(root, f"no possible-answer file for category {category!r}")
        answers = {a.id: a for a in _parse_lines(answer_text, where_a, BfclAnswer)}
        missing = [e.id for e in entries if e.id not in answers]
        if missing:
            raise InputError(where_a, f"no possible answer for {missing[0]!r}")
    return CategoryData(category, entries, answers, origin, version)


# --------------------------------------------------------------------------- function docs


def _cast_properties(properties: dict[str, Any]) -> dict[str, Any]:
    """handler utils:34-76 (_cast_to_openai_type with GORILLA_TO_OPENAPI), in place."""
    for value in properties.values():
        if "type" not in value:
            value["type"] = "string"
        else:
            var_type = value["type"]
            if var_type == "float":
                value["format"] = "float"
                value["description"] = value.get("description", "") + FLOAT_HINT
            value["type"] = GORILLA_TO_OPENAPI.get(var_type, "string")
        if value["type"] in ("array", "object"):
            if "properties" in value:
                _cast_properties(value["properties"])
            elif "items" in value:
                items = value["items"]
                items["type"] = GORILLA_TO_OPENAPI[items["type"]]
                if items["type"] == "array" and "items" in items:
                    items["items"]["type"] = GORILLA_TO_OPENAPI[items["items"]["type"]]
                elif items["type"] == "object" and "properties" in items:
                    _cast_properties(items["properties"])
    return properties


def _draft7_types(schema: Any) -> None:
    """Map any type BFCL's conversion leaves untouched (deeper than it recurses) to JSON's."""
    if not isinstance(schema, dict):
        return
    kind = schema.get("type")
    if isinstance(kind, str) and kind not in _JSON_TYPES:
        schema["type"] = GORILLA_TO_OPENAPI.get(kind, "string")
    for key in ("properties", "patternProperties", "definitions"):
        if isinstance(schema.get(key), dict):
            for sub in schema[key].values():
                _draft7_types(sub)
    for key in ("items", "additionalProperties", "additionalItems", "not"):
        if isinstance(schema.get(key), dict):
            _draft7_types(schema[key])
    if isinstance(schema.get("items"), list):
        for sub in schema["items"]:
            _draft7_types(sub)
    for key in ("anyOf", "allOf", "oneOf"):
        if isinstance(schema.get(key), list):
            for sub in schema[key]:
                _draft7_types(sub)


def openai_name(name: str) -> str:
    """handler utils:82-91 and ast_checker.py:83-90: "." is not allowed in OpenAI-style names."""
    return name.replace(".", "_")


def convert_function(function: BfclFunction, where: str) -> dict[str, Any]:
    """One BFCL function doc as the OpenAI function-tool object BFCL sends (handler utils:79-205
    for an OpenAI-completions model), with a name that may still need a variant suffix."""
    doc = copy.deepcopy(function.model_dump())
    parameters = doc["parameters"]
    parameters["type"] = "object"
    properties = parameters.get("properties")
    if not isinstance(properties, dict):
        raise InputError(where, f"{function.name}: parameters.properties must be an object")
    try:
        _cast_properties(properties)
    except (KeyError, TypeError, AttributeError) as exc:
        raise InputError(where, f"{function.name}: unsupported parameter schema ({exc})") from None
    _draft7_types(parameters)  # validity is checked once per distinct tool, by load_suite
    spec: dict[str, Any] = {
        "name": openai_name(function.name),
        "description": function.description + LANGUAGE_HINT,
        "parameters": parameters,
    }
    return {"type": "function", "function": spec}


def _variant_name(base: str, number: int, taken: set[str]) -> str:
    while True:
        suffix = f"_v{number}"
        name = base[: MAX_NAME - len(suffix)] + suffix
        if name not in taken:
            return name
        number += 1


@dataclass(frozen=True)
class Catalogue:
    tools: list[dict[str, Any]]  # catalogue order
    names: dict[str, str]  # canonical JSON of a converted tool -> its catalogue name
    renamed: int  # tools whose name got a variant suffix
    reordered: int  # entries whose functions the catalogue order cannot keep in BFCL's order


def _keep_order(sequences: Sequence[Sequence[str]], first_seen: Mapping[str, int]) -> list[str]:
    """An order of all keys that keeps every sequence's own order where possible (callgate offers
    a case's tools in catalogue order): topological, earliest seen first, cycles broken there."""
    after: dict[str, set[str]] = {key: set() for key in first_seen}
    waiting = dict.fromkeys(first_seen, 0)
    for sequence in sequences:
        for a, b in itertools.pairwise(sequence):
            if b not in after[a]:
                after[a].add(b)
                waiting[b] += 1
    ready = [(first_seen[k], k) for k, n in waiting.items() if n == 0]
    heapq.heapify(ready)
    placed: list[str] = []
    done: set[str] = set()
    while len(placed) < len(first_seen):
        if not ready:
            key = min((k for k in first_seen if k not in done), key=first_seen.__getitem__)
            heapq.heappush(ready, (first_seen[key], key))
        _, key = heapq.heappop(ready)
        if key in done:
            continue
        done.add(key)
        placed.append(key)
        for nxt in after[key]:
            waiting[nxt] -= 1
            if waiting[nxt] == 0 and nxt not in done:
                heapq.heappush(ready, (first_seen[nxt], nxt))
    return placed


def build_catalogue(per_entry: Sequence[Sequence[dict[str, Any]]]) -> Catalogue:
    """One tool per distinct converted doc. BFCL gives each entry its own docs, so one name can
    carry several docs; the most used keeps the name, the others get a suffix (_v2, _v3 ...)."""
    sequences = [[canonical_json(tool) for tool in tools] for tools in per_entry]
    uses: Counter[str] = Counter()
    first_seen: dict[str, int] = {}
    by_key: dict[str, dict[str, Any]] = {}
    for key, tool in zip(
        itertools.chain.from_iterable(sequences),
        itertools.chain.from_iterable(per_entry),
        strict=True,
    ):
        uses[key] += 1
        first_seen.setdefault(key, len(first_seen))
        by_key.setdefault(key, tool)
    variants: dict[str, list[str]] = {}
    for key in by_key:
        variants.setdefault(by_key[key]["function"]["name"], []).append(key)
    taken = set(variants)
    names: dict[str, str] = {}
    renamed = 0
    for base, group in variants.items():
        ranked = sorted(group, key=lambda k: (-uses[k], first_seen[k]))
        names[ranked[0]] = base
        for number, key in enumerate(ranked[1:], start=2):
            name = _variant_name(base, number, taken)
            taken.add(name)
            names[key] = name
            renamed += 1
    order = _keep_order(sequences, first_seen)
    position = {key: index for index, key in enumerate(order)}
    reordered = sum(
        1 for seq in sequences if any(position[a] > position[b] for a, b in itertools.pairwise(seq))
    )
    tools = []
    for key in order:
        tool = copy.deepcopy(by_key[key])
        tool["function"]["name"] = names[key]
        tools.append(tool)
    return Catalogue(tools, names, renamed, reordered)


# --------------------------------------------------------------------------- cases


@dataclass(frozen=True)
class Skipped:
    id: str
    reason: str


def _expected_call(
    fn_name: str, answer: Mapping[str, Any], doc: BfclFunction, tool: str
) -> tuple[dict[str, Any] | None, str | None]:
    """A callgate expected call from one BFCL ground-truth call, or why BFCL never passes it."""
    properties = doc.parameters.get("properties", {})
    required = doc.parameters.get("required", [])
    for name in required:
        if name not in answer:
            # Required, so it must be given; not in the answer, so giving it is rejected.
            return None, f"{fn_name}: required parameter {name!r} has no possible answer"
    args: dict[str, Any] = {}
    for param, values in answer.items():
        if not isinstance(values, list):
            raise ValueError(f"{fn_name}.{param}: a possible answer must be a list")
        optional = "" in values
        if param not in properties:
            if optional:
                continue  # may be left out, and giving it is an unknown parameter: same verdicts
            return None, f"{fn_name}: {param!r} must be given but is not a parameter of the doc"
        if not values:
            return None, f"{fn_name}.{param}: the possible-answer list is empty"
        accepted = [v for v in values if v != ""] or [""]
        spec: dict[str, Any] = {"one_of": accepted}
        if optional:
            spec["optional"] = True
        args[param] = spec
    return {"tool": tool, "args": args}, None


def convert_entry(
    category: str,
    entry: BfclEntry,
    answer: BfclAnswer | None,
    tool_names: Mapping[str, str],
) -> tuple[dict[str, Any] | None, Skipped | None]:
    """One BFCL entry as a callgate case (a JSON object for cases.jsonl)."""
    kind = CATEGORIES[category]
    if len(entry.question) != 1:
        raise InputError(entry.id, "multi-turn entries are not supported")
    tags = [category]
    if category.startswith("live_"):
        tags.append("live")
    if "parallel" in category:
        tags.append("parallel")
    expect: dict[str, Any]
    if kind == "irrelevance":
        tags.append("no-tool")
        expect = {"type": "no_call"}
    elif kind == "relevance":
        expect = {"type": "any_call"}
    else:
        assert answer is not None
        docs = {f.name: f for f in entry.function}
        calls = []
        for ground in answer.ground_truth:
            if len(ground) != 1:
                raise InputError(entry.id, "each ground-truth call must name one function")
            ((fn_name, params),) = ground.items()
            if fn_name not in docs:
                raise InputError(entry.id, f"ground truth calls {fn_name!r}, which is not offered")
            call, why = _expected_call(fn_name, params, docs[fn_name], tool_names[fn_name])
            if call is None:
                return None, Skipped(entry.id, why or "")
            calls.append(call)
        # ast_checker.py:41-61: "parallel" categories match in any order, others one call.
        mode = "unordered" if "parallel" in category else "strict"
        expect = {"type": "calls", "mode": mode, "calls": calls}
    case: dict[str, Any] = {
        "id": entry.id,
        "messages": entry.question[0],
        "tools": list(tool_names.values()),
        "tags": tags,
        "expect": expect,
    }
    return case, None


@dataclass(frozen=True)
class ImportResult:
    out: Path
    category: str
    cases: int
    tools: int
    renamed: int
    reordered: int
    skipped: list[Skipped]


@dataclass(frozen=True)
class Converted:
    tools: list[dict[str, Any]]  # tools.json
    cases: list[dict[str, Any]]  # cases.jsonl, one object a line
    meta: dict[str, Any]  # suite.json
    catalogue: Catalogue
    skipped: list[Skipped]


def convert_category(data: CategoryData) -> Converted:
    """Tools, cases and suite.json for one category. Pure: nothing is written."""
    per_entry: list[list[dict[str, Any]]] = []
    for entry in data.entries:
        converted = [convert_function(f, entry.id) for f in entry.function]
        names = [tool["function"]["name"] for tool in converted]
        if len(set(names)) != len(names):
            raise InputError(entry.id, "two functions share one name once '.' becomes '_'")
        per_entry.append(converted)
    catalogue = build_catalogue(per_entry)
    cases: list[dict[str, Any]] = []
    skipped: list[Skipped] = []
    for entry, converted in zip(data.entries, per_entry, strict=True):
        tool_names = {
            f.name: catalogue.names[canonical_json(tool)]
            for f, tool in zip(entry.function, converted, strict=True)
        }
        try:
            case, skip = convert_entry(data.category, entry, data.answers.get(entry.id), tool_names)
        except ValueError as exc:
            raise InputError(entry.id, str(exc)) from None
        if skip is not None:
            skipped.append(skip)
        elif case is not None:
            cases.append(case)
    meta: dict[str, Any] = {
        "name": f"bfcl-{data.category}",
        "description": f"Berkeley Function Calling Leaderboard, category {data.category}, "
        "imported by callgate (see docs/bfcl.md).",
        "match": dict(MATCH_RULES),
        "source": {
            "benchmark": "bfcl",
            "category": data.category,
            "package_version": data.version,
            "file": data.origin,
            "license": "Apache-2.0",
        },
        "skipped": [{"id": s.id, "reason": s.reason} for s in skipped],
    }
    return Converted(catalogue.tools, cases, meta, catalogue, skipped)


SUITE_FILES = ("tools.json", "cases.jsonl", "suite.json")


def _imported_from_bfcl(meta_path: Path) -> bool:
    try:
        previous = json.loads(meta_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):  # unreadable, not UTF-8, not JSON: not ours to overwrite
        return False
    source_meta = previous.get("source") if isinstance(previous, dict) else None
    return isinstance(source_meta, dict) and source_meta.get("benchmark") == "bfcl"


def _check_target(target: Path) -> None:
    """A directory that holds a suite not imported from BFCL is never overwritten."""
    if target.exists() and not target.is_dir():
        raise InputError(target, "exists and is not a directory")
    meta_path = target / "suite.json"
    if meta_path.exists():
        if _imported_from_bfcl(meta_path):
            return
    elif not any((target / name).exists() for name in SUITE_FILES):
        return
    raise InputError(
        target, "holds a suite not imported from BFCL; not overwritten (--force overwrites it)"
    )


def import_category(
    source: Path | str, category: str, out: Path | str, *, force: bool = False
) -> ImportResult:
    """Read a category, write it as a suite directory, and load it back as a check.

    The suite is written and checked in a temporary directory beside `out`, then moved in, so
    a failure leaves `out` as it was. Other files in `out` are left alone. A directory holding
    a suite that was not imported from BFCL is refused unless `force`."""
    target = Path(out)
    if not force:
        _check_target(target)
    data = read_category(source, category)
    converted = convert_category(data)
    target.parent.mkdir(parents=True, exist_ok=True)
    # A plain mkdir (not mkdtemp's 0700) so that a new `out` gets the usual permissions.
    staging = target.parent / f".{target.name}.{os.getpid()}-{secrets.token_hex(4)}.tmp"
    staging.mkdir()
    try:
        (staging / "tools.json").write_text(
            json.dumps(converted.tools, indent=1, ensure_ascii=False) + "\n", encoding="utf-8"
        )
        with (staging / "cases.jsonl").open("w", encoding="utf-8") as handle:
            for case in converted.cases:
                handle.write(json.dumps(case, ensure_ascii=False) + "\n")
        (staging / "suite.json").write_text(
            json.dumps(converted.meta, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
        )
        load_suite(staging)
        if not target.exists():
            staging.rename(target)
        else:
            for name in SUITE_FILES:
                os.replace(staging / name, target / name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return ImportResult(
        out=target,
        category=category,
        cases=len(converted.cases),
        tools=len(converted.tools),
        renamed=converted.catalogue.renamed,
        reordered=converted.catalogue.reordered,
        skipped=converted.skipped,
    )


# --------------------------------------------------------------------------- answers


def first_value(schema: Mapping[str, Any] | None, spec: ArgSpec) -> Any:
    """The first acceptable value, made concrete: BFCL's object answers list acceptable values
    per key, so an object (or a list of objects) is built from the first of each key's values,
    leaving out keys that may be left out."""
    value = spec.one_of[0]
    expected = declared_type(schema)
    items = schema.get("items") if isinstance(schema, Mapping) else None
    if expected is dict and isinstance(value, dict):
        return _first_object(value)
    if expected is list and declared_type(items) is dict and isinstance(value, list):
        return [_first_object(v) if isinstance(v, dict) else v for v in value]
    return value


def _first_object(pattern: Mapping[str, Any]) -> dict[str, Any]:
    out = {}
    for key, values in pattern.items():
        if not isinstance(values, list) or "" in values or not values:
            continue
        out[key] = values[0]
    return out


def answer_arguments(suite: Suite, call: ExpectedCall) -> dict[str, Any]:
    """Arguments built from the possible answers: the first acceptable value of each key
    argument, leaving out the ones that may be left out (unless the doc requires them)."""
    parameters = suite.tools[call.tool].function.parameters
    required = set(parameters.get("required", []))
    properties = parameters.get("properties", {})
    args: dict[str, Any] = {}
    for key, spec in call.args.items():
        if spec.optional and key not in required:
            continue
        args[key] = first_value(properties.get(key), spec)
    return args


def message(calls: Sequence[tuple[str, Mapping[str, Any] | str]]) -> dict[str, Any]:
    """A bare assistant message making these calls (arguments as objects or raw strings)."""
    if not calls:
        return {"role": "assistant", "content": "I cannot help with that using these tools."}
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": f"call_{index}",
                "type": "function",
                "function": {
                    "name": name,
                    "arguments": args if isinstance(args, str) else json.dumps(args),
                },
            }
            for index, (name, args) in enumerate(calls)
        ],
    }


def answer_message(suite: Suite, case: Case) -> dict[str, Any]:
    """The response BFCL's possible answers describe: right by construction."""
    expect = case.expect
    if expect.type == "no_call":
        return message([])
    if expect.type == "any_call":
        offered = suite.offered_tools(case)
        return message([(offered[0]["function"]["name"] if offered else "any_tool", {})])
    calls = case.expected_call_lists()[0]
    return message([(c.tool, answer_arguments(suite, c)) for c in calls])


def answer_lines(suite: Suite) -> Iterator[str]:
    """Recorded-response lines (JSON) answering every case of an imported suite."""
    for case in suite.cases.values():
        yield json.dumps({"case_id": case.id, "response": answer_message(suite, case)})
