"""What to fix leaves out the cases the gate's quarantine left out (the same entries, passed
on): a release whose only regression in a slice is on quarantined cases names nothing to fix
there, and says how many cases it left out; the same release without the quarantine names the
slice and the moved calls."""

from __future__ import annotations

from pathlib import Path

import pytest
from quarantined_release import AGENT, MOVED, QUARANTINED, entries, scored_store

from callgate.gating.release import gate_release
from callgate.gating.slices import SliceRule
from callgate.report.console import gate_markdown
from callgate.store.db import Store

PER_TOOL = SliceRule(per_tool=True)


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return scored_store(tmp_path_factory.mktemp("fix-quarantine"))


def test_without_the_quarantine_the_slice_and_the_moved_calls_are_named(db: Path) -> None:
    with Store(db) as store:
        decision, _ = gate_release(store, AGENT, "r2", slice_rule=PER_TOOL)
    assert decision.outcome == "regression"
    fix = decision.what_to_fix
    assert fix is not None and fix.confusion is not None
    assert fix.failed == ["tool get_weather"]
    assert [m.words for m in fix.confusion.moved] == [MOVED]
    weather = next(s for s in fix.slices if s.label == "tool get_weather")
    assert (weather.cases, weather.attempts, weather.right_tool.worse) == (20, 20, 10)
    assert not any("quarantined" in note for note in fix.notes)


def test_with_the_quarantine_nothing_is_left_to_fix_and_the_cases_left_out_are_counted(
        db: Path) -> None:
    with Store(db) as store:
        decision, _ = gate_release(store, AGENT, "r2", slice_rule=PER_TOOL,
                                   quarantine=entries())
    assert decision.outcome == "pass"  # the gate left the 10 cases out
    assert decision.shared_cases == 70
    fix = decision.what_to_fix
    assert fix is not None and fix.confusion is not None
    assert fix.failed == [] and fix.confusion.moved == [] and fix.headline() == []
    weather = next(s for s in fix.slices if s.label == "tool get_weather")
    # the slice counts the 10 cases the gate counted, no flips; its attempts too
    assert (weather.cases, weather.attempts, weather.right_tool.worse) == (10, 10, 0)
    assert weather.verdict != "failed"
    forecast = next(s for s in fix.slices if s.label == "tool get_forecast")
    assert forecast.attempts == 20  # the quarantined cases' calls are not counted there
    cells = {(c.expected, c.called): (c.baseline, c.current) for c in fix.confusion.cells}
    assert cells[("get_weather", "get_weather")] == (10, 10)
    assert ("get_weather", "get_forecast") not in cells
    tags = {s.name: s.cases for s in fix.slices if s.kind == "tag"}
    assert tags == {"get": 30, "send": 40}  # the tag slices leave them out too
    note = next(n for n in fix.notes if "quarantined" in n)
    assert note.startswith(f"{len(QUARANTINED)} quarantined case(s) left out of the slices")
    assert QUARANTINED[0] in note
    markdown = gate_markdown(decision)
    assert "**What to fix**" not in markdown  # nothing to lead the summary with
    assert "10 quarantined case(s) left out of the slices" in markdown


def test_against_a_scores_file_the_quarantined_cases_are_left_out_too(db: Path,
                                                                     tmp_path: Path) -> None:
    """A baseline read from a scores file (no first calls kept): the slices are paired case
    by case, less the quarantined ones, as the gate's figures are."""
    with Store(db) as store:
        _, first = gate_release(store, AGENT, "r1")
        scores = tmp_path / "r1.json"
        scores.write_text(first.to_json(), encoding="utf-8")
        decision, _ = gate_release(store, AGENT, "r2", baseline=str(scores),
                                   slice_rule=PER_TOOL, quarantine=entries())
        counted, _ = gate_release(store, AGENT, "r2", baseline=str(scores), slice_rule=PER_TOOL)
    assert (decision.outcome, decision.shared_cases) == ("pass", 70)
    fix, unfixed = decision.what_to_fix, counted.what_to_fix
    assert fix is not None and unfixed is not None
    weather = next(s for s in fix.slices if s.label == "tool get_weather")
    assert (weather.cases, weather.right_tool.worse) == (10, 0) and fix.failed == []
    assert unfixed.failed == ["tool get_weather"]
