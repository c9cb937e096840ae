"""What a tool's parameters schema may hold, and the validator its calls are checked with.

Two rules keep a schema from reaching outside the suite or stalling a run (docs/formats.md):

- Every `$ref` resolves inside the tool's own schema (`#/...` pointers, `#/definitions/x`,
  `$id`-relative references that stay in the document). Any other one, a dangling one, one that
  points at something not a schema and a cycle of references that never reaches into the value
  are refused when the suite loads. Nothing is ever fetched: the validators' registry refuses
  retrieval (and the compiled path runs offline), whatever reaches them.
- `pattern` and `patternProperties` run on one linear-time engine: the `regex` crate behind
  jsonschema-rs, in its ECMA-262 dialect, on the compiled path and the explaining path alike,
  so both give the same verdict and no string can make a match take exponential time. A pattern
  that engine cannot run (lookaround, backreferences, a syntax error) is refused at load.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlsplit

import jsonschema_rs
from jsonschema import Draft7Validator, FormatChecker, ValidationError, validators
from referencing import Registry
from referencing.exceptions import NoSuchResource, Unresolvable
from referencing.jsonschema import DRAFT7

# The regex crate: linear time in the pattern and the text; lookaround and backreferences are
# refused. The same options compile the whole schema on the compiled path (checks/validation).
PATTERN_OPTIONS = jsonschema_rs.RegexOptions()

# Keywords whose value is a schema, a list of schemas or a map of names to schemas (Draft 7).
ONE_SCHEMA = (
    "additionalItems", "additionalProperties", "contains", "else", "if", "items", "not",
    "propertyNames", "then",
)
SCHEMA_LISTS = ("allOf", "anyOf", "items", "oneOf")
# `$defs` is no Draft 7 keyword, but a common place for what `#/$defs/x` refers to.
SCHEMA_MAPS = ("$defs", "definitions", "dependencies", "patternProperties", "properties")
# Those applied to the value itself rather than to a part of it: a cycle through these and
# `$ref` alone never ends.
_IN_PLACE_ONE = ("else", "if", "not", "then")
_IN_PLACE_LISTS = ("allOf", "anyOf", "oneOf")


class SchemaRefused(Exception):
    """A schema callgate will not validate with; `pointer` is the JSON pointer of the place."""

    def __init__(self, pointer: str, message: str) -> None:
        self.pointer = pointer
        self.message = message
        super().__init__(message)


# --------------------------------------------------------------------------- patterns


@functools.lru_cache(maxsize=4096)
def _matcher(pattern: str) -> Callable[[str], bool]:
    return jsonschema_rs.Draft7Validator(
        {"pattern": pattern}, pattern_options=PATTERN_OPTIONS, offline=True
    ).is_valid


_SURROGATE = re.compile("[\ud800-\udfff]")


def search(pattern: str, text: str) -> bool:
    """Whether `pattern` matches somewhere in `text`, as the compiled path decides it. A lone
    surrogate (which Rust strings cannot hold) is matched as U+FFFD."""
    match = _matcher(pattern)
    try:
        return match(text)
    except UnicodeEncodeError:
        return match(_SURROGATE.sub("\ufffd", text))


def pattern_problem(pattern: str) -> str | None:
    """Why the engine cannot run `pattern`, or None."""
    try:
        _matcher(pattern)
    except ValueError:
        try:
            jsonschema_rs.Draft7Validator({"pattern": pattern}, offline=True)
        except ValueError:
            return "is not a valid ECMA-262 regular expression (or is too large to compile)"
        return ("uses lookaround or a backreference, which callgate's linear-time regex "
                "engine does not run (docs/formats.md)")
    return None


def _is_regex(instance: object) -> bool:
    return not isinstance(instance, str) or pattern_problem(instance) is None


def nested_quantifier(pattern: str) -> bool:
    """Whether a group holding a repeat is itself repeated, as in `(\\w+\\s?)+` or `(a*)*`:
    harmless here, exponential on a backtracking engine (Python's re, JavaScript)."""
    holds = [False]  # per open group: a `*`, `+` or `{n,}` inside it
    index = 0
    while index < len(pattern):
        char = pattern[index]
        index += 1
        if char == "\\":
            index += 1
        elif char == "[":
            index += pattern[index : index + 1] == "]"
            while index < len(pattern) and pattern[index] != "]":
                index += 2 if pattern[index] == "\\" else 1
            index += 1
        elif char == "(":
            holds.append(False)
        elif char == ")" and len(holds) > 1:
            inner = holds.pop()
            if inner and _repeats(pattern, index):
                return True
            holds[-1] = holds[-1] or inner
        elif _repeats(pattern, index - 1):
            holds[-1] = True
    return False


_BRACE = re.compile(r"\{(\d+)(,(\d*))?\}")


def _repeats(pattern: str, index: int) -> bool:
    """Whether a quantifier repeating more than once starts at `index`."""
    if pattern[index : index + 1] in ("*", "+"):
        return True
    brace = _BRACE.match(pattern, index)
    return bool(brace and brace.group(2) and (not brace.group(3) or int(brace.group(3)) > 1))


# --------------------------------------------------------------------------- the validator


def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[Any]:
    if validator.is_type(instance, "string") and not search(pattern, instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(validator: Any, patterns: Any, instance: Any,
                        schema: Any) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            if search(pattern, key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional_properties(validator: Any, extra: Any, instance: Any,
                           schema: Any) -> Iterator[Any]:
    """jsonschema's own, with `patternProperties` matched by `search`."""
    if not validator.is_type(instance, "object"):
        return
    properties = schema.get("properties", {})
    patterns = list(schema.get("patternProperties", {}))
    extras = {key for key in instance if key not in properties
              and not any(search(pattern, key) for pattern in patterns)}
    if validator.is_type(extra, "object"):
        for key in extras:
            yield from validator.descend(instance[key], extra, path=key)
    elif not extra and extras:
        if patterns:
            verb = "does" if len(extras) == 1 else "do"
            joined = ", ".join(repr(each) for each in sorted(extras))
            listed = ", ".join(repr(each) for each in sorted(patterns))
            yield ValidationError(f"{joined} {verb} not match any of the regexes: {listed}")
        else:
            listed = ", ".join(repr(each) for each in sorted(extras, key=str))
            verb = "was" if len(extras) == 1 else "were"
            yield ValidationError(f"Additional properties are not allowed ({listed} {verb} "
                                  "unexpected)")


ToolValidator = validators.extend(
    Draft7Validator,
    {"pattern": _pattern, "patternProperties": _pattern_properties,
     "additionalProperties": _additional_properties},
)


def _refuse(uri: str) -> Any:
    raise NoSuchResource(uri)


# Retrieval refused: a reference the load check let through can only resolve in the document.
NO_RETRIEVAL: Registry[Any] = Registry(retrieve=_refuse)  # type: ignore[call-arg]


def tool_validator(schema: Any, *, formats: bool = True) -> Any:
    """The validator of one tool's calls: Draft 7, patterns on the linear-time engine, no
    retrieval; `format` checked by jsonschema's Draft 7 checkers unless `formats` is False."""
    checker = Draft7Validator.FORMAT_CHECKER if formats else None
    return ToolValidator(schema, format_checker=checker, registry=NO_RETRIEVAL)


def like(validator: Any, schema: Any) -> Any:
    """A validator of `validator`'s class and format checker for another schema."""
    return type(validator)(schema, format_checker=validator.format_checker,
                           registry=NO_RETRIEVAL)


def runs_patterns_here(validator: Any) -> bool:
    """Whether `validator` matches patterns with `search` (else with Python's re)."""
    return isinstance(validator, ToolValidator)


# The meta-schema check with `format: regex` decided by the same engine (not Python's re).
_META_FORMATS = FormatChecker(formats=())
_META_FORMATS.checkers = {**Draft7Validator.FORMAT_CHECKER.checkers, "regex": (_is_regex, ())}


def check_schema(schema: Any) -> None:
    """Raise jsonschema's SchemaError when `schema` is not a Draft 7 document."""
    Draft7Validator.check_schema(schema, format_checker=_META_FORMATS)


# --------------------------------------------------------------------------- the load check


def _escape(segment: object) -> str:
    return str(segment).replace("~", "~0").replace("/", "~1")


def field_of(pointer: str) -> str:
    """A JSON pointer as the tail of an error's field (/properties/a/allOf/0 ->
    .properties.a.allOf[0]), which reading.names_lines finds the line of."""
    parts = [part.replace("~1", "/").replace("~0", "~") for part in pointer.split("/")[1:]]
    return "".join(f"[{part}]" if part.isdigit() else f".{part}" for part in parts)


def _children(node: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    """(pointer suffix, subschema) for each subschema a Draft 7 keyword of `node` holds."""
    for keyword in ONE_SCHEMA:
        if isinstance(node.get(keyword), dict | bool):
            yield f"/{keyword}", node[keyword]
    for keyword in SCHEMA_LISTS:
        if isinstance(node.get(keyword), list):
            for index, item in enumerate(node[keyword]):
                yield f"/{keyword}/{index}", item
    for keyword in SCHEMA_MAPS:
        if isinstance(node.get(keyword), dict):
            for name, item in node[keyword].items():
                if isinstance(item, dict | bool):
                    yield f"/{keyword}/{_escape(name)}", item


def _in_place(node: dict[str, Any], ref_target: Any) -> Iterator[Any]:
    """The subschemas applied to the same value as `node` (Draft 7: beside `$ref`, none)."""
    if "$ref" in node:
        if isinstance(ref_target, dict):
            yield ref_target
        return
    for keyword in _IN_PLACE_ONE:
        if isinstance(node.get(keyword), dict):
            yield node[keyword]
    for keyword in _IN_PLACE_LISTS:
        if isinstance(node.get(keyword), list):
            yield from (item for item in node[keyword] if isinstance(item, dict))
    if isinstance(node.get("dependencies"), dict):
        yield from (item for item in node["dependencies"].values() if isinstance(item, dict))


def _locations(document: Any) -> dict[int, str]:
    """The JSON pointer of every object and array in `document`, by identity."""
    found: dict[int, str] = {}
    stack: list[tuple[Any, str]] = [(document, "")]
    while stack:
        value, pointer = stack.pop()
        if isinstance(value, dict):
            found[id(value)] = pointer
            stack.extend((item, f"{pointer}/{_escape(key)}") for key, item in value.items())
        elif isinstance(value, list):
            found[id(value)] = pointer
            stack.extend((item, f"{pointer}/{index}") for index, item in enumerate(value))
    return found


def _shown(ref: str) -> str:
    """A reference as an error quotes it: no user, password or query, at most 80 characters."""
    try:
        parts = urlsplit(ref)
        host = parts.netloc.rpartition("@")[2]
        if parts.scheme and (parts.netloc or parts.query):
            ref = f"{parts.scheme}://{host}{parts.path}"
    except ValueError:
        pass
    return repr(ref if len(ref) <= 80 else ref[:77] + "...")


def _resolve(resolver: Any, ref: str, pointer: str, asked: list[str]) -> tuple[Any, Any]:
    where = f"$ref {_shown(ref)} at #{pointer}/$ref"
    try:
        resolved = resolver.lookup(ref)
    except (Unresolvable, LookupError, TypeError, ValueError):
        if asked:  # not found in the document, so the registry was asked to fetch it
            raise SchemaRefused(
                f"{pointer}/$ref",
                f"{where} leaves the tool's schema: only references inside it resolve "
                "(#/..., #/definitions/..., $id-relative ones within the document); "
                "nothing is fetched",
            ) from None
        raise SchemaRefused(f"{pointer}/$ref",
                            f"{where} points at nothing in the tool's schema") from None
    if not isinstance(resolved.contents, dict | bool):
        raise SchemaRefused(f"{pointer}/$ref", f"{where} points at a "
                            f"{type(resolved.contents).__name__}, not a schema")
    return resolved.contents, resolved.resolver


def audit(schema: Any) -> list[tuple[str, str]]:
    """Check the references and patterns of one tool's schema; raise SchemaRefused naming the
    first problem's pointer. Returns (pointer, pattern) of each pattern with a nested
    quantifier (suite check warns about them)."""
    if not isinstance(schema, dict):
        return []
    has_refs = mentions(schema, "$ref")
    locations = _locations(schema) if has_refs else {}
    asked: list[str] = []

    def retrieve(uri: str) -> Any:
        asked.append(uri)
        raise NoSuchResource(uri)

    registry: Registry[Any] = Registry(retrieve=retrieve)  # type: ignore[call-arg]
    root = registry.resolver_with_root(DRAFT7.create_resource(schema))
    nested: list[tuple[str, str]] = []
    targets: dict[int, Any] = {}  # id(node with $ref) -> what its $ref resolves to
    seen: dict[int, tuple[dict[str, Any], str]] = {}
    # Each node with the resolver jsonschema would use there (its own $id already applied).
    stack: list[tuple[Any, str, Any]] = [(schema, "", root)]
    while stack:
        node, pointer, resolver = stack.pop()
        if not isinstance(node, dict) or id(node) in seen:
            continue
        seen[id(node)] = (node, pointer)
        if "$schema" in node and node is not schema:
            raise SchemaRefused(f"{pointer}/$schema",
                                f"$schema at #{pointer}/$schema: it is only taken at the "
                                "top of a tool's parameters")
        if isinstance(node.get("pattern"), str):
            _check_pattern(node["pattern"], f"{pointer}/pattern", nested)
        if isinstance(node.get("patternProperties"), dict):
            for key in node["patternProperties"]:
                _check_pattern(key, f"{pointer}/patternProperties/{_escape(key)}", nested)
        if isinstance(node.get("$ref"), str):
            target, at = _resolve(resolver, node["$ref"], pointer, asked)
            targets[id(node)] = target
            stack.append((target, locations.get(id(target), "?"), at))
        for suffix, child in _children(node):
            inside = resolver
            if has_refs and isinstance(child, dict):
                inside = resolver.in_subresource(DRAFT7.create_resource(child))
            stack.append((child, pointer + suffix, inside))
    if targets:
        _refuse_cycles(seen, targets)
    return nested


def pattern_warnings(tool: str, schema: Any) -> list[str]:
    """What `suite check` says of a schema whose patterns would be slow elsewhere."""
    return [
        f"tool {tool}: pattern {_shown(pattern)} at #{pointer} repeats a group that holds a "
        "repeat: callgate matches it in linear time, but a backtracking engine (Python's re, "
        "JavaScript) can take exponential time on a near-miss"
        for pointer, pattern in audit(schema)
    ]


def _check_pattern(pattern: str, pointer: str, nested: list[tuple[str, str]]) -> None:
    problem = pattern_problem(pattern)
    if problem is not None:
        raise SchemaRefused(pointer, f"pattern {_shown(pattern)} at #{pointer} {problem}")
    if nested_quantifier(pattern):
        nested.append((pointer, pattern))


def _refuse_cycles(seen: dict[int, tuple[dict[str, Any], str]], targets: dict[int, Any]) -> None:
    """Refuse a loop of schemas applied to the same value (through `$ref`, allOf, not, ...):
    validating against it never ends. A recursion through properties or items is fine."""
    done: set[int] = set()
    for start in seen:
        if start in done:
            continue
        path: list[int] = [start]
        on_path = {start}
        pending: list[Iterator[Any]] = [_in_place(seen[start][0], targets.get(start))]
        while pending:
            child = next(pending[-1], None)
            if child is None:
                pending.pop()
                done.add(path[-1])
                on_path.discard(path.pop())
                continue
            key = id(child)
            if key in on_path:
                loop = [*path[path.index(key):], key]
                refs = [seen[node][1] for node in loop[:-1] if node in targets]
                chain = " -> ".join(f"#{seen[node][1]}" for node in loop)
                raise SchemaRefused(
                    f"{refs[0]}/$ref",
                    f"$ref at #{refs[0]}/$ref is part of a cycle ({chain}) that never reaches "
                    "into the value, so validating against it would never end",
                )
            if key in done or key not in seen:
                continue
            path.append(key)
            on_path.add(key)
            pending.append(_in_place(child, targets.get(key)))


def mentions(value: Any, keyword: str) -> bool:
    """Whether `keyword` is a key anywhere in `value` (schema-blind, so never misses one)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if keyword in item:
                return True
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False
