"""The BFCL importer and BFCL's rules, on a committed sample of every category.

Verdicts are compared with BFCL's own AST checker (tests/fixtures/bfcl/checker/ast_checker.py,
a verbatim copy) wherever it decides them; see tests/fixtures/bfcl/harness.py.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from bfcl_fixture import DATA, FIXTURES, load_harness
from bfcl_fixture import bfcl_valid as _bfcl
from bfcl_fixture import callgate_verdict as _verdict
from jsonschema import Draft7Validator

from callgate.checks.check import check_response
from callgate.errors import InputError
from callgate.importers import bfcl
from callgate.importers.bfcl import CATEGORIES, import_category, read_category
from callgate.scoring.pipeline import score_file
from callgate.store.db import Store
from callgate.suites.responses import parse_response
from callgate.suites.suite import MatchRules, load_suite

harness = load_harness()
REFERENCE = harness.Reference(harness.load_ast_checker())


@pytest.fixture(scope="module")
def suites(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("suites")
    return {c: import_category(DATA, c, root / c).out for c in CATEGORIES}


def _write_lines(path: Path, lines: Iterator[str] | list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def _score(suite_dir: Path, responses: Path, tmp_path: Path) -> list[Any]:
    suite = load_suite(suite_dir)
    with Store(tmp_path / "callgate.db") as store:
        result = score_file(suite, responses, store, model="m", release="r")
    return result.verdicts


# --------------------------------------------------------------------------- importing


@pytest.mark.parametrize("category", list(CATEGORIES))
def test_every_category_imports_as_a_valid_suite(suites: dict[str, Path], category: str) -> None:
    suite = load_suite(suites[category])
    meta = json.loads((suites[category] / "suite.json").read_text())
    data = read_category(DATA, category)
    # Every case BFCL scores is imported, the ones it can never pass marked so.
    assert list(suite.cases) == [e.id for e in data.entries]
    never = {n["id"] for n in meta["source"]["never_right"]}
    assert never == {c.id for c in suite.cases.values() if c.never_right is not None}
    assert suite.name == f"bfcl-{category}"
    assert suite.gate_figures == ("right_arguments",)  # BFCL's accuracy is right arguments
    language = bfcl.language_of(category)
    assert suite.match.model_copy(update={"source_types": {}}) == MatchRules.model_validate(
        bfcl.MATCH_RULES)
    # Java and JavaScript parameters are sent as strings; BFCL's types are kept for the checks.
    typed = {name for name, tool in suite.tools.items()
             if tool.function.parameters["properties"]} if language != "python" else set()
    assert set(suite.match.source_types) == typed
    for tool in suite.raw_tools:
        function = tool["function"]
        assert bfcl.OPENAI_NAME.match(function["name"]), function["name"]
        assert function["description"].endswith(bfcl.LANGUAGE_HINTS[language])
        Draft7Validator.check_schema(function["parameters"])
        if language != "python":
            properties = function["parameters"]["properties"]
            assert {p["type"] for p in properties.values()} <= {"string"}
            assert set(suite.match.source_types.get(function["name"], {})) == set(properties)
    kinds = {case.expect.type for case in suite.cases.values()}
    expected_kind = {"ast": "calls", "irrelevance": "no_call", "relevance": "any_call"}
    assert kinds == {expected_kind[CATEGORIES[category]]}
    entries = {e.id: e for e in data.entries}
    for case in suite.cases.values():
        # What the model sees is BFCL's own docs, under BFCL's names, in BFCL's order.
        entry = entries[case.id]
        offered = suite.offered_tools(case)
        assert offered == [bfcl.convert_function(f, entry.id, language) for f in entry.function]
        assert case.messages[-1].role == "user"
        if "parallel" in category:
            assert case.expect.mode == "unordered"  # type: ignore[union-attr]
            assert case.tags[0] == category


def test_bfcl_types_become_json_schema() -> None:
    function = bfcl.BfclFunction.model_validate(
        {
            "name": "geo.distance",
            "description": "Distance.",
            "parameters": {
                "type": "dict",
                "properties": {
                    "points": {
                        "type": "array",
                        "items": {"type": "tuple", "items": {"type": "float"}},
                    },
                    "unit": {"type": "any", "description": "Unit."},
                    "scale": {"type": "float", "description": "Scale."},
                    "options": {
                        "type": "dict",
                        "properties": {"exact": {"type": "boolean"}, "k": {"type": "float"}},
                    },
                    "rows": {"type": "array", "items": {"type": "dict", "properties": {}}},
                    "untyped": {"description": "No type."},
                },
                "required": ["points"],
            },
        }
    )
    tool = bfcl.convert_function(function, "test")
    spec = tool["function"]
    params = spec["parameters"]
    props = params["properties"]
    assert spec["name"] == "geo_distance"
    assert params["type"] == "object"
    assert props["points"] == {
        "type": "array",
        "items": {"type": "array", "items": {"type": "number"}},
    }
    assert props["unit"]["type"] == "string"  # BFCL sends "any" as a string
    assert props["scale"] == {
        "type": "number",
        "format": "float",
        "description": "Scale. This is a float type value.",
    }
    assert props["options"]["type"] == "object"
    assert props["options"]["properties"]["k"]["type"] == "number"
    assert props["rows"]["items"]["type"] == "object"
    assert props["untyped"]["type"] == "string"
    assert spec["description"] == "Distance." + bfcl.LANGUAGE_HINT
    Draft7Validator.check_schema(params)


def test_one_name_with_several_docs_keeps_bfcls_name(suites: dict[str, Path]) -> None:
    # simple_python_0 and simple_python_11 both offer calculate_triangle_area, with other docs:
    # the catalogue keeps both (the second under a key with a suffix), and the model is sent
    # each under BFCL's name, so an answer calling that name is judged as BFCL judges it.
    suite = load_suite(suites["simple_python"])
    assert suite.cases["simple_python_0"].tools == ["calculate_triangle_area"]
    raw = suite.raw_cases["simple_python_11"]
    assert raw["tools"] == [
        {"tool": "calculate_triangle_area_v2", "name": "calculate_triangle_area"}
    ]
    sent = suite.offered_tools(suite.cases["simple_python_11"])
    assert [t["function"]["name"] for t in sent] == ["calculate_triangle_area"]
    assert sent[0]["function"] == suite.raw_tools[
        [t["function"]["name"] for t in suite.raw_tools].index("calculate_triangle_area_v2")
    ]["function"] | {"name": "calculate_triangle_area"}
    call = suite.cases["simple_python_11"].expected_call_lists()[0][0]
    args = bfcl.answer_arguments(suite, call)
    for name, right in (("calculate_triangle_area", True), ("calculate_triangle_area_v2", False)):
        verdict = _verdict(suites["simple_python"], "simple_python_11", [(name, args)])
        assert (verdict.right_tool, verdict.right_arguments) == (right, right)
        assert _bfcl("simple_python", "simple_python_11", [(name, args)]) is right
    # math.factorial: the dot becomes an underscore, as BFCL does for OpenAI-style models.
    assert suite.cases["simple_python_1"].tools == ["math_factorial"]


def test_a_case_offers_a_tool_under_one_name_only(tmp_path: Path) -> None:
    suite_dir = tmp_path / "s"
    suite_dir.mkdir()
    tool = {"type": "function", "function": {"name": "f_v2", "parameters": {"type": "object"}}}
    (suite_dir / "tools.json").write_text(json.dumps([tool, {**tool, "function": {"name": "f"}}]))
    case = {"id": "c", "messages": [{"role": "user", "content": "x"}],
            "tools": [{"tool": "f_v2", "name": "f"}, "f"], "expect": {"type": "no_call"}}
    (suite_dir / "cases.jsonl").write_text(json.dumps(case) + "\n")
    with pytest.raises(InputError, match=r"cases.jsonl:1: tools\[1\]: two tools offered as 'f'"):
        load_suite(suite_dir)
    case["tools"] = [{"tool": "g", "name": "f"}]
    (suite_dir / "cases.jsonl").write_text(json.dumps(case) + "\n")
    with pytest.raises(InputError, match=r"tools\[0\]\.tool: unknown tool 'g'"):
        load_suite(suite_dir)


def test_possible_answers_become_acceptable_values(suites: dict[str, Path]) -> None:
    raw = load_suite(suites["simple_python"]).raw_cases
    args = raw["simple_python_0"]["expect"]["calls"][0]["args"]
    assert args == {
        "base": {"one_of": [10]},
        "height": {"one_of": [5]},
        "unit": {"one_of": ["units"], "optional": True},
    }
    only_optional = raw["simple_python_211"]["expect"]["calls"][0]["args"]["cc"]
    assert only_optional == {"one_of": [""], "optional": True}
    # An object answer keeps BFCL's per-key lists of acceptable values.
    drink = load_suite(suites["live_multiple"]).raw_cases["live_multiple_0-0-0"]
    prefs = drink["expect"]["calls"][0]["args"]["new_preferences"]["one_of"][0]
    assert prefs["size"] == ["large"]


NEVER_RIGHT = {
    "live_simple": {"live_simple_106-63-0", "live_simple_112-68-0"},
    "live_multiple": {"live_multiple_862-181-3", "live_multiple_964-207-0"},
    # An ArrayList of `any` whose possible answer holds numbers and booleans: BFCL's converter
    # reads every item of such a list as text.
    "simple_java": {"simple_java_36", "simple_java_65"},
}


def test_cases_bfcl_can_never_pass_are_imported_and_marked(suites: dict[str, Path]) -> None:
    for category, ids in NEVER_RIGHT.items():
        meta = json.loads((suites[category] / "suite.json").read_text())
        assert {n["id"] for n in meta["source"]["never_right"]} == ids
        suite = load_suite(suites[category])
        for case_id in ids:
            assert "cannot be met" in (suite.cases[case_id].never_right or "")
    # The same possible answers in BFCL's own checker: nothing passes them.
    data = read_category(DATA, "live_simple")
    entry = next(e for e in data.entries if e.id == "live_simple_106-63-0")
    answer = data.answers[entry.id]
    ((name, params),) = answer.ground_truth[0].items()
    given = {k: (v[0] if v else []) for k, v in params.items()}
    for args in (given, {k: v for k, v in given.items() if params[k]}):
        message = bfcl.message([(bfcl.openai_name(name), args)])
        assert not REFERENCE.valid("live_simple", entry, answer, message, {})
        assert not _verdict(suites["live_simple"], entry.id, [(bfcl.openai_name(name), args)]
                            ).right_arguments


def test_a_never_right_case_is_wrong_whatever_the_answer(tmp_path: Path) -> None:
    suite_dir = tmp_path / "s"
    suite_dir.mkdir()
    (suite_dir / "tools.json").write_text(json.dumps([{"type": "function", "function": {
        "name": "f", "parameters": {"type": "object", "properties": {"a": {"type": "string"}}}}}]))
    case = {"id": "c", "messages": [{"role": "user", "content": "x"}],
            "expect": {"type": "calls", "calls": [{"tool": "f", "args": {"a": "x"}}]}}
    (suite_dir / "cases.jsonl").write_text(json.dumps(case) + "\n")
    calls = [("f", {"a": "x"})]
    assert _verdict(suite_dir, "c", calls).right_arguments
    (suite_dir / "cases.jsonl").write_text(json.dumps({**case, "never_right": "no key"}) + "\n")
    verdict = _verdict(suite_dir, "c", calls)
    assert verdict.right_tool and not verdict.right_arguments
    assert (verdict.arguments, verdict.arguments_reason) == (
        "wrong_value", "no answer can be right here: no key")


def test_reading_the_wheel_equals_reading_the_folder(tmp_path: Path) -> None:
    wheel = tmp_path / "bfcl_eval-0.0.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path in DATA.rglob("*.json"):
            archive.write(path, f"bfcl_eval/data/{path.relative_to(DATA).as_posix()}")
        archive.writestr("bfcl_eval-0.0.0.dist-info/METADATA", "Name: bfcl_eval\nVersion: 0.0.0\n")
    from_wheel = import_category(wheel, "parallel_multiple", tmp_path / "w")
    from_folder = import_category(DATA, "parallel_multiple", tmp_path / "f")
    for name in ("tools.json", "cases.jsonl"):
        assert (from_wheel.out / name).read_text() == (from_folder.out / name).read_text()
    meta = json.loads((from_wheel.out / "suite.json").read_text())
    assert meta["source"]["package_version"] == "0.0.0"


def test_the_pin_is_the_tested_version() -> None:
    """docs/guides/suites.md, docs/bfcl.md and the committed sample name the version the
    importer is tested with, and no other."""
    root = FIXTURES.parents[2]
    for path in (root / "docs" / "guides" / "suites.md", root / "docs" / "bfcl.md"):
        pins = set(re.findall(r"bfcl-eval==([0-9.]+)", path.read_text(encoding="utf-8")))
        assert pins == {bfcl.TESTED_VERSION}, path
    assert f"version {bfcl.TESTED_VERSION}" in (FIXTURES / "NOTICE").read_text()


def test_import_refuses_unknown_category_and_foreign_suite(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="unknown category"):
        import_category(DATA, "no_such_category", tmp_path / "x")
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "suite.json").write_text('{"name": "hand-made"}')
    with pytest.raises(InputError, match="not imported from BFCL"):
        import_category(DATA, "parallel", mine)


# --------------------------------------------------------------------------- verdicts


@pytest.mark.parametrize("category", list(CATEGORIES))
def test_responses_built_from_the_possible_answers_are_right(
    suites: dict[str, Path], category: str, tmp_path: Path
) -> None:
    suite = load_suite(suites[category])
    responses = _write_lines(tmp_path / "answers.jsonl", bfcl.answer_lines(suite))
    verdicts = _score(suites[category], responses, tmp_path)
    assert len(verdicts) == len(suite.cases)
    wrong = {v.case_id for v in verdicts if not (v.right_tool and v.right_arguments)}
    assert wrong == NEVER_RIGHT.get(category, set())


@pytest.mark.parametrize("category", list(CATEGORIES))
def test_perturbed_responses_get_bfcl_verdicts(
    suites: dict[str, Path], category: str, tmp_path: Path
) -> None:
    """Every perturbation, scored through the real pipeline, against BFCL's own checker."""
    suite = load_suite(suites[category])
    data = read_category(DATA, category)
    entries = {e.id: e for e in data.entries}
    lines: list[str] = []
    expected: dict[tuple[str, int], tuple[str, bool]] = {}
    for case in suite.cases.values():
        entry = entries[case.id]
        names = harness.bfcl_names(case, entry)
        for repeat, (label, message) in enumerate(harness.perturbations(suite, case)):
            lines.append(json.dumps({"case_id": case.id, "repeat": repeat, "response": message}))
            valid = REFERENCE.valid(category, entry, data.answers.get(case.id), message, names)
            expected[(case.id, repeat)] = (label, valid)
    verdicts = _score(suites[category], _write_lines(tmp_path / "r.jsonl", lines), tmp_path)
    known = harness.KNOWN_DIFFERENCES[CATEGORIES[category]]
    differ = []
    for verdict in verdicts:
        label, valid = expected[(verdict.case_id, verdict.repeat)]
        if verdict.right_arguments != valid and label.split("@")[0].split(":")[0] not in known:
            differ.append((verdict.case_id, label, valid, verdict.reason))
    assert differ == []
    labels = {label.split("@")[0].split(":")[0] for label, _ in expected.values()}
    if CATEGORIES[category] == "ast":
        assert {"right", "wrong_function", "unknown_param", "missing_required"} <= labels
        assert {"wrong_type", "outside_list"} <= labels
        # Both verdicts occur: the comparison is not trivially all-right or all-wrong.
        assert {valid for _, valid in expected.values()} == {True, False}


