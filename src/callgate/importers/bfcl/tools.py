"""BFCL's function docs as the OpenAI function-tool objects BFCL sends, and one tool
catalogue for a category's entries.

Line references are to bfcl-eval 2026.3.23 (Apache-2.0): `ast_checker.py` is
bfcl_eval/eval_checker/ast_eval/ast_checker.py, `handler utils` is
bfcl_eval/model_handler/utils.py. docs/bfcl.md states every mapping decision.
"""

from __future__ import annotations

import copy
import heapq
import itertools
import json
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from callgate.checks.bfcl_rules import NESTED_CONVERSION_TYPES
from callgate.errors import InputError
from callgate.importers.bfcl.records import BfclFunction, Language
from callgate.reading import canonical_json

# bfcl_eval/utils.py:621-627 (_get_language_specific_hint), added to every description.
LANGUAGE_HINTS: dict[Language, str] = {
    "python": " Note that the provided function is in Python 3 syntax.",
    "java": " Note that the provided function is in Java 8 SDK syntax.",
    "javascript": " Note that the provided function is in JavaScript syntax.",
}
LANGUAGE_HINT = LANGUAGE_HINTS["python"]
_LANGUAGE_NAMES: dict[Language, str] = {"java": "Java", "javascript": "JavaScript"}
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


def _as_strings(properties: dict[str, Any], language: Language) -> None:
    """bfcl_eval/utils.py:630-687 (_func_doc_language_specific_pre_processing) for Java and
    JavaScript, in place: every parameter is sent as a string, its type said in words."""
    name = _LANGUAGE_NAMES[language]
    for value in properties.values():
        if value["type"] == "any":
            value["description"] += (
                f" This parameter can be of any type of {name} object in string representation.")
        else:
            value["description"] += (
                f" This is {name} {value['type']} type parameter in string representation.")
        if value["type"] in (("ArrayList", "Array") if language == "java" else ("array",)):
            value["description"] += (
                f" The list elements are of type {value['items']['type']}; they are not in "
                "string representation.")
            del value["items"]
        if language == "javascript" and value["type"] == "dict" and "properties" in value:
            value["description"] += (
                " The dictionary entries have the following schema; they are not in string "
                f"representation. {json.dumps(value['properties'])}")
            del value["properties"]
        value["type"] = "string"


def source_types(function: BfclFunction, language: Language) -> dict[str, dict[str, str]]:
    """What BFCL's checker converts a Java or JavaScript parameter's string by (ast_checker.py
    404-436): the declared type, and the items' type for the types whose items it converts.
    Empty for Python, whose values are checked by the types in the schema sent."""
    if language == "python":
        return {}
    types: dict[str, dict[str, str]] = {}
    for param, value in function.parameters.get("properties", {}).items():
        entry = {"language": language, "type": str(value["type"])}
        if value["type"] in NESTED_CONVERSION_TYPES:
            entry["items"] = str(value["items"]["type"])
        types[param] = entry
    return types


def convert_function(
    function: BfclFunction, where: str, language: Language = "python", *, hint: bool = True
) -> dict[str, Any]:
    """One BFCL function doc as the OpenAI function-tool object BFCL sends (handler utils:79-205
    for an OpenAI-completions model, after the language's pre-processing), with a name that may
    still need a variant suffix."""
    doc = copy.deepcopy(function.model_dump())
    parameters = doc["parameters"]
    parameters["type"] = "object"
    properties = parameters.get("properties")
    if not isinstance(properties, dict):
        raise InputError(where, f"{function.name}: parameters.properties must be an object")
    try:
        if language != "python":
            _as_strings(properties, language)
            source_types(function, language)  # the same keys, read by the checks
        _cast_properties(properties)
    except (KeyError, TypeError, AttributeError) as exc:
        raise InputError(where, f"{function.name}: unsupported parameter schema ({exc})") from None
    _draft7_types(parameters)  # validity is checked once per distinct tool, by load_suite
    spec: dict[str, Any] = {
        "name": openai_name(function.name),
        # BFCL adds no hint to a multi-turn doc held back for a later turn (docs/bfcl.md).
        "description": function.description + (LANGUAGE_HINTS[language] if hint else ""),
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

