"""Where a marker key leaked: any 12-character fragment of it in the given texts (a run's stdout
and stderr) or in any file under a folder (the store and every file the run wrote)."""

from __future__ import annotations

import secrets
import string
from pathlib import Path

FRAGMENT = 12


def marker_key(prefix: str = "sk-live-") -> str:
    """A key no test and no file holds by chance."""
    alphabet = string.ascii_letters + string.digits
    return prefix + "".join(secrets.choice(alphabet) for _ in range(32))


def fragments(key: str) -> set[str]:
    return {key[i:i + FRAGMENT] for i in range(len(key) - FRAGMENT + 1)}


def leaks(key: str, texts: dict[str, str], root: Path | None = None) -> list[str]:
    """Where a fragment of `key` is found: the names of the texts and the files holding one."""
    parts = fragments(key)
    found = [name for name, text in texts.items() if any(part in text for part in parts)]
    if root is not None:
        for path in sorted(root.rglob("*")):
            if path.is_file():
                data = path.read_bytes()
                if any(part.encode() in data for part in parts):
                    found.append(str(path))
    return found