@pytest.mark.parametrize(
    ("args", "right"),
    [
        ({"base": 10, "height": 5}, True),
        ({"base": 10, "height": 5, "unit": "units"}, True),  # optional given its listed value
        ({"base": 10, "height": 5, "unit": " UNITS."}, True),  # BFCL's string normalisation
        ({"base": 10, "height": 5, "unit": "cm"}, False),  # value outside the list
        ({"base": 10.0, "height": 5}, False),  # a float is not an integer (type(x) == int)
        ({"base": True, "height": 5}, False),  # nor is a bool
        ({"base": "10", "height": 5}, False),  # wrong type
        ({"base": 10}, False),  # missing required
        ({"base": 10, "height": 5, "colour": "red"}, False),  # not a parameter
    ],
)
def test_simple_rules(suites: dict[str, Path], args: dict[str, Any], right: bool) -> None:
    calls = [("calculate_triangle_area", args)]
    assert _verdict(suites["simple_python"], "simple_python_0", calls).right_arguments is right
    assert _bfcl("simple_python", "simple_python_0", calls) is right


def test_an_int_is_accepted_for_a_float(suites: dict[str, Path]) -> None:
    # parallel_84: acceleration is a float; its possible answers are [3.5], [2.0] and [0].
    suite = load_suite(suites["parallel"])
    case = suite.cases["parallel_84"]
    calls = [(c.tool, bfcl.answer_arguments(suite, c)) for c in case.expected_call_lists()[0]]
    assert [args["acceleration"] for _, args in calls] == [3.5, 2.0, 0]
    for second, third in ((2, 0.0), (2.0, 0), (2, 0)):
        changed = [
            calls[0],
            (calls[1][0], {**calls[1][1], "acceleration": second}),
            (calls[2][0], {**calls[2][1], "acceleration": third}),
        ]
        assert _verdict(suites["parallel"], "parallel_84", changed).right_arguments
        assert _bfcl("parallel", "parallel_84", changed)


