"""Sharding: which of N runners scores which case (`--shard K/N`).

A case belongs to shard 1 + (the first 8 bytes of SHA-256 of its id, as an integer) mod N. The
split depends only on the case id and N, so it is the same on every runner, needs no list of
the other cases, and does not move a case when others are added or removed. Every repeat of a
case goes to the case's shard, so pass^k is computed on whole cases.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict

from callgate.errors import CallgateError
from callgate.store.rows import StoredRun

_SHARD = re.compile(r"\s*(\d+)\s*/\s*(\d+)\s*")
MAX_SHARDS = 10_000


class Shard(BaseModel):
    """Shard `index` of `count`, counted from 1 (as in Playwright's and pytest-split's)."""

    model_config = ConfigDict(frozen=True)
    index: int
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    def holds(self, case_id: str) -> bool:
        return shard_of(case_id, self.count) == self.index


def parse_shard(text: str) -> Shard:
    """'K/N' with 1 <= K <= N; anything else is a usage error naming --shard."""
    match = _SHARD.fullmatch(text)
    if match is None:
        raise CallgateError(f"--shard: {text!r} is not K/N (e.g. 2/4: the second of 4 shards)")
    index, count = int(match[1]), int(match[2])
    if not 1 <= count <= MAX_SHARDS:
        raise CallgateError(f"--shard: {text!r}: N must be between 1 and {MAX_SHARDS}")
    if not 1 <= index <= count:
        raise CallgateError(f"--shard: {text!r}: K must be between 1 and N ({count})")
    return Shard(index=index, count=count)


def shard_of(case_id: str, count: int) -> int:
    """The shard (1..count) that holds a case."""
    digest = hashlib.sha256(case_id.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") % count + 1


def split(case_ids: Iterable[str], count: int) -> dict[int, list[str]]:
    """Every shard 1..count and the case ids it holds, in the given order."""
    shards: dict[int, list[str]] = {index: [] for index in range(1, count + 1)}
    for case_id in case_ids:
        shards[shard_of(case_id, count)].append(case_id)
    return shards


def missing_shards(present: Iterable[int], count: int) -> list[int]:
    """The shard numbers of 1..count not in `present`."""
    have = set(present)
    return [index for index in range(1, count + 1) if index not in have]


def incomplete(run: Mapping[str, Any]) -> str | None:
    """Why a stored run is not a whole release (some of its shards are missing), or None.
    `run` is a StoredRun; the stored columns (gating's rows, until it reads StoredRun) are
    typed here first."""
    if not isinstance(run, StoredRun):
        run = StoredRun(run)
    count = run.shard_count
    if not count:
        return None
    held = run.shards or ()
    missing = missing_shards(held, count)
    if not missing:
        return None
    names = ", ".join(f"{index}/{count}" for index in missing)
    return (f"release {run.release!r} of {run.model!r} is missing shard(s) {names} "
            f"(it holds {', '.join(str(i) for i in held) or 'none'} of {count}); merge every "
            "shard's store with `callgate merge` before gating")
