"""A stored run's scores and gate decision read as scoring's models (scoring.stored), once per
row read, from today's stores and from one made by 673342a."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from stores import legacy_store

from callgate.checks.verdict import Verdict
from callgate.errors import CallgateError
from callgate.scoring.result import GateRecord
from callgate.scoring.scores import score
from callgate.scoring.stored import StoredScores, finished, stored_gate, stored_scores
from callgate.store.db import Store
from callgate.store.rows import StoredRun


def _row(scores: str | None, gate: str | None = None) -> dict[str, object]:
    return {"id": 7, "model": "m", "agent": "bot", "release": "r1", "scores": scores,
            "gate": gate, "shards": None, "model_params": None}


def test_a_store_made_by_673342a_reads_as_scores(tmp_path: Path) -> None:
    db = legacy_store(tmp_path / "old.db")
    with Store(db) as store:
        (run,) = store.stored_runs("agent")
    scores = stored_scores(run)
    assert isinstance(scores, StoredScores)
    # The figures as that commit stored them, the fields added since at their defaults.
    assert scores.attempts == 3 and scores.cases == 2 and scores.figures.scored == 3
    assert scores.figures.right_tool.pct == 100.0 and scores.figures.right_tool.n == 3
    assert scores.figures.right_arguments.successes == 2
    assert scores.figures.right_tool.design_effect == 1.0 and scores.figures.right_tool.icc is None
    assert scores.pass_hat_k == {1: 0.75, 2: 0.0} and scores.cost_unknown == 3
    assert scores.excluded["truncated"] == 0 and scores.judged is None
    assert scores.policies is None and scores.unwarranted_calls is None
    assert scores.stopped is None and scores.gate_figures is None
    assert scores.cost_per_right_usd is None and scores.server_errors == "exclude"
    assert stored_gate(run) is None and finished(run) is scores


def test_the_scores_are_validated_once_per_row_read() -> None:
    document = score([Verdict(case_id="a", repeat=0, status="scored", right_tool=True,
                              right_arguments=False, calls=1)]).model_dump(mode="json")
    run = StoredRun(_row(json.dumps({**document, "gate_figures": ["right_tool"]})))
    first = stored_scores(run)
    assert first is not None and stored_scores(run) is first  # the same object: parsed once
    assert first.gate_figures == ("right_tool",) and first.figures.right_arguments.pct == 0.0
    # Another read of the same row is parsed anew, equal to the first.
    again = stored_scores(StoredRun(run.row))
    assert again is not first and again == first


def test_a_gate_record_is_read_as_the_model_and_an_unfinished_run_raises() -> None:
    record = GateRecord(outcome="regression", released=False, baseline_release="r0",
                        max_excluded=0.05, messages=["right tool % fell 3.0 points"])
    run = StoredRun(_row(None, record.model_dump_json()))
    assert stored_gate(run) == record and stored_gate(run) is stored_gate(run)
    assert stored_scores(run) is None
    with pytest.raises(CallgateError, match=r"run 7 \(r1\) has not finished"):
        finished(run)
