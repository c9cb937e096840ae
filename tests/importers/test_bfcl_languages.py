"""simple_java and simple_javascript: BFCL's Java and JavaScript docs sent as BFCL sends them,
and the strings a model sends for them read with BFCL's own type converters (docs/bfcl.md).

Verdicts are compared with BFCL's own checker and converters (tests/fixtures/bfcl/checker,
verbatim copies), as in tests/importers/test_bfcl.py, which also runs these categories through every
general test (import, possible answers, perturbations).
"""

from __future__ import annotations

import json
import random
import re
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from bfcl_fixture import DATA, bfcl_valid, callgate_verdict, load_harness

from callgate.checks import bfcl_types
from callgate.errors import InputError
from callgate.importers import bfcl
from callgate.importers.bfcl import import_category, read_category
from callgate.suites.suite import load_suite

harness = load_harness()


@pytest.fixture(scope="module")
def suites(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("suites")
    return {c: import_category(DATA, c, root / c).out for c in ("simple_java", "simple_javascript")}


def test_java_and_javascript_docs_are_sent_as_bfcl_sends_them() -> None:
    """Every parameter becomes a string, its BFCL type said in BFCL's words
    (bfcl_eval/utils.py:630-687); the types themselves are kept for the checks."""
    function = bfcl.BfclFunction.model_validate({
        "name": "Repo.find", "description": "Finds.",
        "parameters": {"type": "dict", "required": ["ids"], "properties": {
            "ids": {"type": "ArrayList", "description": "Ids.", "items": {"type": "long"}},
            "who": {"type": "any", "description": "Who."},
            "deep": {"type": "boolean", "description": "Deep."},
            "opts": {"type": "dict", "description": "Options.",
                     "properties": {"k": {"type": "String"}}},
        }},
    })
    java = bfcl.convert_function(function, "t", "java")["function"]
    assert java["name"] == "Repo_find"
    assert java["description"] == "Finds. Note that the provided function is in Java 8 SDK syntax."
    props = java["parameters"]["properties"]
    assert props["ids"] == {"type": "string", "description": "Ids. This is Java ArrayList type "
                            "parameter in string representation. The list elements are of type "
                            "long; they are not in string representation."}
    assert props["who"]["description"] == ("Who. This parameter can be of any type of Java "
                                           "object in string representation.")
    assert props["opts"]["properties"]["k"] == {"type": "string"}  # Java keeps a dict's schema
    assert bfcl.source_types(function, "java")["ids"] == {
        "language": "java", "type": "ArrayList", "items": "long"}
    js = bfcl.convert_function(function, "t", "javascript")["function"]
    assert js["description"].endswith(" Note that the provided function is in JavaScript syntax.")
    opts = js["parameters"]["properties"]["opts"]
    assert opts == {"type": "string", "description": "Options. This is JavaScript dict type "
                    "parameter in string representation. The dictionary entries have the "
                    'following schema; they are not in string representation. {"k": {"type": '
                    '"String"}}'}
    assert bfcl.source_types(function, "python") == {}


JAVA_RULES = [
    # simple_java_25: id is a Java long, sort an integer; answers 42 and 5.
    ("simple_java_25", {"id": "42L", "sort": "5"}, True),
    ("simple_java_25", {"id": "42l", "sort": "5"}, True),
    ("simple_java_25", {"id": "42", "sort": "5"}, False),  # a long needs its L
    ("simple_java_25", {"id": "42L", "sort": "5L"}, False),
    ("simple_java_25", {"id": 42, "sort": 5}, False),  # not strings
    ("simple_java_25", {"id": "42L", "sort": " 5"}, False),
    # simple_java_22: ids is an ArrayList of long, [101, 202, 303].
    ("simple_java_22", {"ids": "new ArrayList<>(Arrays.asList(101L, 202L, 303L))",
                        "newStatus": "2"}, True),
    ("simple_java_22", {"ids": "new ArrayList<Long>() {{ add(101L); add(202L); add(303L); }}",
                        "newStatus": "2"}, True),
    ("simple_java_22", {"ids": "new ArrayList<>(Arrays.asList(101, 202, 303))",
                        "newStatus": "2"}, False),
    ("simple_java_22", {"ids": "[101, 202, 303]", "newStatus": "2"}, False),
    # simple_java_27: nums is an Array of integer.
    ("simple_java_27", {"nums": "new int[]{2, 7, 11, 15}", "target": "9"}, True),
    ("simple_java_27", {"nums": "new int[] {2,7,11,15}", "target": "9"}, True),
    ("simple_java_27", {"nums": "{2, 7, 11, 15}", "target": "9"}, False),
    ("simple_java_27", {"nums": "new int[]{2, 7, 11}", "target": "9"}, False),
    # simple_java_1: a HashMap, and a boolean.
    ("simple_java_1", {"object": "Customers", "useShortName": "true", "params":
                       'new HashMap<String, Object>() {{ put("limit", 50); '
                       'put("schemaFilter", "public"); }}'}, True),
    ("simple_java_1", {"object": "Customers", "useShortName": "True", "params":
                       'new HashMap<String, Object>() {{ put("limit", 50); '
                       'put("schemaFilter", "public"); }}'}, False),
    ("simple_java_1", {"object": "Customers", "useShortName": "true", "params":
                       'new HashMap<String, Object>() {{ put("limit", "50"); '
                       'put("schemaFilter", "public"); }}'}, False),
    # simple_javascript_3: coordinates is an array of float, [60, 30].
    ("simple_javascript_3", {"action": "submit", "formId": "loginForm",
                             "coordinates": "[60, 30]"}, True),
    ("simple_javascript_3", {"action": "'submit'", "formId": '"loginForm"',
                             "coordinates": "new Array(60.0, 30.0)"}, True),
    ("simple_javascript_3", {"action": "submit", "formId": "loginForm",
                             "coordinates": "60, 30"}, False),
    ("simple_javascript_3", {"action": "submit", "formId": "loginForm",
                             "coordinates": [60, 30]}, False),
    # simple_javascript_0: a String and a Boolean.
    ("simple_javascript_0", {"inputField": "userInputField", "isComplete": "true"}, True),
    ("simple_javascript_0", {"inputField": "userInputField", "isComplete": True}, False),
    ("simple_javascript_0", {"inputField": "userInputField", "isComplete": "yes"}, False),
    # simple_javascript_14: a dict, {nm: BarChart, mn: chartModule}.
    ("simple_javascript_14", {"chart": "{nm: 'BarChart', mn: 'chartModule'}",
                              "library": "visualizationLibrary", "configObject": "config"}, True),
    ("simple_javascript_14", {"chart": '{"nm": "BarChart", "mn": "chartModule"}',
                              "library": "visualizationLibrary", "configObject": "config"}, True),
    ("simple_javascript_14", {"chart": "{nm: 'BarChart'}", "library": "visualizationLibrary",
                              "configObject": "config"}, False),
]


@pytest.mark.parametrize(("case_id", "args", "right"), JAVA_RULES)
def test_java_and_javascript_values_are_read_as_bfcl_reads_them(
    suites: dict[str, Path], case_id: str, args: dict[str, Any], right: bool
) -> None:
    category = case_id.rsplit("_", 1)[0]
    entry = next(e for e in read_category(DATA, category).entries if e.id == case_id)
    calls = [(bfcl.openai_name(entry.function[0].name), args)]
    assert callgate_verdict(suites[category], case_id, calls).right_arguments is right
    assert bfcl_valid(category, case_id, calls) is right


_ATOMS = ["1", "-2", "3.5", "1e3", "2f", "3F", "4L", "5n", "true", "false", '"a"', "'b'", "x",
          " ", ",", ", ", "[", "]", "{", "}", "(", ")", ":", "\n", "new ArrayList<>(Arrays.asList(",
          "new ArrayList<String>() {{ ", "add(", "); ", "}}", "new int[]{", "new String[] {",
          'new HashMap<String, String>() {{ put("k", ', "new HashMap<>()", "new Array(", "[[",
          "], [", "]]"]
_NESTED = [None, "String", "integer", "long", "char", "any", "float", "double", "boolean",
           "Bigint", "Boolean", "array", "dict", "Set"]


def _outcome(convert: Any, *args: Any) -> str:
    try:
        return repr(convert(*args))
    except Exception as exc:  # BFCL raises for some types: so must the port
        return type(exc).__name__


def test_the_converters_equal_bfcls(capsys: pytest.CaptureFixture[str]) -> None:
    """callgate's port of BFCL's Java and JavaScript converters returns what BFCL's own returns
    (tests/fixtures/bfcl/checker, verbatim), on texts made of the pieces those converters look
    for, for every declared type and items' type."""
    theirs = harness.load_converters()
    rng = random.Random(26)
    compared = set()
    for language, types in (("java", bfcl_types.JAVA_TYPES), ("javascript", bfcl_types.JS_TYPES)):
        for _ in range(6000):
            text = "".join(rng.choice(_ATOMS) for _ in range(rng.randint(0, 7)))
            kind = rng.choice([*types, "unknown"])
            nested = rng.choice(_NESTED)
            mine = _outcome(bfcl_types.CONVERTERS[language], text, kind, nested)
            assert mine == _outcome(theirs[language], text, kind, nested), (language, text, kind)
            compared.add(mine[:1])
    capsys.readouterr()  # BFCL's dictionary parser prints its errors
    assert {"[", "{", "'", "V"} <= compared  # lists, dicts, texts and raised errors all occur


def test_a_javascript_2d_array_is_matched_in_linear_time() -> None:
    """BFCL's 2D-array pattern backtracks exponentially when it fails (30 rows take minutes on
    Python's re); callgate finds the same match end without backtracking."""
    pattern = re.compile(bfcl_types.JS_ARRAY_2D)
    rng = random.Random(7)
    pieces = ["[", "]", ",", " ", "\n", "1", ")", "new Array(", "[[", "],", "\u2003"]
    matched = 0
    for _ in range(20000):
        text = rng.choice(["", "[", "[[", "new Array( ["]) + "".join(
            rng.choice(pieces) for _ in range(rng.randint(0, 10)))
        found = pattern.match(text)
        assert bfcl_types.js_2d_end(text) == (found.end() if found else None), text
        matched += found is not None
    assert matched > 300
    hostile = "[[" + "],[" * 5000  # no closing bracket
    start = time.perf_counter()
    # Not a 2D array: the 1D pattern then reads "[[]", one item "[", as BFCL does in the end.
    assert bfcl_types.js_type_converter(hostile, "array", "integer") == ["["]
    assert time.perf_counter() - start < 1.0


def test_source_types_change_the_fingerprint(suites: dict[str, Path], tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(suites["simple_java"], copy)
    meta = json.loads((copy / "suite.json").read_text())
    tool, params = next(iter(meta["match"]["source_types"].items()))
    param = next(iter(params))
    meta["match"]["source_types"][tool][param]["type"] = "String"
    (copy / "suite.json").write_text(json.dumps(meta))
    assert load_suite(copy).fingerprint != load_suite(suites["simple_java"]).fingerprint


def test_a_type_bfcl_cannot_convert_never_matches() -> None:
    """BFCL's checker raises on these (KeyError, NotImplementedError): no value is accepted."""
    from callgate.checks.bfcl_rules import param_matches

    assert param_matches({"type": "string"}, "5L", [5], {"language": "java", "type": "long"})
    for source in ({"language": "java", "type": "Set"},
                   {"language": "java", "type": "Queue"},
                   {"language": "java", "type": "Array", "items": "int"},
                   {"language": "java", "type": "short_int"},
                   {"language": "kotlin", "type": "long"}):
        assert not param_matches({"type": "string"}, "5L", [5, "5L"], source), source


def test_a_java_doc_bfcl_cannot_pre_process_is_refused(tmp_path: Path) -> None:
    """BFCL's pre-processing needs a description on every parameter and items on every array;
    the import names the entry and the function instead of failing later."""
    data = tmp_path / "data"
    (data / "possible_answer").mkdir(parents=True)
    entry = {"id": "simple_java_0", "question": [[{"role": "user", "content": "x"}]],
             "function": [{"name": "A.b", "description": "B.", "parameters": {
                 "type": "dict", "properties": {"xs": {"type": "Array", "description": "Xs."}},
                 "required": ["xs"]}}]}
    (data / "BFCL_v4_simple_java.json").write_text(json.dumps(entry) + "\n")
    answer = {"id": "simple_java_0", "ground_truth": [{"A.b": {"xs": [[1]]}}]}
    (data / "possible_answer" / "BFCL_v4_simple_java.json").write_text(json.dumps(answer) + "\n")
    with pytest.raises(InputError, match=r"simple_java_0: A\.b: unsupported parameter schema"):
        import_category(data, "simple_java", tmp_path / "out")
    assert not (tmp_path / "out").exists()
