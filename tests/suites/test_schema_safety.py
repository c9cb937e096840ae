"""A tool schema never reaches outside the suite and no pattern can stall a run (issue 22).

Only references inside a tool's own schema resolve; any other, a dangling one and a cycle are
refused when the suite loads (exit 2, naming tools.json, the tool and the pointer), and a
loopback listener shows nothing is requested, on `suite check`, `score` and `run`. Patterns
run on one linear-time engine on both validation paths.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import KEY_ENV, lookup_case, no_call_case
from factories import LOOKUP_ORDER, calls, case, line, message, tool_call, write_lines
from factories import write_suite as write_shop
from loopback import Loopback

from callgate.checks.schema import schema_errors
from callgate.checks.validation import compiled_check, surely_valid
from callgate.errors import InputError
from callgate.suites.schemas import tool_validator
from callgate.suites.suite import lint, load_suite

WELSH = "Llanfairpwllgwyngyllgogerychwyrndrobwllllantysiliogogogoch."
NAME_PATTERN = "^(\\w+\\s?)+$"


def lookup_tool(parameters: dict[str, Any]) -> dict[str, Any]:
    return {"type": "function", "function": {**LOOKUP_ORDER["function"], "parameters": parameters}}


def order_id_schema(order_id: dict[str, Any], **rest: Any) -> dict[str, Any]:
    """lookup_order's parameters with `order_id` as given (the key argument the cases check,
    so loading the suite validates a value against it)."""
    return {"type": "object", "properties": {"order_id": order_id}, "required": ["order_id"],
            **rest}


def shop(root: Path, parameters: dict[str, Any]) -> Path:
    return write_shop(root, [lookup_case("a"), no_call_case("b")], tools=[lookup_tool(parameters)])


def refused(root: Path) -> InputError:
    with pytest.raises(InputError) as caught:
        load_suite(root)
    return caught.value


# --------------------------------------------------------------------------- $ref stays inside


def outside_refs(base: str) -> dict[str, dict[str, Any]]:
    """Each way a schema can point outside itself, with the pointer of the $ref refused."""
    return {
        "http": order_id_schema({"$ref": f"{base}/schemas/order_id.json"}),
        "through an $id base": {
            **order_id_schema({"$ref": "order_id.json"}), "$id": f"{base}/schemas/tool.json"},
        "inside definitions": order_id_schema(
            {"$ref": "#/definitions/id"}, definitions={"id": {"$ref": f"{base}/schemas/id"}}),
        "unused in definitions": order_id_schema(
            {"type": "string"}, definitions={"x": {"$ref": f"{base}/schemas/x"}}),
        "a nested $id": order_id_schema(
            {"$id": f"{base}/schemas/sub/", "allOf": [{"$ref": "../order_id.json"}]}),
    }


POINTERS = {
    "http": "#/properties/order_id/$ref",
    "through an $id base": "#/properties/order_id/$ref",
    "inside definitions": "#/definitions/id/$ref",
    "unused in definitions": "#/definitions/x/$ref",
    "a nested $id": "#/properties/order_id/allOf/0/$ref",
}


@pytest.mark.parametrize("where", list(POINTERS))
def test_a_ref_outside_the_schema_is_refused_without_a_request(
    where: str, tmp_path: Path, loopback: Loopback
) -> None:
    root = shop(tmp_path / "s", outside_refs(f"http://127.0.0.1:{loopback.port}")[where])
    error = refused(root)
    assert error.path.endswith("tools.json")
    assert error.field == "[0].function.parameters" + POINTERS[where][1:].replace(
        "/", ".").replace(".0.", "[0].")
    assert "tool lookup_order" in error.message and POINTERS[where] in error.message
    assert "leaves the tool's schema" in error.message
    assert loopback.requests == []


def test_a_file_ref_is_never_read(tmp_path: Path) -> None:
    secret = tmp_path / "secret.json"
    secret.write_text(json.dumps({"type": "string"}))
    opened: list[str] = []

    def watch(event: str, args: tuple[Any, ...]) -> None:
        if event == "open" and str(args[0]).endswith("secret.json"):
            opened.append(str(args[0]))

    sys.addaudithook(watch)  # cannot be removed; it only records opens of this file
    schema = order_id_schema({"$ref": secret.as_uri()})
    error = refused(shop(tmp_path / "s", schema))
    assert "#/properties/order_id/$ref" in error.message and "file://" in error.message
    # Nor do the validators read it when handed the schema without the load check.
    validator = tool_validator(schema)
    assert compiled_check(validator) is None  # jsonschema-rs, offline, refuses to compile it
    with pytest.raises(Exception, match="secret"):
        schema_errors("lookup_order", schema, validator, {"order_id": 5})
    assert opened == []


def test_neither_validation_path_fetches_what_the_load_check_would_refuse(
    loopback: Loopback,
) -> None:
    # A validator made without the load check: the compiled path runs offline, jsonschema's
    # registry refuses retrieval; the reference ends in an error, never in a request.
    schema = order_id_schema({"$ref": f"http://127.0.0.1:{loopback.port}/schemas/order_id"})
    validator = tool_validator(schema)
    assert not surely_valid(validator, {"order_id": "ord_1"})
    with pytest.raises(Exception, match="order_id"):
        schema_errors("lookup_order", schema, validator, {"order_id": 5})
    assert loopback.requests == []


@pytest.mark.slow
def test_suite_check_score_and_run_refuse_an_http_ref_and_request_nothing(
    tmp_path: Path, loopback: Loopback, callgate_exe: str, cli_env: dict[str, str]
) -> None:
    base = f"http://127.0.0.1:{loopback.port}"
    root = shop(tmp_path / "s", outside_refs(base)["through an $id base"])
    responses = write_lines(tmp_path / "r.jsonl", [
        line("a", message(tool_call("lookup_order", {"order_id": 7}))),
        line("b", {"role": "assistant", "content": "9 to 5"}, finish_reason="stop"),
    ])
    commands = {
        "suite check": ["suite", "check", str(root)],
        "score": ["score", str(root), "-r", str(responses), "-m", "m", "--release", "r1",
                  "--db", "c.db"],
        "run": ["run", str(root), "-m", "openai/local-model", "--api-base", loopback.base_url,
                "--api-key-env", KEY_ENV, "--db", "c.db"],
    }
    for name, args in commands.items():
        done = subprocess.run([callgate_exe, *args], env=cli_env, cwd=tmp_path,
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 2, (name, done.stdout, done.stderr)
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and "tools.json" in lines[0], (name, lines)
        assert "tool lookup_order" in lines[0] and "#/properties/order_id/$ref" in lines[0]
        assert "Traceback" not in done.stderr
    assert loopback.requests == [] and not (tmp_path / "c.db").exists()


def test_refs_inside_the_schema_resolve(tmp_path: Path) -> None:
    parameters = order_id_schema(
        {"$ref": "http://example.invalid/tool.json#/definitions/id"},
        definitions={"id": {"$ref": "id.json"},
                     "by_id": {"$id": "id.json", "type": "string", "pattern": "^ord_"}},
        **{"$id": "http://example.invalid/tool.json"},
    )
    suite = load_suite(shop(tmp_path / "s", parameters))
    validator = suite.validators["lookup_order"]
    assert surely_valid(validator, {"order_id": "ord_1"})
    assert schema_errors("lookup_order", parameters, validator, {"order_id": "x_1"})


# --------------------------------------------------------------------------- cycles, dangling


@pytest.mark.parametrize(
    ("parameters", "pointer", "words"),
    [
        (order_id_schema({"$ref": "#/definitions/a"},
                         definitions={"a": {"$ref": "#/definitions/b"},
                                      "b": {"$ref": "#/definitions/a"}}),
         "#/definitions/a/$ref", "cycle (#/definitions/a -> #/definitions/b -> #/definitions/a)"),
        (order_id_schema({"$ref": "#/properties/order_id"}),
         "#/properties/order_id/$ref", "cycle"),
        (order_id_schema({"type": "string"}, allOf=[{"$ref": "#"}]), "#/allOf/0/$ref", "cycle"),
        (order_id_schema({"anyOf": [{"type": "string"}, {"not": {"$ref": "#/properties"
                                                                          "/order_id"}}]}),
         "#/properties/order_id/anyOf/1/not/$ref", "cycle"),
        (order_id_schema({"$ref": "#/definitions/nope"}), "#/properties/order_id/$ref",
         "points at nothing"),
        (order_id_schema({"$ref": "#nowhere"}), "#/properties/order_id/$ref",
         "points at nothing"),
        (order_id_schema({"$ref": "#/required"}), "#/properties/order_id/$ref",
         "points at a list, not a schema"),
        (order_id_schema({"$ref": "urn:uuid:6e8bc430-9c3a-11d9-9669-0800200c9a66"}),
         "#/properties/order_id/$ref", "leaves the tool's schema"),
        (order_id_schema({"$schema": "http://json-schema.org/draft-04/schema#"}),
         "#/properties/order_id/$schema", "only taken at the top"),
    ],
)
def test_a_ref_that_cannot_be_followed_is_refused_with_its_pointer(
    parameters: dict[str, Any], pointer: str, words: str, tmp_path: Path
) -> None:
    error = refused(shop(tmp_path / "s", parameters))
    assert error.field is not None and error.field.startswith("[0].function.parameters.")
    assert "tool lookup_order: " in error.message, error.message
    assert pointer in error.message and words in error.message, error.message


def test_a_recursive_schema_that_reaches_into_the_value_is_allowed(tmp_path: Path) -> None:
    node = {"type": "object", "properties": {
        "name": {"type": "string"},
        "children": {"type": "array", "items": {"$ref": "#/definitions/node"}}}}
    parameters = {"type": "object", "definitions": {"node": node},
                  "properties": {"order_id": {"type": "string"},
                                 "tree": {"$ref": "#/definitions/node"}}}
    suite = load_suite(write_shop(tmp_path / "s", [
        case("a", calls(("lookup_order", {"order_id": "ord_1"})))],
        tools=[lookup_tool(parameters)]))
    validator = suite.validators["lookup_order"]
    good = {"order_id": "o", "tree": {"name": "r", "children": [{"children": [{"name": "x"}]}]}}
    bad = {"order_id": "o", "tree": {"children": [{"children": [{"name": 1}]}]}}
    assert surely_valid(validator, good) and not surely_valid(validator, bad)
    assert schema_errors("lookup_order", parameters, validator, good) == []
    assert schema_errors("lookup_order", parameters, validator, bad) == [
        ("wrong_type", "lookup_order.tree.children.0.children.0.name: expected string, got "
                       "integer 1")]


# --------------------------------------------------------------------------- patterns


def test_a_nested_quantifier_takes_milliseconds_on_both_paths() -> None:
    schema = {"type": "object", "properties": {"name": {"type": "string",
                                                        "pattern": NAME_PATTERN}}}
    validator = tool_validator(schema)
    start = time.perf_counter()
    assert not surely_valid(validator, {"name": WELSH})
    problems = schema_errors("t", schema, validator, {"name": WELSH})
    assert time.perf_counter() - start < 0.5
    assert problems == [("other", f"t.name: {WELSH!r} does not match {NAME_PATTERN!r}")]
    assert surely_valid(validator, {"name": WELSH[:-1]})


@pytest.mark.slow
def test_score_of_a_call_that_would_backtrack_for_ever_ends_quickly(
    tmp_path: Path, callgate_exe: str, cli_env: dict[str, str]
) -> None:
    tool = {"type": "function", "function": {"name": "find_town", "parameters": {
        "type": "object", "properties": {"name": {"type": "string", "pattern": NAME_PATTERN}},
        "required": ["name"]}}}
    root = write_shop(tmp_path / "s", [
        case("a", calls(("find_town", {"name": "Llanfair"}))), case("b", {"type": "no_call"})],
        tools=[tool])
    responses = write_lines(tmp_path / "r.jsonl", [
        line("a", message(tool_call("find_town", {"name": WELSH}))),
        line("a", message(tool_call("find_town", {"name": WELSH})), repeat=1),
    ])
    start = time.monotonic()
    done = subprocess.run(
        [callgate_exe, "score", str(root), "-r", str(responses), "-m", "m", "--release", "r1",
         "--db", "c.db", "--json"], env=cli_env, cwd=tmp_path, capture_output=True, text=True,
        timeout=60)
    assert done.returncode == 0, done.stderr
    assert time.monotonic() - start < 30
    assert "schema_violation" in done.stdout


@pytest.mark.parametrize(
    ("pattern", "words"),
    [
        ("^(?=.*\\d)\\w+$", "lookaround or a backreference"),
        ("^(?<!x)y", "lookaround or a backreference"),
        ("^(a)\\1$", "lookaround or a backreference"),
        ("^ord_\\d+\\Z", "not a valid ECMA-262 regular expression"),  # Python's end of text
        ("^[[:alpha:]]+$", "not a valid ECMA-262 regular expression"),
        ("(", "not a valid ECMA-262 regular expression"),
    ],
)
def test_a_pattern_the_engine_cannot_run_is_refused_at_load(
    pattern: str, words: str, tmp_path: Path
) -> None:
    error = refused(shop(tmp_path / "s", order_id_schema({"type": "string", "pattern": pattern})))
    assert "#/properties/order_id/pattern" in error.message and words in error.message
    where = {"patternProperties": {pattern: {"type": "string"}}}
    error = refused(shop(tmp_path / "p", order_id_schema({"type": "string"}, **where)))
    assert "#/patternProperties/" in error.message and words in error.message


def test_an_ecma_pattern_python_cannot_compile_loads(tmp_path: Path) -> None:
    parameters = order_id_schema({"type": "string", "pattern": "^(?<prefix>ord)_\\d+$"})
    suite = load_suite(shop(tmp_path / "s", parameters))
    validator = suite.validators["lookup_order"]
    assert surely_valid(validator, {"order_id": "ord_1"})
    assert schema_errors("lookup_order", parameters, validator, {"order_id": "x_1"})


def test_suite_check_warns_about_a_nested_quantifier(tmp_path: Path) -> None:
    parameters = order_id_schema({"type": "string"},
                                 properties={"order_id": {"type": "string"},
                                             "name": {"type": "string",
                                                      "pattern": NAME_PATTERN}})
    warnings = lint(load_suite(shop(tmp_path / "s", parameters)))
    found = [w for w in warnings if "#/properties/name/pattern" in w]
    assert len(found) == 1 and found[0].startswith("tool lookup_order: ")
    assert "exponential" in found[0]
    plain = lint(load_suite(shop(tmp_path / "t", order_id_schema(
        {"type": "string", "pattern": "^ord_[0-9]+(_[a-z]+)?$"}))))
    assert not [w for w in plain if "pattern" in w]
