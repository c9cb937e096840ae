"""The one reader of input files: text, JSON, JSON Lines and TOML, within sane limits.

Every input callgate reads (suites, recorded responses, calibration sets, scores files,
callgate.toml, judge specs) goes through here, so every file error names the file and, where
the file has lines, the line: a byte that is not UTF-8, a file that is missing or a folder,
JSON that does not parse, a document nested deeper than MAX_DEPTH, `NaN` or `Infinity` (not
JSON, and a NaN figure compares false with everything). Model output that is parsed as JSON
(tool-call arguments, judge replies) uses `loads`, which raises ValueError instead of
RecursionError for the same limits.
"""

from __future__ import annotations

import contextlib
import functools
import json
import re
import tomllib
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, NamedTuple, ParamSpec, TypeVar

import orjson
from pydantic import BaseModel, ValidationError

from callgate.errors import InputError, decode, from_validation_error
from callgate.toml_lines import line_of_toml_field

# Deeper than any real tool schema, case or answer; far below what Python's recursion
# (json, jsonschema, pydantic, the checks) can take.
MAX_DEPTH = 100
# Tool-call arguments longer than this are not read (a model looping on output, an attack).
MAX_ARGUMENTS_CHARS = 1_000_000

Model = TypeVar("Model", bound=BaseModel)
P = ParamSpec("P")
R = TypeVar("R")


class JSONLimitError(ValueError):
    """JSON that parses in principle but is refused: too deep, NaN/Infinity, a giant number."""

    def __init__(self, message: str, *, pos: int | None = None, field: str | None = None
                 ) -> None:
        super().__init__(message)
        self.message = message
        self.pos = pos
        self.field = field


# A JSON string (skipped: brackets inside it are text) or a bracket.
_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]')


def too_deep_at(text: str, limit: int = MAX_DEPTH) -> int | None:
    """The position where `text` opens its (limit+1)-th nested array or object, else None.
    Cheap for ordinary documents: the scan runs only when there are enough brackets."""
    if text.count("[") + text.count("{") <= limit:
        return None
    depth = 0
    for match in _TOKEN.finditer(text):
        token = match.group()
        if token in "[{":
            depth += 1
            if depth > limit:
                return match.start()
        elif token in "]}":
            depth -= 1
    return None


_LONG_NUMBER = re.compile(r"\d{4300,}")
# One pass over the bytes finds what `loads` must look at before orjson may read a text: every
# digit becomes "0" (so a run of 19 digits is one substring search, several times faster than a
# regular expression) and every "{" a "[" (so one count gives the brackets that open).
_PRESCAN = bytes.maketrans(b"123456789{", b"000000000[")
_NINETEEN_ZEROS = b"0" * 19


class _Constant:
    def __init__(self, name: str) -> None:
        self.name = name


def loads(text: str, *, constants: bool = False) -> Any:
    """`json.loads` for input that may be hostile. Raises json.JSONDecodeError for text that is
    not JSON, JSONLimitError (a ValueError) for JSON nested deeper than MAX_DEPTH, holding NaN
    or Infinity (with the field's path; unless `constants`, which reads them as floats for the
    caller to clean) or a number too long for Python to read."""
    scanned = text.encode("utf-8", "surrogatepass").translate(_PRESCAN)
    if scanned.count(b"[") > MAX_DEPTH:  # enough brackets to be too deep: look closer
        where = too_deep_at(text)
        if where is not None:
            raise JSONLimitError(f"nested more than {MAX_DEPTH} levels deep", pos=where)
    if _NINETEEN_ZEROS not in scanned:
        # orjson is several times faster on a line. What it refuses (NaN, Infinity, bad input)
        # goes on to json below, so values and messages are json's; so does any text with 19
        # digits in a row, since orjson reads an integer past 64 bits as a float.
        try:
            return orjson.loads(text)
        except orjson.JSONDecodeError:
            pass
    allow_constants, found = constants, []

    def constant(name: str) -> Any:
        if allow_constants:
            return float(name)
        found.append(name)
        return _Constant(name)

    try:
        value = json.loads(text, parse_constant=constant)
    except json.JSONDecodeError:
        raise
    except RecursionError:  # not expected under MAX_DEPTH; never let it escape as a crash
        raise JSONLimitError("nested too deeply to read") from None
    except ValueError:  # an integer of more than 4300 digits (Python's limit)
        long_number = _LONG_NUMBER.search(text)
        raise JSONLimitError("a number too long to be read (more than 4300 digits)",
                             pos=long_number.start() if long_number else None) from None
    if found:
        raise JSONLimitError(f"{found[0]} is not a JSON number (use null for unknown)",
                             field=_path_of(value, lambda v: isinstance(v, _Constant)))
    if "\\u" in text:  # orjson refused it: it may hold an escape of half a surrogate pair
        _refuse_lone_surrogates(value)
    return value


