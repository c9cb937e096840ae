"""BFCL's Java and JavaScript type converters, ported: how its checker turns the string a model
sends for a Java or JavaScript parameter into the value it compares (`bfcl_rules` applies them
to the tools a suite's `match.source_types` lists).

A faithful port of bfcl-eval 2026.3.23 (Apache-2.0),
bfcl_eval/eval_checker/ast_eval/type_convertor/java_type_converter.py and js_type_converter.py,
with the tables of bfcl_eval/constants/type_mappings.py. The regular expressions and the order of
the tests are BFCL's own, quirks included (a `char` is never unquoted, the items of a Java
`String` array keep their quotes, a JavaScript array that fails to parse stays a string).
Where BFCL raises, so does the port; the caller judges such a value not to match.
docs/bfcl.md states every mapping decision.
"""

from __future__ import annotations

import re
from typing import Any

# type_mappings.py:60-89 (JAVA_TYPE_CONVERSION, JS_TYPE_CONVERSION)
JAVA_TYPES: dict[str, type] = {
    "byte": int, "short": int, "integer": int, "float": float, "double": float, "long": int,
    "boolean": bool, "char": str, "Array": list, "ArrayList": list, "Set": set,
    "HashMap": dict, "Hashtable": dict, "Queue": list, "Stack": list, "String": str,
    "any": str,
}
JS_TYPES: dict[str, type] = {
    "String": str, "integer": int, "float": float, "Bigint": int, "Boolean": bool,
    "dict": dict, "array": list, "any": str,
}
TYPES: dict[str, dict[str, type]] = {"java": JAVA_TYPES, "javascript": JS_TYPES}
# The types the converters always read as text, as a parameter's own type or its items' type
# (the items of a list that does not parse stay text too).
READ_AS_TEXT = {"java": ("any", "String", "char"), "javascript": ("any", "String")}

_INTEGER = re.compile(r"^-?\d+$")
_JAVA_FLOAT = re.compile(r"^-?\d+(\.\d+)?([eE][+-]?\d+)?[fF]$")
_JAVA_DOUBLE = re.compile(r"^-?\d+(\.\d+)?([eE][+-]?\d+)?$")
_JAVA_LONG = re.compile(r"^-?\d+[lL]$")
_JAVA_CHAR = re.compile(r"^\'.$\'")  # sic: matches nothing, so a char is kept as given
_AS_LIST = re.compile(r"new\s+ArrayList<\w*>\(Arrays\.asList\((.+?)\)\)")
_ADDS = re.compile(r"new\s+ArrayList<\w*>\(\)\s*\{\{\s*(.+?)\s*\}\}", re.DOTALL)
_ADD = re.compile(r"add\((.+?)\)")
_EMPTY_LIST = re.compile(r"new\s+ArrayList<\w*>\(\)")
_ARRAY = re.compile(r"new\s+\w+\[\]\s*\{(.*?)\}")
_HASHMAP = re.compile(r"new\s+HashMap<.*?>\s*\(\)\s*\{\s*\{?\s*(.*?)\s*\}?\s*\}", re.DOTALL)
_PUT = re.compile(r"put\(\"(.*?)\",\s*(.*?)\)")
_EMPTY_HASHMAP = re.compile(r"new\s+HashMap<.*?>\s*\(\)")

_JS_FLOAT = re.compile(r"^-?\d+(\.\d+)?$")
_JS_BIGINT = re.compile(r"^-?\d+n$")
# BFCL's pattern for a 2D array (js_type_converter.py:45) is matched by js_2d_end: on Python's
# backtracking engine it takes time exponential in the number of "]" when it fails.
JS_ARRAY_2D = (r"\[\s*\[.*?\]\s*(,\s*\[.*?\]\s*)*\]"
               r"|\bnew\s+Array\(\s*\[.*?\]\s*(,\s*\[.*?\]\s*)*\)")
_JS_NEW_ARRAY = re.compile(r"\bnew\s+Array\(")
_JS_ARRAY = re.compile(r"\[(.*?)\]|\bnew\s+Array\((.*?)\)")
_JS_INNER = re.compile(r"\[(.*?)\]")
_JS_DICT = re.compile(r"\{(.*?)\}")
_JS_PAIRS = re.compile(r"([^:]+):\s*(.*?)(?:,\s*(?=[^,]+:)|$)")


# --------------------------------------------------------------------------- Java


