"""The tool filter's search (web_rows.ToolNeedles) names exactly the tools whose name,
as JSON, is a substring of the line: the rule written plainly below."""

from __future__ import annotations

import json
import random

from callgate.store.web_rows import ToolNeedles

# Names that meet at quotes, prefix one another, and hold a quote, a backslash or non-ASCII.
TOOLS = ["a", "ab", "b", "get", "get_all", 'say"hi', "back\\slash", "café", "a b"]
PIECES = ['"', '"', "\\", "\\\"", " ", ":", ",", "a", "b", "ab", "get", "_all", "get_all",
          'say\\"hi', "back\\\\slash", "caf\\u00e9", "café", "a b", "{", "}"]


def plainly(tools: list[str], body: str) -> set[str]:
    return {tool for tool in tools if json.dumps(tool) in body}


def bodies(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choice(PIECES) for _ in range(rng.randint(0, 30))) for _ in range(count)]


def test_a_few_tools_are_found_as_a_substring_search_finds_them() -> None:
    needles = ToolNeedles(TOOLS)
    for body in [*bodies(5000, 1), '"a"b"', '"ab"', '"get_all"', '"a""b"']:
        found = needles.named(body)
        assert len(found) == len(set(found)), body
        assert set(found) == plainly(TOOLS, body), body


def test_many_tools_take_the_pieces_path_with_the_same_answers() -> None:
    many = TOOLS + [f"tool_{index}" for index in range(20)]
    needles = ToolNeedles(many)
    for body in [*bodies(3000, 2), '"tool_3" "tool_13"', '"a"b"']:
        assert set(needles.named(body)) == plainly(many, body), body


def test_no_tools_or_no_line_name_nothing() -> None:
    assert ToolNeedles([]).named('"a"') == []
    assert ToolNeedles(TOOLS).named(None) == []
    assert ToolNeedles(TOOLS).named("") == []