# Half of a UTF-16 surrogate pair, as json reads a lone escape such as "\ud800": not Unicode
# text, so it can be neither stored (SQLite wants UTF-8) nor printed.
_SURROGATE = re.compile("[\ud800-\udfff]")


def _refuse_lone_surrogates(value: Any) -> None:
    def bad(node: Any) -> bool:
        return isinstance(node, str) and _SURROGATE.search(node) is not None

    if _SURROGATE.search(json.dumps(value, ensure_ascii=False)) is None:
        return
    raise JSONLimitError("not Unicode text: an escape of half a surrogate pair (such as "
                         "\\ud800) stands for no character", field=_path_of(value, bad))


def _path_of(value: Any, wanted: Any) -> str | None:
    """The path (a.b[0]) of the first value `wanted` accepts, searched without recursion."""
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack:
        node, path = stack.pop()
        if wanted(node):
            return path or "(root)"
        if isinstance(node, dict):
            stack.extend((v, f"{path}.{k}" if path else str(k))
                         for k, v in reversed(list(node.items())))
        elif isinstance(node, list):
            stack.extend((v, f"{path}[{i}]") for i, v in reversed(list(enumerate(node))))
    return None


def depth_of(value: Any) -> int:
    """Nesting depth of parsed data (arrays and objects), without recursion."""
    deepest = 0
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict | list):
            deepest = max(deepest, depth)
            if depth <= MAX_DEPTH:
                stack.extend((v, depth + 1) for v in (node.values() if isinstance(node, dict)
                                                      else node))
    return deepest


# --------------------------------------------------------------------------- files


def read_bytes(path: Path | str, *, missing: str = "file not found") -> bytes:
    """A file's bytes; a missing file, a folder or an unreadable file is an InputError."""
    source = Path(path)
    with _unreadable_as_input_error(source, missing):
        return source.read_bytes()


@contextlib.contextmanager
def _unreadable_as_input_error(source: Path, missing: str) -> Iterator[None]:
    """A file that is missing, a folder or unreadable, as an InputError naming it."""
    try:
        yield
    except FileNotFoundError:
        raise InputError(source, missing) from None
    except IsADirectoryError:
        raise InputError(source, "is a folder, not a file") from None
    except PermissionError:
        raise InputError(source, "cannot be read: permission denied") from None
    except OSError as exc:
        raise InputError(source, f"cannot be read: {exc.strerror or exc}") from None


def read_text(path: Path | str, *, missing: str = "file not found") -> str:
    """A whole UTF-8 text file; a bad byte names its line."""
    return decode(path, read_bytes(path, missing=missing))


def _line_of(text: str, pos: int | None) -> int | None:
    return None if pos is None else text.count("\n", 0, pos) + 1


def _limit_error(where: Path | str, exc: JSONLimitError, text: str,
                 line: int | None = None) -> InputError:
    return InputError(where, exc.message, line=line or _line_of(text, exc.pos), field=exc.field)


def parse_json(where: Path | str, text: str, *, line: int | None = None) -> Any:
    """JSON text from `where` (a whole file, or its line `line`), or an InputError."""
    try:
        return loads(text)
    except json.JSONDecodeError as exc:
        at = line if line is not None else exc.lineno
        raise InputError(where, f"invalid JSON: {exc.msg}", line=at) from None
    except JSONLimitError as exc:
        raise _limit_error(where, exc, text, line) from None


def read_json(path: Path | str, *, missing: str = "file not found") -> Any:
    """A whole JSON file (tools.json, suite.json, a scores file)."""
    return parse_json(path, read_text(path, missing=missing))


class JsonLine(NamedTuple):
    number: int
    value: dict[str, Any]
    text: str  # the line as read, stripped


def json_lines_in(where: Path | str, lines: Iterable[bytes | str]) -> Iterator[JsonLine]:
    """The JSON objects of JSON Lines (blank lines skipped), each with its line number."""
    for number, data in enumerate(lines, start=1):
        text = decode(where, data, line=number) if isinstance(data, bytes) else data
        stripped = text.strip()
        if not stripped:
            continue
        value = parse_json(where, text, line=number)
        if not isinstance(value, dict):
            raise InputError(where, "each line must be a JSON object", line=number)
        yield JsonLine(number, value, stripped)


def json_lines(path: Path | str, *, missing: str = "file not found") -> Iterator[JsonLine]:
    """Stream the lines of a JSON Lines file (cases, responses, calibration items)."""
    source = Path(path)
    with _unreadable_as_input_error(source, missing):
        handle = source.open("rb")
    with handle:
        try:
            yield from json_lines_in(source, handle)
        except IsADirectoryError:  # some systems open a folder and fail on the first read
            raise InputError(source, "is a folder, not a file") from None