def test_lists_keep_their_order(suites: dict[str, Path]) -> None:
    suite = load_suite(suites["simple_python"])
    call = suite.cases["simple_python_122"].expected_call_lists()[0][0]
    args = bfcl.answer_arguments(suite, call)
    table = args["table"]
    assert len(table) > 1
    swapped = {**args, "table": table[::-1]}
    for given, right in ((args, True), (swapped, False)):
        calls = [(call.tool, given)]
        assert (
            _verdict(suites["simple_python"], "simple_python_122", calls).right_arguments is right
        )
        assert _bfcl("simple_python", "simple_python_122", calls) is right


def test_enum_outside_values_follow_bfcl_not_the_schema(suites: dict[str, Path]) -> None:
    # multiple_76: the doc's enum says "Bronze"; BFCL also lists "bronze", and normalises.
    suite = load_suite(suites["multiple"])
    call = suite.cases["multiple_76"].expected_call_lists()[0][0]
    enum = suite.tools[call.tool].function.parameters["properties"]["material"]["enum"]
    assert "bronze" not in enum
    args = bfcl.answer_arguments(suite, call)
    for material in ("bronze", " BRONZE."):
        calls = [(call.tool, {**args, "material": material})]
        verdict = _verdict(suites["multiple"], "multiple_76", calls)
        assert verdict.right_arguments and verdict.arguments == "right"
        assert _bfcl("multiple", "multiple_76", calls)
    # Full Draft 7 validation would call it a schema violation: hence `schema: top_level`.
    full = Draft7Validator(suite.tools[call.tool].function.parameters)
    assert not full.is_valid({**args, "material": "bronze"})


