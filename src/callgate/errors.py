"""Errors a user can act on: every bad input names its file, line and field."""

from __future__ import annotations

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
        return (
            f"{where}: {self.field}: {self.message}" if self.field else f"{where}: {self.message}"
        )


def pydantic_field(loc: tuple[int | str, ...]) -> str:
    """Render a pydantic error location as a path: ('expect', 'calls', 0) -> expect.calls[0]."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "(root)"


def from_validation_error(path: Path | str, line: int | None, exc: Exception) -> InputError:
    """Turn the first error of a pydantic ValidationError into an InputError."""
    errors = exc.errors()  # type: ignore[attr-defined]
    first = errors[0]
    # Discriminated-union tags ('calls', 'no_call', ...) appear in loc; drop them from the path.
    loc = tuple(p for p in first["loc"] if not (isinstance(p, str) and p in _UNION_TAGS))
    message = first["msg"]
    if len(errors) > 1:
        message += f" (and {len(errors) - 1} more)"
    return InputError(path, message, line=line, field=pydantic_field(loc))


_UNION_TAGS = {
    "no_call",
    "calls",
    "alternatives",
    "judge",
    "any_call",
    "trajectory",
    "final_state",
}


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


def read_text(path: Path) -> str:
    """A whole UTF-8 text file; FileNotFoundError is left to the caller to word."""
    return decode(path, path.read_bytes())
