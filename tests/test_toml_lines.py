"""The line of a field in a TOML file (`toml_lines.line_of_toml_field`), which tomllib does not
give: keys, tables, arrays of tables, dotted and quoted keys, inline tables, multi-line strings
and arrays; and the error of a checked TOML file carrying it (`reading.reading_toml`)."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest

from callgate.errors import InputError, pydantic_field
from callgate.reading import reading_toml
from callgate.toml_lines import line_of_toml_field

DOC = """\
# a comment = 1
title = "x"

[[candidates]]
name = "a"
model = "m"

[[candidates]]
name = "b"  # a comment
extra = { temperature = 0, "x.y" = 1, nested = { deep = 2 } }
notes = \"\"\"
model = "inside the string"
[not_a_table]
\"\"\"
"quoted key" = 1
'literal.key' = 2
"esc\\u0041ped" = 3
a.b.c = 4
list = [
  1,  # a comment ]
  { k = 2 },
  "s]",
]
literal = '''
[[candidates]]
name = "not a candidate"
''''
after = true

[ judge . sub ]
q = 1

[judge]
model = 'j'

[[candidates.tools]]
name = "t1"
[[candidates.tools]]
name = "t2"
[candidates.tools.schema]
type = "object"
"""

CASES = [
    ("title", 2),
    ("candidates[0]", 4),
    ("candidates[0].model", 6),
    ("candidates[1].name", 9),
    ("candidates[1].extra", 10),  # an inline table: the line of its key
    ("candidates[1].extra.temperature", 10),
    ("candidates[1].extra.x.y", 10),  # a quoted key holding a dot
    ("candidates[1].extra.nested.deep", 10),
    ("candidates[1].notes", 11),
    ("candidates[1].quoted key", 15),
    ("candidates[1].literal.key", 16),
    ("candidates[1].escAped", 17),
    ("candidates[1].a.b.c", 18),  # a dotted key
    ("candidates[1].list", 19),
    ("candidates[1].list[0]", 20),  # elements of a multi-line array
    ("candidates[1].list[1].k", 21),
    ("candidates[1].list[2]", 22),
    ("candidates[1].literal", 24),
    ("candidates[1].after", 28),  # after a multi-line string that ends in extra quotes
    ("judge.sub.q", 31),  # spaces in a header
    ("judge.model", 34),  # [judge] after [judge.sub]
    ("candidates[1].tools[0].name", 37),  # an array of tables in the latest element
    ("candidates[1].tools[1].name", 39),
    ("candidates[1].tools[1].schema.type", 41),  # a table in the latest element
]


@pytest.mark.parametrize(("field", "line"), CASES)
def test_the_line_a_field_is_defined_on(field: str, line: int) -> None:
    assert line_of_toml_field(DOC, field) == line


@pytest.mark.parametrize(
    ("field", "line"),
    [
        ("candidates[0].temperature", 4),  # a required field left out: its table's header
        ("candidates[1].tools[1].schema.properties", 40),
        ("judge.sub.missing", 30),
        ("judge.missing", 33),
        ("candidates[1].extra.top_p", 10),  # in an inline table: the line of its key
        ("candidates[1].a.b.missing", 18),  # a table a dotted key made
        ("candidates[1].list[1].missing", 21),
        ("candidates[1].list[7]", 19),
        ("candidates[5].name", 4),  # no such element: where the array starts
        ("missing", None),  # a top-level field has no table to name
        ("(root)", None),
    ],
)
def test_a_missing_field_names_the_deepest_part_that_is_there(
    field: str, line: int | None
) -> None:
    assert line_of_toml_field(DOC, field) == line


def test_a_key_inside_a_multi_line_string_is_not_a_key() -> None:
    text = 'a = """\nb = 1\n[t]\nc = 2\n"""\nb = 3\n'
    assert tomllib.loads(text) == {"a": "b = 1\n[t]\nc = 2\n", "b": 3}
    assert line_of_toml_field(text, "b") == 6
    assert line_of_toml_field(text, "t.c") is None
    escaped = 'a = """\\\n  \\"""\nb = 1\n"""\nb = 2\n'  # an escaped quote, a line-ending \
    assert tomllib.loads(escaped)["b"] == 2
    assert line_of_toml_field(escaped, "b") == 5
    literal = "a = '''\nb = 1\n'''\nb = 2\n"
    assert line_of_toml_field(literal, "b") == 4


def test_windows_line_ends_and_a_missing_final_newline() -> None:
    text = "[t]\r\nx = 1\r\ny = 2"
    assert tomllib.loads(text) == {"t": {"x": 1, "y": 2}}
    assert line_of_toml_field(text, "t.y") == 3
    assert line_of_toml_field(text, "t.z") == 1


def test_every_value_of_the_document_is_found_on_a_line_naming_its_key() -> None:
    """Against tomllib's reading: each scalar's path leads to a line holding its last key (or,
    for an array element, the element itself)."""
    lines = DOC.splitlines()
    for path, key in _leaves(tomllib.loads(DOC), ()):
        field = pydantic_field(path)
        line = line_of_toml_field(DOC, field)
        assert line is not None, field
        assert key in lines[line - 1] or key.replace("A", "\\u0041") in lines[line - 1], field


def _leaves(value: Any, path: tuple[Any, ...]) -> list[tuple[tuple[Any, ...], str]]:
    if isinstance(value, dict):
        return [leaf for key, item in value.items() for leaf in _leaves(item, (*path, key))]
    if isinstance(value, list) and any(isinstance(item, dict) for item in value):
        return [leaf for index, item in enumerate(value) for leaf in _leaves(item, (*path, index))]
    return [(path, str(path[-1]) if isinstance(path[-1], str) else str(value))]


def test_text_it_cannot_follow_gives_no_line_and_never_a_crash() -> None:
    for end in range(len(DOC)):  # every cut of the document, most of them not TOML
        line = line_of_toml_field(DOC[:end], "candidates[1].tools[1].schema.type")
        assert line is None or 1 <= line <= DOC[:end].count("\n") + 1
    for text in ("a = ", "[a", "[[a", "a = [1, 2", 'a = "unclosed', "= 1\na = 2", "a = { b = 1",
                 "a = " + "[" * 10_000 + "]" * 10_000, '"\\q" = 1\na = 2'):
        assert line_of_toml_field(text, "a.b") is None, text


def test_a_checked_toml_file_names_the_line_of_the_field(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text("[t]\nx = 1\ny = 2\n")
    with pytest.raises(InputError) as info, reading_toml(path) as raw:
        assert raw == {"t": {"x": 1, "y": 2}}
        raise InputError(path, "bad", field="t.y")
    assert str(info.value) == f"{path}:3: t.y: bad"
    other = tmp_path / "other.toml"  # another file's error, or one with its line, is kept
    for error in (InputError(other, "bad", field="t.y"), InputError(path, "bad", line=9,
                                                                     field="t.y")):
        with pytest.raises(InputError) as info, reading_toml(path):
            raise error
        assert info.value.line == error.line