def test_parallel_calls_match_in_any_order_with_the_same_count(suites: dict[str, Path]) -> None:
    suite = load_suite(suites["parallel"])
    case = suite.cases["parallel_4"]
    calls = [(c.tool, bfcl.answer_arguments(suite, c)) for c in case.expected_call_lists()[0]]
    assert len(calls) > 1
    assert _verdict(suites["parallel"], "parallel_4", calls[::-1]).right_arguments
    fewer = _verdict(suites["parallel"], "parallel_4", calls[:-1])
    more = _verdict(suites["parallel"], "parallel_4", [*calls, calls[0]])
    assert (fewer.tool, more.tool) == ("missing_call", "extra_call")
    assert not _bfcl("parallel", "parallel_4", calls[:-1])
    assert not _bfcl("parallel", "parallel_4", [*calls, calls[0]])


def test_irrelevance_needs_no_call_and_relevance_any_call(suites: dict[str, Path]) -> None:
    irrelevant = load_suite(suites["irrelevance"])
    case_id = next(iter(irrelevant.cases))
    tool = irrelevant.offered_tools(irrelevant.cases[case_id])[0]["function"]["name"]
    assert _verdict(suites["irrelevance"], case_id, []).right_arguments
    called = _verdict(suites["irrelevance"], case_id, [(tool, {})])
    assert called.tool == "unexpected_call" and not called.right_arguments

    relevant = load_suite(suites["live_relevance"])
    case_id = next(iter(relevant.cases))
    tools = [t["function"]["name"] for t in relevant.offered_tools(relevant.cases[case_id])]
    for name in tools:  # any offered tool, with any arguments
        verdict = _verdict(suites["live_relevance"], case_id, [(name, {"anything": 1})])
        assert verdict.right_tool and verdict.right_arguments
    none = _verdict(suites["live_relevance"], case_id, [])
    assert none.tool == "missing_call" and not none.right_arguments
    broken = _verdict(suites["live_relevance"], case_id, [(tools[0], "{")])
    assert broken.arguments == "invalid_json" and not broken.right_arguments


