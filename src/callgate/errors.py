"""Errors a user can act on: every bad input names its file, line and field."""

from __future__ import annotations

import re
from pathlib import Path


class CallgateError(Exception):
    """Base class for errors reported to the user (CLI exit code 2)."""


class InputError(CallgateError):
    """A bad input file: names the file, the line (when the file has lines) and the field."""

    def __init__(
        self, path: Path | str, message: str, *, line: int | None = None, field: str | None = None
    ) -> None:
        self.path = str(path)
        self.line = line
        self.field = field
        self.message = message
        super().__init__(str(self))

    def __str__(self) -> str:
        where = self.path if self.line is None else f"{self.path}:{self.line}"
        field = _LONG_NAME.sub(_cut, self.field) if self.field else None
        return f"{where}: {field}: {self.message}" if field else f"{where}: {self.message}"


# A field name is echoed as given: a key of 100,000 characters is cut to its start (the line
# the error names still points at it).
_LONG_NAME = re.compile(r"[^.\[\]]{61,}")


def _cut(found: re.Match[str]) -> str:
    return f"{found.group()[:40]}...({len(found.group())} characters)"


def pydantic_field(loc: tuple[int | str, ...]) -> str:
    """Render a pydantic error location as a path: ('expect', 'calls', 0) -> expect.calls[0]."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "(root)"


def from_validation_error(path: Path | str, line: int | None, exc: Exception,
                          prefix: str = "") -> InputError:
    """The first error of a pydantic ValidationError as an InputError naming the field.

    The one converter for every input: discriminated-union tags are dropped from the path,
    pydantic's "Value error, " goes, and a validator's "sub.field: message" names the
    sub-field. Input values are never quoted (they may hold a secret)."""
    errors = exc.errors(include_url=False, include_input=False)  # type: ignore[attr-defined]
    first = errors[0]
    loc: list[int | str] = []
    raw_loc = first["loc"]
    for index, part in enumerate(raw_loc):
        previous = raw_loc[index - 1] if index else None
        # Union tags: expect.calls (not expect.calls.calls), turns[0] (not turns[0].tool).
        if isinstance(part, str) and (
            (previous == "expect" and part in _UNION_TAGS)
            or (previous == "label" and part in ("call", "behaviour"))  # calibration labels
            or (isinstance(previous, int) and index >= 2 and raw_loc[index - 2] == "turns"
                and part in _ROLE_TAGS)
        ):
            continue
        loc.append(part)
    field = pydantic_field(tuple(loc))
    message = str(first["msg"])
    if first["type"] in ("model_type", "dict_type", "model_attributes_type"):
        message = "must be a JSON object"
    elif first["type"] == "less_than_equal" and first.get("ctx", {}).get("le") == 2**63 - 1:
        message = "must be at most 2^63-1, the largest integer SQLite stores"
    for noise in ("Value error, ", "Assertion failed, "):
        message = message.removeprefix(noise)
    sub, sep, rest = message.partition(": ")
    if sep and re.fullmatch(r"[\w\[\].]+", sub):
        field = f"{field}{sub}" if sub.startswith("[") else f"{field}.{sub}"
        message = rest
    field = field.removeprefix("(root).").removeprefix("(root)")
    if len(errors) > 1:
        message += f" (and {len(errors) - 1} more)"
    field = f"{prefix}{field}" if prefix else field
    return InputError(path, message, line=line, field=field or None)


_UNION_TAGS = {
    "no_call",
    "calls",
    "alternatives",
    "judge",
    "any_call",
    "trajectory",
    "final_state",
    "bfcl_multi_turn",
}
_ROLE_TAGS = {"assistant", "tool"}


def decode(path: Path | str, data: bytes, *, line: int | None = None) -> str:
    """`data` read from `path` as UTF-8 text; else an InputError naming the file and the line
    (given, or counted in `data` when it is the whole file)."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        if line is None:
            line = data.count(b"\n", 0, exc.start) + 1
        bad = data[exc.start : exc.start + 1].hex()
        raise InputError(
            path, f"not UTF-8 text: byte 0x{bad} cannot be read ({exc.reason})", line=line
        ) from None
