"""Where a field of a TOML text is defined: tomllib reads values but gives no positions, so
errors about a field of callgate.toml or a judge spec find its line here (`line_of_toml_field`).
A small scanner, not a parser: tomllib has already read the text when it is asked."""

from __future__ import annotations

import re
import tomllib

MAX_DEPTH = 100  # arrays and inline tables nested deeper are not followed (reading.MAX_DEPTH)


def _line_of(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


# A TOML key part: bare, "basic" (its escapes read by tomllib) or 'literal'.
_TOML_KEY = re.compile(r"[A-Za-z0-9_-]+" r'|"(?:[^"\\\n]|\\.)*"' r"|'[^'\n]*'")
# A TOML string value, multi-line forms first; their closing quotes may be followed by up to
# two more quotes that belong to the content.
_TOML_STRING = re.compile(
    r"'''(?:[^']|'(?!''))*''''{0,2}" r'|"""(?:[^"\\]|\\.|"(?!""))*""""{0,2}'
    r'|"(?:[^"\\\n]|\\.)*"' r"|'[^'\n]*'",
    re.DOTALL,
)
# A number, boolean or date (a date may hold a space): up to what ends a value.
_TOML_SCALAR = re.compile(r"[^,\]}#\n]+")
_TOML_SPACES = re.compile(r"[ \t]*")
_TOML_BLANK = re.compile(r"(?:[ \t\r\n]|#[^\n]*)*")
_FIELD_CUT = re.compile(r"[.\[]")


def line_of_toml_field(text: str, field: str) -> int | None:
    """The line of a TOML text where `field` (as errors name it: `candidates[1].temperature`,
    `judge.model`) is defined: its key, its `[table]` or `[[array]]` header, its element of a
    multi-line array. For a field that is absent (a required one left out), the line of the
    deepest enclosing part that is there (its table's header, the key of an inline table);
    None when no part is, or when the text is not TOML this scanner follows."""
    try:
        where = _TomlScanner(text).positions()
    except (ValueError, IndexError):  # not TOML as the scanner reads it: no line, no crash
        return None
    cuts = [match.start() for match in _FIELD_CUT.finditer(field) if match.start()]
    for prefix in (field, *(field[:cut] for cut in reversed(cuts))):
        if prefix in where:
            return _line_of(text, where[prefix])
    return None


class _TomlScanner:
    """Where each key, table and array element of a TOML text starts, by the field path
    pydantic errors name it with (`a.b[0].c`). A line inside a multi-line string is never read
    as a key: every value is skipped whole."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.defined: dict[str, int] = {}  # path -> where its key, header or element starts
        self.implied: dict[str, int] = {}  # tables only named as part of a longer path
        self.tables: dict[str, int] = {}  # array-of-tables path -> elements so far

    def positions(self) -> dict[str, int]:
        table = ""
        while self._skip(_TOML_BLANK) < len(self.text):
            if self.text[self.pos] == "[":
                table = self._header()
            else:
                self._key_value(table, 0)
        return {**self.implied, **self.defined}

    def _skip(self, pattern: re.Pattern[str]) -> int:
        self.pos = pattern.match(self.text, self.pos).end()  # type: ignore[union-attr]
        return self.pos

    def _expect(self, token: str) -> None:
        self._skip(_TOML_SPACES)
        if not self.text.startswith(token, self.pos):
            raise ValueError(f"expected {token!r}")
        self.pos += len(token)

    def _keys(self) -> list[str]:
        """A dotted key's parts, each unquoted."""
        parts = []
        while True:
            self._skip(_TOML_SPACES)
            match = _TOML_KEY.match(self.text, self.pos)
            if match is None:
                raise ValueError("expected a key")
            raw = match.group()
            if raw[0] == '"':
                raw = tomllib.loads(f"k = {raw}")["k"]
            elif raw[0] == "'":
                raw = raw[1:-1]
            parts.append(raw)
            self.pos = match.end()
            self._skip(_TOML_SPACES)
            if not self.text.startswith(".", self.pos):
                return parts
            self.pos += 1

    def _path(self, under: str, parts: list[str], start: int) -> str:
        """The path of `parts` under `under`, the tables on the way implied at `start`."""
        path = under
        for part in parts:
            if path:
                self.implied.setdefault(path, start)
            path = f"{path}.{part}" if path else part
            if path in self.tables:  # [a.b] after [[a]]: b is in a's latest element
                path = f"{path}[{self.tables[path] - 1}]"
        return path

    def _header(self) -> str:
        """A `[table]` or `[[array]]` header: the path of the table it opens."""
        start = self.pos
        many = self.text.startswith("[[", start)
        self.pos += 2 if many else 1
        parts = self._keys()
        self._expect("]]" if many else "]")
        if not many:
            path = self._path("", parts, start)
        else:
            parent = self._path("", parts[:-1], start)
            if parent:
                self.implied.setdefault(parent, start)
            array = f"{parent}.{parts[-1]}" if parent else parts[-1]
            count = self.tables.get(array, 0)
            self.tables[array] = count + 1
            self.defined.setdefault(array, start)
            path = f"{array}[{count}]"
        self.defined.setdefault(path, start)
        return path

    def _key_value(self, table: str, depth: int) -> None:
        start = self.pos
        path = self._path(table, self._keys(), start)
        self.defined.setdefault(path, start)
        self._expect("=")
        self._value(path, depth)

    def _value(self, path: str, depth: int) -> None:
        if depth > MAX_DEPTH:
            raise ValueError("nested too deeply")
        self._skip(_TOML_SPACES)
        opening = self.text[self.pos]
        if opening == "[":
            self._items(path, depth)
        elif opening == "{":
            self._inline_table(path, depth)
        else:
            match = (_TOML_STRING if opening in "\"'" else _TOML_SCALAR).match(
                self.text, self.pos)
            if match is None:
                raise ValueError("expected a value")
            self.pos = match.end()

    def _items(self, path: str, depth: int) -> None:
        """An array value, each element's start defined as `path[i]`."""
        self.pos += 1
        index = 0
        while self._skip(_TOML_BLANK) < len(self.text) and self.text[self.pos] != "]":
            self.defined.setdefault(f"{path}[{index}]", self.pos)
            self._value(f"{path}[{index}]", depth + 1)
            self._skip(_TOML_BLANK)
            if self.text[self.pos] == ",":
                self.pos += 1
                index += 1
            elif self.text[self.pos] != "]":
                raise ValueError("expected , or ]")
        self._expect("]")

    def _inline_table(self, path: str, depth: int) -> None:
        self.pos += 1
        while self._skip(_TOML_BLANK) < len(self.text) and self.text[self.pos] != "}":
            self._key_value(path, depth + 1)
            self._skip(_TOML_BLANK)
            if self.text[self.pos] == ",":
                self.pos += 1
            elif self.text[self.pos] != "}":
                raise ValueError("expected , or }")
        self._expect("}")