def test_documented_differences_from_bfcl(suites: dict[str, Path]) -> None:
    """docs/bfcl.md, "Not reproduced": BFCL's FC decoder reads a call it cannot decode as no
    call at all; callgate keeps it a call (with invalid JSON), and reads "" as {}."""
    suite_dir = suites["irrelevance"]
    case_id = next(iter(load_suite(suite_dir).cases))
    suite = load_suite(suite_dir)
    tool = suite.offered_tools(suite.cases[case_id])[0]["function"]["name"]
    broken = [(tool, "{")]
    assert not _verdict(suite_dir, case_id, broken).right_arguments
    assert _bfcl("irrelevance", case_id, broken)


def test_first_fit_pairing_is_carried(suites: dict[str, Path]) -> None:
    """BFCL pairs parallel calls first-fit (ast_checker.py:554-620), which can fail where a
    best pairing exists; the suite carries that rule, the default keeps optimal pairing."""
    entry = bfcl.BfclEntry.model_validate(
        {
            "id": "parallel_synthetic",
            "question": [[{"role": "user", "content": "Two cities."}]],
            "function": [
                {
                    "name": "weather",
                    "description": "Weather.",
                    "parameters": {
                        "type": "dict",
                        "properties": {"city": {"type": "string"}},
                        "required": ["city"],
                    },
                }
            ],
        }
    )
    answer = bfcl.BfclAnswer.model_validate(
        {
            "id": "parallel_synthetic",
            "ground_truth": [
                {"weather": {"city": ["Paris", "Rome"]}},
                {"weather": {"city": ["Paris"]}},
            ],
        }
    )
    data = bfcl.CategoryData("parallel", [entry], {entry.id: answer}, "synthetic", None)
    converted = bfcl.convert_category(data)
    tools, cases, meta = converted.tools, converted.cases, converted.meta
    calls = [("weather", {"city": "Paris"}), ("weather", {"city": "Rome"})]
    assert not REFERENCE.valid("parallel", entry, answer, bfcl.message(calls), {})

    from callgate.suites.suite import Case

    case = Case.model_validate(cases[0])
    response = parse_response({"case_id": case.id, "response": bfcl.message(calls)})
    schemas = {t["function"]["name"]: t["function"]["parameters"] for t in tools}
    validators = {name: Draft7Validator(schema) for name, schema in schemas.items()}
    carried = MatchRules.model_validate(meta["match"])
    assert not check_response(case, response, schemas, validators, rules=carried).right_arguments
    optimal = carried.model_copy(update={"pairing": "optimal"})
    assert check_response(case, response, schemas, validators, rules=optimal).right_arguments