def java_type_converter(value: str, expected_type: str, nested_type: str | None = None) -> Any:
    """java_type_converter.py:6-53."""
    if expected_type not in JAVA_TYPES:
        raise ValueError(f"Unsupported type: {expected_type}")
    if expected_type in ("byte", "short", "integer"):
        return int(value) if _INTEGER.match(value) else str(value)
    if expected_type == "float":
        return float(re.sub(r"[fF]$", "", value)) if _JAVA_FLOAT.match(value) else str(value)
    if expected_type == "double":
        return float(value) if _JAVA_DOUBLE.match(value) else str(value)
    if expected_type == "long":
        return int(re.sub(r"[lL]$", "", value)) if _JAVA_LONG.match(value) else str(value)
    if expected_type == "boolean":
        return value == "true" if value in ("true", "false") else str(value)
    if expected_type == "char":
        return value if _JAVA_CHAR.match(value) else str(value)
    if expected_type == "ArrayList":
        return _parse_arraylist(value, nested_type)
    if expected_type == "Array":
        return _parse_array(value, nested_type)
    if expected_type == "HashMap":
        return _parse_hashmap(value)
    if expected_type in ("String", "any"):
        return str(value)
    raise NotImplementedError(f"{expected_type} conversion is not implemented")


def _java_item(text: str, nested_type: str | None) -> Any:
    if nested_type in ("char", "String"):
        return text[1:-1]  # the quotes removed
    return java_type_converter(text, nested_type) if nested_type else _java_value(text)


def _parse_arraylist(input_str: str, nested_type: str | None) -> Any:
    """java_type_converter.py:73-119."""
    as_list = _AS_LIST.search(input_str)
    if as_list:
        return [_java_item(item.strip(), nested_type) for item in as_list.group(1).split(",")]
    adds = _ADDS.search(input_str)
    if adds:
        return [_java_item(item.strip(), nested_type) for item in _ADD.findall(adds.group(1))]
    if _EMPTY_LIST.search(input_str):
        return []
    return input_str


def _parse_array(input_str: str, nested_type: str | None) -> Any:
    """java_type_converter.py:122-142: the items converted by the nested type, quotes kept."""
    found = _ARRAY.search(input_str)
    if not found:
        return input_str
    items = [x.strip() for x in found.group(1).split(",") if x.strip()]
    if nested_type:
        return [java_type_converter(x, nested_type) for x in items]
    return [_java_value(x) for x in items]


def _parse_hashmap(input_str: str) -> Any:
    """java_type_converter.py:145-164."""
    found = _HASHMAP.search(input_str)
    if found:
        puts = found.group(1)
        elements: dict[str, Any] = {}
        if puts.strip():
            for key, value in _PUT.findall(puts):
                elements[key] = _java_value(value.strip())
        return elements
    if _EMPTY_HASHMAP.search(input_str):
        return {}
    return input_str


def _java_value(value_str: str) -> Any:
    """java_type_converter.py:168-192 (parse_java_value): a value without a declared type."""
    if value_str == "true":
        return True
    if value_str == "false":
        return False
    if value_str.startswith('"') and value_str.endswith('"'):
        return value_str[1:-1]
    if _JAVA_LONG.match(value_str):
        return int(value_str[:-1])
    if _JAVA_FLOAT.match(value_str):
        return float(re.sub(r"[fF]$", "", value_str))
    return _number_or_text(value_str)


def _number_or_text(text: str) -> Any:
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            return text


# --------------------------------------------------------------------------- JavaScript


def js_type_converter(value: str, expected_type: str, nested_type: str | None = None) -> Any:
    """js_type_converter.py:5-38."""
    if expected_type not in JS_TYPES:
        raise ValueError(f"Unsupported type: {expected_type}")
    if expected_type == "String":
        quoted = (value.startswith('"') and value.endswith('"')) or (
            value.startswith("'") and value.endswith("'"))
        return value[1:-1] if quoted else str(value)
    if expected_type == "integer":
        return int(value) if _INTEGER.match(value) else str(value)
    if expected_type == "float":
        return float(value) if _JS_FLOAT.match(value) else str(value)
    if expected_type == "Bigint":
        return int(value[:-1]) if _JS_BIGINT.match(value) else str(value)
    if expected_type == "Boolean":
        return value == "true" if value in ("true", "false") else str(value)
    if expected_type == "dict":
        return _js_dict(value.strip())
    if expected_type == "array":
        return _js_array(value.strip(), nested_type)
    return str(value)  # "any"


