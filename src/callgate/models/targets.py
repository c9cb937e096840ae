"""The agent under test, named by a target spec (`run --target`, a candidate's `target`):

- `python:pkg.module:function`: a function (sync or async) called in this process;
- `http://host/path` (or https): one JSON POST per attempt;
- `cmd:command args`: long-lived processes speaking JSON Lines on stdin and stdout.

`parse_target` reads a spec into a `TargetSpec`; running.targets calls it (docs/targets.md has
the contract). A spec is recorded with every run and request, so it may carry no credentials:
one that does (a key, a `NAME=value` or header whose name reads as one, an option such as
`--api-key`; callgate.redaction's rule) is refused without being echoed. The agent reads its key
from an environment variable it inherits; an HTTP target's key is sent (as
`Authorization: Bearer`) from the variable `api_key_env` (`--api-key-env`) names.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit

from callgate.redaction import credential_in

TargetKind = Literal["python", "http", "cmd"]
_DOTTED = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
FORMS = "python:pkg.module:function, http://host/path or cmd:\"command args\""
NO_CREDENTIALS = (
    "the target spec is recorded with every run and request and printed, so it may carry no "
    "credential: let the agent read its key from an environment variable it inherits (for an "
    "HTTP target, name the variable in --api-key-env or a candidate's api_key_env), never the "
    "key itself (docs/targets.md)")


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


def parse_target(text: str, secrets: Iterable[str] = ()) -> TargetSpec:
    """Read a target spec; ValueError says what is wrong with it. `secrets` are values that
    must not appear in it (callgate.redaction.secrets_in)."""
    spec = text.strip()
    found = credential_in(spec, secrets)
    if found is not None:  # never echo the spec: it holds the secret
        raise ValueError(f"the target holds {found}: {NO_CREDENTIALS}")
    if spec.startswith("python:"):
        address = spec.removeprefix("python:")
        module, sep, function = address.partition(":")
        if not (sep and _DOTTED.match(module) and function.isidentifier()):
            raise ValueError(f"{spec!r}: a Python target is python:pkg.module:function")
        return TargetSpec("python", address, spec)
    if spec.startswith(("http://", "https://")):
        if any(char.isspace() for char in spec):
            raise ValueError("an HTTP target is one URL, without spaces: it takes no headers "
                             "or options (docs/targets.md)")
        parts = urlsplit(spec)
        if not parts.hostname:
            raise ValueError(f"{spec!r}: an HTTP target needs a host")
        if "@" in parts.netloc or parts.query or parts.fragment:
            raise ValueError("an HTTP target must not carry credentials (user:password@host), a "
                             "query string or a fragment: the URL is recorded with every run and "
                             "request")
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
