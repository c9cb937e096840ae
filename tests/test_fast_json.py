"""reading.loads (orjson, falling back to json) reads exactly what json.loads reads (issue 13)."""

import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from callgate.reading import JSONLimitError, loads


def loads_fast(text: str) -> Any:
    # constants=True: NaN and Infinity read as json reads them (the limits are tested elsewhere)
    return loads(text, constants=True)

JSON_TEXT = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=3), inner,
                                                                max_size=4),
    max_leaves=10,
).map(json.dumps)
NEAR_JSON = st.text(alphabet='{}[]":,0123456789.eE+-truefalsnNaIfiy \\u\n\t', max_size=30)


def outcome(text: str, read: Any) -> Any:
    try:
        value = read(text)
    except json.JSONDecodeError as exc:
        return ("error", exc.msg, exc.pos)
    return ("value", json.dumps(value), type(value).__name__)  # NaN-safe, type-exact compare


@pytest.mark.slow
@settings(max_examples=500)
@given(JSON_TEXT | NEAR_JSON)
def test_same_values_and_messages_as_json(text: str) -> None:
    assert outcome(text, loads_fast) == outcome(text, json.loads)


@pytest.mark.parametrize(
    "text",
    ['{"a": NaN}', '{"a": Infinity}', '{"a": 1e999}', '{"a": 123456789012345678901234567890}',
     '{"a": "\\ud83d\\ude00"}', '{"a": 1, "a": 2}', '{"a": ', "[1,]", '{"a": 1} x', ""],
)
def test_the_corners_orjson_refuses_are_read_as_json_reads_them(text: str) -> None:
    assert outcome(text, loads_fast) == outcome(text, json.loads)


def test_an_escape_of_half_a_surrogate_pair_is_refused_naming_the_field() -> None:
    """json reads "\\ud800" as a lone surrogate, which is no text: SQLite cannot store it and
    printing it fails. A pair (an emoji) is read as its character."""
    with pytest.raises(JSONLimitError, match="not Unicode text") as found:
        loads('{"a": [1, "x\\udc00"]}')
    assert found.value.field == "a[1]"


def test_infinity_is_still_read() -> None:
    assert math.isinf(loads_fast('{"a": Infinity}')["a"])
