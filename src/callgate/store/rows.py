"""Typed rows: a stored run as the store returns it (`StoredRun`: its JSON columns parsed once,
where the store reads it), and the rows the store writes given by column name
(`response_row`), put in the table's column order here and nowhere else."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from callgate.store.schema import RESPONSE_COLUMNS

_RESPONSE_NAMES = frozenset(RESPONSE_COLUMNS)


def response_row(**columns: Any) -> tuple[Any, ...]:
    """A row of table `responses`, every column named once, in RESPONSE_COLUMNS order."""
    if columns.keys() != _RESPONSE_NAMES:
        missing, unknown = _RESPONSE_NAMES - columns.keys(), columns.keys() - _RESPONSE_NAMES
        raise TypeError(f"responses row: missing {sorted(missing)}, unknown {sorted(unknown)}")
    return tuple(columns[name] for name in RESPONSE_COLUMNS)


def _json(text: str | None) -> Any:
    return json.loads(text) if text else None


@dataclass(frozen=True, eq=False)  # compared as a mapping of its columns, as the dict it was
class StoredRun(Mapping[str, Any]):
    """A row of table `runs`, its JSON columns parsed once: `scores` (the run's Scores as a
    document; None until it finished), `gate` (the newest GateRecord as a document, None when
    none was taken), `shards` (the shard numbers it holds, None when unsharded) and
    `model_params`. The columns as stored stay readable as a mapping (`run["release"]`,
    `run.row`) for the code not converted yet (gating, web)."""

    row: Mapping[str, Any]
    scores: dict[str, Any] | None = field(init=False)
    gate: dict[str, Any] | None = field(init=False)
    shards: tuple[int, ...] | None = field(init=False)
    model_params: dict[str, Any] | None = field(init=False)

    def __post_init__(self) -> None:
        shards = _json(self.row.get("shards"))
        object.__setattr__(self, "scores", _json(self.row.get("scores")))
        object.__setattr__(self, "gate", _json(self.row.get("gate")))
        object.__setattr__(self, "shards", tuple(shards) if shards is not None else None)
        object.__setattr__(self, "model_params", _json(self.row.get("model_params")))

    @property
    def id(self) -> int:
        return int(self.row["id"])

    @property
    def suite(self) -> str:
        """The suite's fingerprint."""
        return str(self.row["suite"])

    @property
    def suite_name(self) -> str:
        return str(self.row["suite_name"])

    @property
    def agent(self) -> str:
        """The name the release is filed under; a run from before agents has its model's."""
        return str(self.row.get("agent") or self.row["model"])

    @property
    def model(self) -> str:
        return str(self.row["model"])

    @property
    def release(self) -> str:
        return str(self.row["release"])

    @property
    def source(self) -> str:
        return str(self.row["source"])

    @property
    def status(self) -> str:
        return str(self.row["status"])

    @property
    def judge_fingerprint(self) -> str | None:
        return self.row.get("judge_fingerprint")

    @property
    def shard_count(self) -> int | None:
        return self.row.get("shard_count")

    # The mapping of the columns as stored (text for the JSON ones).
    def __getitem__(self, column: str) -> Any:
        return self.row[column]

    def __iter__(self) -> Iterator[str]:
        return iter(self.row)

    def __len__(self) -> int:
        return len(self.row)
