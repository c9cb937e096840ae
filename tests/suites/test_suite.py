"""Suite loading: every bad input names file, line and field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from factories import LOOKUP_ORDER, TOOLS, calls, case, write_lines, write_suite

from callgate.errors import InputError
from callgate.suites.responses import read_responses
from callgate.suites.suite import lint, load_suite

GOOD = case("ord", calls(("lookup_order", {"order_id": "ord_7281"})))


def load_error(tmp_path: Path, cases: list, tools: list | None = None) -> InputError:
    with pytest.raises(InputError) as info:
        load_suite(write_suite(tmp_path / "s", cases, tools))
    return info.value


def test_good_suite_loads_with_fingerprint(tmp_path: Path) -> None:
    suite = load_suite(write_suite(tmp_path / "s", [GOOD], name="orders"))
    assert suite.name == "orders" and list(suite.cases) == ["ord"]
    assert len(suite.fingerprint) == 64
    again = load_suite(write_suite(tmp_path / "t", [GOOD], name="orders"))
    assert again.fingerprint == suite.fingerprint
    changed = load_suite(write_suite(tmp_path / "u", [{**GOOD, "tags": ["x"]}]))
    assert changed.fingerprint != suite.fingerprint


def test_invalid_draft7_schema_is_refused(tmp_path: Path) -> None:
    bad = json.loads(json.dumps(LOOKUP_ORDER))
    bad["function"]["parameters"]["properties"]["order_id"]["type"] = "text"
    err = load_error(tmp_path, [GOOD], [bad])
    assert err.path.endswith("tools.json") and err.field == "[0].function.parameters"
    assert "Draft 7" in str(err)


def test_a_dangling_ref_names_the_line_of_the_ref(tmp_path: Path) -> None:
    bad = json.loads(json.dumps(LOOKUP_ORDER))
    bad["function"]["parameters"]["properties"]["include_items"] = {"$ref": "#/definitions/no"}
    root = write_suite(tmp_path / "s", [GOOD], [bad])
    (root / "tools.json").write_text(json.dumps([bad], indent=2))
    with pytest.raises(InputError) as info:
        load_suite(root)
    text = (root / "tools.json").read_text().splitlines()
    assert info.value.line is not None and '"$ref"' in text[info.value.line - 1]
    assert info.value.field == "[0].function.parameters.properties.include_items.$ref"
    assert "#/properties/include_items/$ref" in info.value.message


def test_unknown_expectation_type_names_line_and_field(tmp_path: Path) -> None:
    err = load_error(tmp_path, [GOOD, case("x", {"type": "maybe"})])
    assert err.path.endswith("cases.jsonl") and err.line == 2
    assert err.field is not None and err.field.startswith("expect")


def test_unknown_tool_in_expectation(tmp_path: Path) -> None:
    err = load_error(tmp_path, [case("x", calls(("lookup_ordr", {})))])
    assert (err.line, err.field) == (1, "expect.calls[0].tool")
    assert "lookup_ordr" in str(err)


def test_key_argument_that_is_not_a_parameter(tmp_path: Path) -> None:
    err = load_error(tmp_path, [case("x", calls(("lookup_order", {"email": "a"})))])
    assert err.field == "expect.calls[0].args.email"


def test_expected_value_that_can_never_pass_the_schema(tmp_path: Path) -> None:
    err = load_error(tmp_path, [case("x", calls(("lookup_order", {"include_items": "yes"})))])
    assert err.field == "expect.calls[0].args.include_items" and "never pass" in str(err)


def test_tool_expected_but_not_offered(tmp_path: Path) -> None:
    c = case("x", calls(("lookup_order", {})), tools=["track_shipment"])
    assert "not offered" in str(load_error(tmp_path, [c]))


def test_duplicate_case_id(tmp_path: Path) -> None:
    err = load_error(tmp_path, [GOOD, GOOD])
    assert (err.line, err.field) == (2, "id")


def test_broken_json_line(tmp_path: Path) -> None:
    root = write_suite(tmp_path / "s", [GOOD])
    (root / "cases.jsonl").write_text(json.dumps(GOOD) + "\n{oops\n")
    with pytest.raises(InputError) as info:
        load_suite(root)
    assert info.value.line == 2 and "invalid JSON" in str(info.value)


def test_missing_messages_field(tmp_path: Path) -> None:
    bad = {k: v for k, v in GOOD.items() if k != "messages"}
    err = load_error(tmp_path, [bad])
    assert err.field == "messages" and str(err).startswith(str(tmp_path / "s" / "cases.jsonl"))


def test_lint_warns_about_a_suite_without_no_call_cases(tmp_path: Path) -> None:
    warnings = lint(load_suite(write_suite(tmp_path / "s", [GOOD], TOOLS)))
    assert any("no case expects no call" in w for w in warnings)
    assert any("ambiguous" in w for w in warnings)


def test_response_file_errors_name_line_and_field(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "r.jsonl", [
        {"case_id": "ord", "response": {"role": "assistant", "content": "hi"}},
        {"case_id": "ord", "repeat": -1, "response": {"role": "assistant"}},
    ])
    with pytest.raises(InputError) as info:
        list(read_responses(path, {"ord"}))
    assert (info.value.line, info.value.field) == (2, "repeat")


@pytest.mark.parametrize(("bad_line", "field", "words"), [
    ({"case_id": "nope", "response": {"role": "assistant"}}, "case_id", "no case"),
    ({"case_id": "ord"}, "response", "needs a response or an error"),
    ({"case_id": "ord", "response": {"role": "assistant"}, "extra": 1}, "extra", "unknown"),
    ({"case_id": "ord", "response": {"tool_calls": [{"function": {}}]}},
     "response.tool_calls[0].function.name", "missing"),
    ({"case_id": "ord", "response": {"choices": []}}, "response.choices", "non-empty"),
    ({"case_id": "ord", "response": {"tool_calls": 5}}, "response.tool_calls", "list"),
    ({"case_id": "ord", "response": {"tool_calls": ["x"]}}, "response.tool_calls[0]", "object"),
    ({"case_id": "ord", "response": {"choices": ["x"]}}, "response.choices[0]", "object"),
    ({"case_id": "ord", "response": {"choices": [{"message": {"tool_calls": {"a": 1}}}]}},
     "response.choices[0].message.tool_calls", "list"),
    ({"case_id": "ord", "turns": [{"role": "assistant"}, 3]}, "turns[1]", "object"),
    ({"case_id": "ord", "response": {"content": [1, {"text": 2}]}}, "response.content[1].text",
     "string"),
    ({"case_id": "ord", "response": {"tool_calls": [{"function": {"name": "f"}, "id": 3}]}},
     "response.tool_calls[0].id", "string"),
])
def test_bad_response_lines(tmp_path: Path, bad_line: dict, field: str, words: str) -> None:
    path = write_lines(tmp_path / "r.jsonl", [bad_line])
    with pytest.raises(InputError) as info:
        list(read_responses(path, {"ord"}))
    assert info.value.line == 1 and info.value.field == field and words in str(info.value)


def test_duplicate_response_key(tmp_path: Path) -> None:
    item = {"case_id": "ord", "response": {"role": "assistant", "content": "x"}}
    path = write_lines(tmp_path / "r.jsonl", [item, item])
    with pytest.raises(InputError) as info:
        list(read_responses(path, {"ord"}))
    assert info.value.line == 2 and "second response" in str(info.value)


def test_a_non_object_tool_names_its_index(tmp_path: Path) -> None:
    err = load_error(tmp_path, [GOOD], [LOOKUP_ORDER, 8])
    assert err.path.endswith("tools.json") and err.field == "[1]"
    assert "function-tool object" in err.message


def test_bytes_that_are_not_utf8_name_file_and_line(tmp_path: Path) -> None:
    root = write_suite(tmp_path / "s", [GOOD])
    tools = (root / "tools.json").read_bytes()
    (root / "tools.json").write_bytes(b"[\n" + tools[1:].replace(b"Look up", b"Look \xff up"))
    with pytest.raises(InputError) as info:
        load_suite(root)
    assert info.value.path.endswith("tools.json") and info.value.line == 2
    assert "UTF-8" in info.value.message
    write_suite(root, [GOOD])
    (root / "cases.jsonl").write_bytes((root / "cases.jsonl").read_bytes() + b'{"id": "\xe9"}\n')
    with pytest.raises(InputError) as info:
        load_suite(root)
    assert info.value.path.endswith("cases.jsonl") and info.value.line == 2
    write_suite(root, [GOOD])
    (root / "suite.json").write_bytes(b'{"name": "caf\xe9"}')
    with pytest.raises(InputError) as info:
        load_suite(root)
    assert info.value.path.endswith("suite.json") and "UTF-8" in info.value.message
    responses = tmp_path / "r.jsonl"
    responses.write_bytes(b'{"case_id": "ord", "response": {"content": "ok"}}\n'
                          b'{"case_id": "ord", "repeat": 1, "response": {"content": "\xc3("}}\n')
    with pytest.raises(InputError) as info:
        list(read_responses(responses, {"ord"}))
    assert info.value.path == str(responses) and info.value.line == 2
    assert "UTF-8" in info.value.message


@pytest.mark.parametrize(("meta", "field", "words"), [
    ({"name": "s", "enviroment": "env:Shop"}, "enviroment", "did you mean 'environment'"),
    ({"colour": "red"}, "colour", "unknown field"),
    (["name"], None, "JSON object"),
    ({"name": 3}, "name", "non-empty string"),
])
def test_bad_suite_json_names_the_field(tmp_path: Path, meta: object, field: str | None,
                                        words: str) -> None:
    root = write_suite(tmp_path / "s", [GOOD])
    (root / "suite.json").write_text(json.dumps(meta))
    with pytest.raises(InputError) as info:
        load_suite(root)
    assert info.value.path.endswith("suite.json") and info.value.field == field
    assert words in info.value.message


def test_any_call_expectation_errors_name_the_field_without_the_tag(tmp_path: Path) -> None:
    err = load_error(tmp_path, [case("x", {"type": "any_call", "mode": "strict"})])
    assert err.field == "expect.mode"


def test_the_parameter_schemas_are_built_once_per_suite(tmp_path: Path) -> None:
    suite = load_suite(write_suite(tmp_path / "s", [GOOD]))
    assert suite.parameter_schemas is suite.parameter_schemas
    assert suite.parameter_schemas == {
        tool["function"]["name"]: tool["function"]["parameters"] for tool in TOOLS}