def test_default_rules_are_unchanged(suites: dict[str, Path]) -> None:
    """Without a `match` object, values compare as JSON: case-sensitive, True != 1."""
    suite = load_suite(suites["simple_python"])
    case = suite.cases["simple_python_0"]
    schemas = suite.parameter_schemas
    tool = case.expected_call_lists()[0][0].tool

    def right(args: dict[str, Any], rules: MatchRules | None = None) -> bool:
        response = parse_response({"case_id": case.id, "response": bfcl.message([(tool, args)])})
        if rules is None:
            return check_response(case, response, schemas, suite.validators).right_arguments
        return check_response(
            case, response, schemas, suite.validators, rules=rules
        ).right_arguments

    assert right({"base": 10, "height": 5, "unit": "units"})
    assert not right({"base": 10, "height": 5, "unit": "UNITS"})
    assert right({"base": 10, "height": 5, "unit": "UNITS"}, suite.match)
    assert not right({"base": 10.0, "height": 5}, suite.match)
    assert right({"base": 10.0, "height": 5}, MatchRules())  # JSON: 10 == 10.0


def test_unlisted_parameters_are_rejected(suites: dict[str, Path]) -> None:
    """ast_checker.py:376-380: a parameter of the doc that the possible answer does not list
    is unexpected (parallel_multiple_12: calculate_magnetic_field's permeability)."""
    suite = load_suite(suites["parallel_multiple"])
    case = suite.cases["parallel_multiple_12"]
    calls = [(c.tool, bfcl.answer_arguments(suite, c)) for c in case.expected_call_lists()[0]]
    index = next(i for i, (tool, _) in enumerate(calls) if tool == "calculate_magnetic_field")
    calls[index] = (calls[index][0], {**calls[index][1], "permeability": 0.1})
    verdict = _verdict(suites["parallel_multiple"], "parallel_multiple_12", calls)
    assert verdict.arguments == "wrong_value" and "permeability" in verdict.arguments_reason
    assert not _bfcl("parallel_multiple", "parallel_multiple_12", calls)
    schemas = suite.parameter_schemas
    response = parse_response({"case_id": case.id, "response": bfcl.message(calls)})
    ignoring = suite.match.model_copy(update={"unlisted_args": "ignore"})
    assert check_response(case, response, schemas, suite.validators, rules=ignoring).right_arguments