def _js_array(code: str, nested_type: str | None) -> Any:
    """js_type_converter.py:41-101 (parse_js_collection for "array"): any failure keeps the
    text (BFCL's bare except)."""
    try:
        end = js_2d_end(code)
        if end is not None:
            rows = []
            for index, row in enumerate(_JS_INNER.findall(code[:end])):
                row = row.strip()
                if index == 0 and row.startswith("["):
                    row = row[1:]
                rows.append([_js_value(e.strip()) for e in row.split(",")])
            return rows
        array = _JS_ARRAY.match(code)
        if not array:
            return code
        inner = array.group(1) if array.group(1) is not None else array.group(2)
        elements = inner.strip().split(",") if inner is not None and inner.strip() else []
        if nested_type:
            return [_js_item(e.strip(), nested_type) for e in elements]
        return [_js_value(e.strip()) for e in elements]
    except Exception:
        return code


def js_2d_end(code: str) -> int | None:
    """Where `re.match(JS_ARRAY_2D, code)` ends, or None when it does not match, in linear time.

    Both alternatives read `[`, then rows `[...]` separated by commas, then a closing `]` (or
    `)` after `new Array(`). Whitespace between the pieces is taken greedily and can never be
    given back usefully, so the only choices the backtracking engine makes are where each lazy
    `.*?` row ends: at the first `]` (on the same line) from which the rest matches. Worked out
    from the end of the text backwards, each position is decided once.
    """
    opening = _JS_NEW_ARRAY.match(code)
    if code.startswith("["):
        close, start = "]", 1
    elif opening is not None:
        close, start = ")", opening.end()
    else:
        return None
    n = len(code)
    skip = [n] * (n + 1)  # skip[i]: the first position at or after i that is not whitespace
    for i in range(n - 1, -1, -1):
        skip[i] = skip[i + 1] if code[i].isspace() else i
    # end[j]: where the match ends when a row closed just before j; row[i]: the first "]" at or
    # after i, on i's line, with which a row that began before i closes and the rest matches.
    end: list[int | None] = [None] * (n + 2)
    row: list[int | None] = [None] * (n + 2)
    for j in range(n, -1, -1):
        k = skip[j]
        if k < n and code[k] == ",":
            m = skip[k + 1]
            if m < n and code[m] == "[" and row[m + 1] is not None:
                end[j] = end[row[m + 1] + 1]  # type: ignore[operator]
        if end[j] is None and k < n and code[k] == close:
            end[j] = k + 1
        if j < n and code[j] != "\n":
            row[j] = j if code[j] == "]" and end[j + 1] is not None else row[j + 1]
    first = skip[start]
    if first < n and code[first] == "[" and row[first + 1] is not None:
        return end[row[first + 1] + 1]  # type: ignore[operator]
    return None


def _js_item(text: str, nested_type: str) -> Any:
    """js_type_converter.py:86-92: a quoted item gets "String" as its own nested type (which
    only an item converted as an array reads)."""
    quoted = text.startswith("'") or text.startswith('"')
    return js_type_converter(text, nested_type, "String" if quoted else None)


def _js_dict(code: str) -> Any:
    """js_type_converter.py:103-131 (parse_js_collection for "dict")."""
    if code == "{}":
        return {}
    found = _JS_DICT.match(code)
    if not found:
        return code
    try:
        dictionary: dict[str, Any] = {}
        for key, value in _JS_PAIRS.findall(found.group(1)):
            key = key.strip().strip("'\"")
            value = value.strip()
            if value.startswith("[") and value.endswith("]"):
                dictionary[key] = _js_array(value.strip(), None)
            elif value.startswith("{") and value.endswith("}"):
                dictionary[key] = _js_dict(value.strip())
            else:
                dictionary[key] = _js_value(value.strip("'\""))
        return dictionary
    except Exception:
        return code


def _js_value(value_str: str) -> Any:
    """js_type_converter.py:136-153 (parse_js_value)."""
    value_str = value_str.strip()
    if value_str == "true":
        return True
    if value_str == "false":
        return False
    if (value_str.startswith('"') and value_str.endswith('"')) or (
        value_str.startswith("'") and value_str.endswith("'")
    ):
        return value_str[1:-1]
    return _number_or_text(value_str)


CONVERTERS = {"java": java_type_converter, "javascript": js_type_converter}
