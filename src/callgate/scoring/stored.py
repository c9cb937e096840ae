"""A stored run's JSON columns as the models scoring owns: its scores (`StoredScores`) and the
decision taken on it (`GateRecord`). The store parses the JSON once where it reads the row;
this is the first layer that knows the models, so every reader above takes them from here,
each validated once per row read (`StoredRun.parsed`)."""

from __future__ import annotations

from typing import Literal, TypeVar

from pydantic import BaseModel, ValidationError

from callgate.errors import CallgateError, from_validation_error
from callgate.scoring.result import GateRecord
from callgate.scoring.scores import Scores
from callgate.store.rows import StoredRun

M = TypeVar("M", bound=BaseModel)


class StoredScores(Scores):
    """The scores document a run keeps: its `Scores`, and what the pipeline writes beside them
    (the suite's gated figures, `gate.figures` of suite.json; absent: both). Fields added to
    `Scores` since a run was stored have defaults, so older stores' documents read."""

    gate_figures: tuple[str, ...] | None = None


def stored_scores(run: StoredRun) -> StoredScores | None:
    """The run's scores (None until it finished)."""
    return _parsed(run, "scores", StoredScores)


def stored_gate(run: StoredRun) -> GateRecord | None:
    """The newest decision recorded on the run (None when none was taken)."""
    return _parsed(run, "gate", GateRecord)


def _parsed(run: StoredRun, column: Literal["scores", "gate"], model: type[M]) -> M | None:
    """The column as `model`; stored content it does not fit is refused in one line naming
    the run and the field (`run 3 (r1): scores.figures.scored: Field required`)."""
    try:
        return run.parsed(column, model)
    except ValidationError as exc:
        raise from_validation_error(f"run {run.id} ({run.release})", None, exc,
                                    prefix=f"{column}.") from None


def finished(run: StoredRun) -> StoredScores:
    """A finished run's scores (the gate only reads finished runs)."""
    scores = stored_scores(run)
    if scores is None:
        raise CallgateError(f"run {run.id} ({run.release}) has not finished: it has no scores")
    return scores