def test_match_rules_change_the_fingerprint(suites: dict[str, Path], tmp_path: Path) -> None:
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(suites["parallel"], copy)
    meta = json.loads((copy / "suite.json").read_text())
    meta["match"]["pairing"] = "optimal"
    (copy / "suite.json").write_text(json.dumps(meta))
    assert load_suite(copy).fingerprint != load_suite(suites["parallel"]).fingerprint
    assert load_suite(copy).match.pairing == "optimal"
    meta["match"] = {"values": "fuzzy"}
    (copy / "suite.json").write_text(json.dumps(meta))
    with pytest.raises(InputError, match=r"match\.values"):
        load_suite(copy)


# --------------------------------------------------------------------------- end to end


@pytest.mark.slow
def test_cli_imports_and_scores(tmp_path: Path) -> None:
    cli = Path(sys.executable).parent / "callgate"
    out = tmp_path / "suite"
    run = subprocess.run(
        [str(cli), "import", "bfcl", str(DATA), "--category", "live_multiple", "--out", str(out)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    assert "imported BFCL live_multiple" in run.stdout
    assert "live_multiple_964-207-0" in run.stdout  # skipped, with its reason
    responses = _write_lines(tmp_path / "answers.jsonl", bfcl.answer_lines(load_suite(out)))
    args = ["score", str(out), "-r", str(responses), "-m", "m", "--release", "r", "--json"]
    scored = subprocess.run(
        [str(cli), *args, "--db", str(tmp_path / "db.sqlite")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert scored.returncode == 0, scored.stderr
    figures = json.loads(scored.stdout)["scores"]["figures"]
    # The two cases no answer passes count as wrong, as in BFCL: its accuracy is 6/8.
    assert figures["right_arguments"]["successes"] == len(load_suite(out).cases) - 2
    assert figures["right_arguments"]["n"] == len(load_suite(out).cases)
    bad = subprocess.run(
        [str(cli), "import", "bfcl", str(DATA), "--category", "nope", "--out", str(tmp_path / "x")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert bad.returncode == 2 and "unknown category" in bad.stderr


def test_import_never_overwrites_a_hand_written_suite(tmp_path: Path) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "tools.json").write_text("[]")  # no suite.json: still somebody's suite
    (mine / "cases.jsonl").write_text("{}\n")
    (mine / "notes.md").write_text("mine")
    with pytest.raises(InputError, match=r"not imported from BFCL.*--force"):
        import_category(DATA, "parallel", mine)
    assert (mine / "tools.json").read_text() == "[]"
    assert (mine / "cases.jsonl").read_text() == "{}\n"
    assert not (mine / "suite.json").exists()
    forced = import_category(DATA, "parallel", mine, force=True)
    assert load_suite(forced.out).name == "bfcl-parallel"
    assert (mine / "notes.md").read_text() == "mine"  # other files are left alone
    again = import_category(DATA, "simple_python", mine)  # a BFCL import: overwritten
    assert load_suite(again.out).name == "bfcl-simple_python"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine"]  # no temporary left


def test_a_failed_import_leaves_nothing_half_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def fails(path: Path) -> None:
        assert (Path(path) / "tools.json").exists()  # written in full, somewhere else
        raise InputError(path, "the written suite does not load")

    monkeypatch.setattr(bfcl.writing, "load_suite", fails)
    out = tmp_path / "new"
    with pytest.raises(InputError, match="does not load"):
        import_category(DATA, "parallel", out)
    assert sorted(p.name for p in tmp_path.iterdir()) == []
    monkeypatch.undo()
    first = import_category(DATA, "parallel", out)
    before = {p.name: p.read_bytes() for p in first.out.iterdir()}
    monkeypatch.setattr(bfcl.writing, "load_suite", fails)
    with pytest.raises(InputError):
        import_category(DATA, "simple_python", out)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new"]


@pytest.mark.slow
def test_cli_import_force(tmp_path: Path) -> None:
    cli = Path(sys.executable).parent / "callgate"
    out = tmp_path / "suite"
    out.mkdir()
    (out / "cases.jsonl").write_text("{}\n")
    args = [str(cli), "import", "bfcl", str(DATA), "--category", "parallel", "--out", str(out)]
    refused = subprocess.run(args, capture_output=True, text=True, check=False)
    assert refused.returncode == 2 and "--force" in refused.stderr
    forced = subprocess.run([*args, "--force"], capture_output=True, text=True, check=False)
    assert forced.returncode == 0, forced.stderr
    assert load_suite(out).name == "bfcl-parallel"


def test_bfcl_data_that_is_not_utf8_names_the_file(tmp_path: Path) -> None:
    data = tmp_path / "data"
    (data / "possible_answer").mkdir(parents=True)
    (data / "BFCL_v4_irrelevance.json").write_bytes(b'{"id": "irrelevance_0"}\n{"id": "\xff"}\n')
    with pytest.raises(InputError) as info:
        read_category(data, "irrelevance")
    assert info.value.path.endswith("BFCL_v4_irrelevance.json") and info.value.line == 2