_TOML_LINE = re.compile(r"\(at line (\d+), column \d+\)")


def _parse_toml(path: Path | str, text: str) -> dict[str, Any]:
    """TOML text read from `path`; a syntax error names its line."""
    try:
        value = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        found = _TOML_LINE.search(str(exc))
        message = _TOML_LINE.sub("", str(exc)).strip()
        raise InputError(path, f"invalid TOML: {message}",
                         line=int(found.group(1)) if found else None) from None
    except RecursionError:
        raise InputError(path, f"nested more than {MAX_DEPTH} levels deep",
                         line=_line_of(text, too_deep_at(text))) from None
    if depth_of(value) > MAX_DEPTH:
        raise InputError(path, f"nested more than {MAX_DEPTH} levels deep",
                         line=_line_of(text, too_deep_at(text)))
    return value


@contextlib.contextmanager
def reading_toml(path: Path | str, *, missing: str = "file not found"
                 ) -> Iterator[dict[str, Any]]:
    """A TOML file's data (callgate.toml, a judge spec), to be checked inside the `with` block.

    A syntax error names its line; an InputError raised in the block about a field of this
    file, without a line, gets the line the field is on (tomllib gives no positions)."""
    text = read_text(path, missing=missing)
    try:
        yield _parse_toml(path, text)
    except InputError as exc:
        if exc.line is None and exc.field and exc.path == str(path):
            exc.line = line_of_toml_field(text, exc.field)
        raise


# --------------------------------------------------------------------------- field lines

_FIELD_PART = re.compile(r"\[(\d+)\]|\.?([^.\[]+)")
_SPACE = re.compile(r"[ \t\n\r]*")


def line_of_field(text: str, field: str) -> int | None:
    """The line of a whole-file JSON document where `field` (a.b[0].c) is, or where the
    deepest part of it that exists is (a missing field: its parent object). None when the
    field's first part is not there."""
    decoder = json.JSONDecoder()
    parts = [int(m.group(1)) if m.group(1) is not None else m.group(2)
             for m in _FIELD_PART.finditer(field)]
    try:
        pos: int | None = _SPACE.match(text, 0).end()  # type: ignore[union-attr]
        found = pos
        for part in parts:
            pos = _child(decoder, text, pos, part)  # type: ignore[arg-type]
            if pos is None:
                break
            found = pos
    except (ValueError, IndexError):  # not the document we think: no line rather than a crash
        return None
    return _line_of(text, found)


def _child(decoder: json.JSONDecoder, text: str, pos: int, part: int | str) -> int | None:
    """Where the value of key or index `part` of the container at `pos` starts."""
    def skip(at: int) -> int:
        return _SPACE.match(text, at).end()  # type: ignore[union-attr]

    if text[pos] == "{" and isinstance(part, str):
        pos = skip(pos + 1)
        while text[pos] != "}":
            key, pos = json.decoder.scanstring(text, pos + 1)  # type: ignore[attr-defined]
            pos = skip(skip(pos) + 1)  # the colon
            if key == part:
                return pos
            pos = skip(decoder.raw_decode(text, pos)[1])
            if text[pos] == ",":
                pos = skip(pos + 1)
        return None
    if text[pos] == "[" and isinstance(part, int):
        pos = skip(pos + 1)
        for _ in range(part):
            if text[pos] == "]":
                return None
            pos = skip(decoder.raw_decode(text, pos)[1])
            if text[pos] == ",":
                pos = skip(pos + 1)
        return None if text[pos] == "]" else pos
    return None


def names_lines(function: Callable[P, R]) -> Callable[P, R]:
    """Give the InputErrors `function` raises about a field of a whole-file JSON document
    (tools.json, suite.json, a scores file) the line the field is on."""
    @functools.wraps(function)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return function(*args, **kwargs)
        except InputError as exc:
            if exc.line is None and exc.field and exc.path.endswith(".json"):
                try:
                    text = Path(exc.path).read_text(encoding="utf-8")
                except (OSError, UnicodeDecodeError):
                    raise exc from None
                exc.line = line_of_field(text, exc.field)
            raise
    return wrapper


# --------------------------------------------------------------------------- validation


def validate(model: type[Model], raw: Any, where: Path | str, *, line: int | None = None,
             prefix: str = "") -> Model:
    """`raw` as a `model`, or an InputError naming the file, the line and the field."""
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        raise from_validation_error(where, line, exc, prefix=prefix) from None


def canonical_json(value: Any) -> str:
    """The one JSON text of a value (sorted keys, no spaces): what fingerprints and cache keys
    are computed on."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
