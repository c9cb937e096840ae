"""The agent under test, named by a target spec (`run --target`, a candidate's `target`):

- `python:pkg.module:function`: a function (sync or async) called in this process;
- `http://host/path` (or https): one JSON POST per attempt;
- `cmd:command args`: long-lived processes speaking JSON Lines on stdin and stdout.

`parse_target` reads a spec into a `TargetSpec`; running.targets calls it (docs/targets.md has
the contract). A spec is recorded with every run and request, so it may carry no credentials.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit

TargetKind = Literal["python", "http", "cmd"]
_DOTTED = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
FORMS = "python:pkg.module:function, http://host/path or cmd:\"command args\""


@dataclass(frozen=True)
class TargetSpec:
    kind: TargetKind
    address: str  # the module:function, the URL or the command line
    text: str  # the spec as given: the target's identity in cache keys and records

    @property
    def module(self) -> str:
        return self.address.partition(":")[0]

    @property
    def function(self) -> str:
        return self.address.partition(":")[2]

    @property
    def argv(self) -> list[str]:
        return shlex.split(self.address)


def parse_target(text: str) -> TargetSpec:
    """Read a target spec; ValueError says what is wrong with it."""
    spec = text.strip()
    if spec.startswith("python:"):
        address = spec.removeprefix("python:")
        module, sep, function = address.partition(":")
        if not (sep and _DOTTED.match(module) and function.isidentifier()):
            raise ValueError(f"{spec!r}: a Python target is python:pkg.module:function")
        return TargetSpec("python", address, spec)
    if spec.startswith(("http://", "https://")):
        parts = urlsplit(spec)
        if not parts.hostname:
            raise ValueError(f"{spec!r}: an HTTP target needs a host")
        if "@" in parts.netloc or parts.query:
            raise ValueError("an HTTP target must not carry credentials (user:password@host) or "
                             "a query string: the URL is recorded with every run and request")
        return TargetSpec("http", spec, spec)
    if spec.startswith("cmd:"):
        address = spec.removeprefix("cmd:").strip()
        try:
            argv = shlex.split(address)
        except ValueError as exc:
            raise ValueError(f"{spec!r}: {exc}") from None
        if not argv:
            raise ValueError("a command target names a program: cmd:\"command args\"")
        return TargetSpec("cmd", address, spec)
    raise ValueError(f"{spec!r}: a target is {FORMS}")
