"""Typed rows: a stored run as the store returns it (`StoredRun`: its JSON columns parsed once,
where the store reads it), and the rows the store writes given by column name
(`response_row`, `judgement_row`, ...), put in the table's column order here and nowhere
else."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any, Literal, TypeVar

from pydantic import BaseModel

from callgate.store.columns import (
    CALIBRATION_ITEM_COLUMNS,
    JUDGE_OUTPUT_COLUMNS,
    JUDGEMENT_COLUMNS,
    LIVE_RESPONSE_COLUMNS,
    RESPONSE_COLUMNS,
    RUN_REQUEST_COLUMNS,
    RUN_TURN_COLUMNS,
)

# Each order's names and the getter of its values in that order, made once.
_NAMES: dict[tuple[str, ...], tuple[frozenset[str], Callable[[Mapping[str, Any]], Any]]] = {}


def _row(table: str, order: tuple[str, ...], columns: Mapping[str, Any]) -> tuple[Any, ...]:
    """A row of `table` with every column of `order` named once, in that order."""
    known = _NAMES.get(order)
    if known is None:
        known = _NAMES[order] = (frozenset(order), itemgetter(*order))
    names, values = known
    if columns.keys() != names:
        missing, unknown = names - columns.keys(), columns.keys() - names
        raise TypeError(f"{table} row: missing {sorted(missing)}, unknown {sorted(unknown)}")
    found = values(columns)
    return found if len(order) > 1 else (found,)


def response_row(**columns: Any) -> tuple[Any, ...]:
    """A row of table `responses` (RESPONSE_COLUMNS)."""
    return _row("responses", RESPONSE_COLUMNS, columns)


def judgement_row(**columns: Any) -> tuple[Any, ...]:
    """A row of table `judgements` (JUDGEMENT_COLUMNS), for Store.save_judgements."""
    return _row("judgements", JUDGEMENT_COLUMNS, columns)


def judge_output_row(**columns: Any) -> tuple[Any, ...]:
    """A cached judge verdict (JUDGE_OUTPUT_COLUMNS), for Store.save_judge_outputs."""
    return _row("judge_cache", JUDGE_OUTPUT_COLUMNS, columns)


def calibration_item_row(**columns: Any) -> tuple[Any, ...]:
    """An item of a calibration set (CALIBRATION_ITEM_COLUMNS), for
    Store.save_calibration_items."""
    return _row("calibration_items", CALIBRATION_ITEM_COLUMNS, columns)


def run_request_row(**columns: Any) -> tuple[Any, ...]:
    """An attempt's link to its request's cache key (RUN_REQUEST_COLUMNS)."""
    return _row("run_requests", RUN_REQUEST_COLUMNS, columns)


def run_turn_row(**columns: Any) -> tuple[Any, ...]:
    """A turn's link to its request's cache key (RUN_TURN_COLUMNS)."""
    return _row("run_turns", RUN_TURN_COLUMNS, columns)


def live_response_row(**columns: Any) -> tuple[Any, ...]:
    """A provider's answer or failure kept by its request's key (LIVE_RESPONSE_COLUMNS)."""
    return _row("live_responses", LIVE_RESPONSE_COLUMNS, columns)


M = TypeVar("M", bound=BaseModel)


def _json(text: str | None) -> Any:
    return json.loads(text) if text else None


@dataclass(frozen=True, eq=False)  # compared as a mapping of its columns, as the dict it was
class StoredRun(Mapping[str, Any]):
    """A row of table `runs`, its JSON columns parsed once: `scores` (the run's Scores as a
    document; None until it finished), `gate` (the newest GateRecord as a document, None when
    none was taken), `shards` (the shard numbers it holds, None when unsharded) and
    `model_params`. The columns as stored stay readable as a mapping (`run["release"]`,
    `run.row`) for the code not converted yet (gating, which the web and shard hand it to).

    `parsed` gives `scores` or `gate` as a model, validated once per row read: the store sits
    below the layers that own those models, so they name them (`callgate.scoring.stored`)."""

    row: Mapping[str, Any]
    scores: dict[str, Any] | None = field(init=False)
    gate: dict[str, Any] | None = field(init=False)
    shards: tuple[int, ...] | None = field(init=False)
    model_params: dict[str, Any] | None = field(init=False)
    user_simulator: dict[str, Any] | None = field(init=False)  # run --user's name, model, print
    _models: dict[tuple[str, type[BaseModel]], BaseModel | None] = field(
        init=False, repr=False, default_factory=dict)

    def __post_init__(self) -> None:
        shards = _json(self.row.get("shards"))
        object.__setattr__(self, "scores", _json(self.row.get("scores")))
        object.__setattr__(self, "gate", _json(self.row.get("gate")))
        object.__setattr__(self, "shards", tuple(shards) if shards is not None else None)
        object.__setattr__(self, "model_params", _json(self.row.get("model_params")))
        object.__setattr__(self, "user_simulator", _json(self.row.get("user_simulator")))

    def parsed(self, column: Literal["scores", "gate"], model: type[M]) -> M | None:
        """The JSON column as `model` (None when it is NULL), validated on the first ask."""
        key = (column, model)
        if key not in self._models:
            document = self.scores if column == "scores" else self.gate
            self._models[key] = None if document is None else model.model_validate(document)
        found = self._models[key]
        assert found is None or isinstance(found, model)
        return found

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
    def created_at(self) -> str:
        return str(self.row["created_at"])

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
