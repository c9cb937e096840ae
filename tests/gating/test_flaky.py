"""Flaky cases (a verdict that differs between identical inputs) and the quarantine: found,
listed on the decision, never silently dropped; a quarantined case is out of the gate and
named on every decision."""

from __future__ import annotations

from pathlib import Path

import pytest
from releases import release

from callgate.errors import InputError
from callgate.gating.decision import decide
from callgate.gating.flaky import flaky_cases, flaky_of_stored, flip_rate
from callgate.gating.noise import Noise
from callgate.gating.quarantine import Quarantined, for_suite, gate_settings, quarantine_file


def test_the_flip_rate_is_the_share_of_disagreeing_pairs() -> None:
    assert flip_rate(3, 3) == 0.0 and flip_rate(1, 0) == 0.0
    assert flip_rate(2, 1) == 1.0
    assert flip_rate(3, 1) == pytest.approx(2 / 3)
    assert flip_rate(4, 2) == pytest.approx(4 / 6)


def test_flaky_cases_add_up_the_releases_with_identical_inputs() -> None:
    now = {"steady": (3, 3, 3), "mixed": (3, 3, 1), "tool": (2, 1, 0)}
    then = {"steady": (3, 0, 0), "mixed": (3, 3, 3)}
    alone = flaky_cases(now)
    assert [f.case_id for f in alone] == ["tool", "mixed"]
    together = flaky_cases(now, then)
    # 3/3 then and 0/3 now: the same input gave both verdicts
    assert {f.case_id: f.attempts for f in together} == {"steady": 6, "mixed": 6, "tool": 2}
    assert together[0].case_id == "tool" and together[0].flip_rate == 1.0


def test_flaky_from_the_stores_tallies_is_the_same() -> None:
    now = {"a": (3, 2, 1), "b": (3, 3, 3), "c": (3, 3, 3)}
    then = {"a": (3, 2, 1), "b": (3, 0, 0), "c": (3, 3, 3)}
    mixed_now = [("a", 3, 2, 1)]
    mixed_then = [("a", 3, 2, 1)]
    changed = [("b", 3, 0, 0, 0, "", 3, 3, 3, 0, "")]
    assert flaky_of_stored(mixed_now, mixed_then, changed, True) == flaky_cases(now, then)
    assert flaky_of_stored(mixed_now, mixed_then, changed, False) == flaky_cases(now)


def test_the_decision_lists_flaky_cases_and_keeps_them_in_the_gate() -> None:
    then = {f"c{i}": (3, 3, 3) for i in range(50)}
    now = {**then, "c0": (3, 1, 1), "c1": (3, 2, 2)}
    flaky = tuple(flaky_cases(now, then))
    decision = decide(release("r2", now), release("r1", then), noise=Noise(flaky=flaky))
    assert [f.case_id for f in decision.flaky] == ["c0", "c1"]
    note = next(w for w in decision.warnings if "flaky" in w)
    assert note.startswith("2 of 50 cases are flaky") and "c0 (53% of 6)" in note
    assert decision.shared_cases == 50  # still gated
    assert decision.model_validate_json(decision.model_dump_json()) == decision


def test_a_store_decision_finds_the_flaky_cases(tmp_path: Path) -> None:
    from test_gate import scored_store

    from callgate.gating.release import decide_release
    from callgate.store.db import Store

    db, runs = scored_store(tmp_path)
    with Store(db) as store:
        decision, _ = decide_release(store, store.stored_run(runs[1]))
        with store.atomic():  # a store from before tallies were kept: the same cases
            store.db.execute("DELETE FROM case_tallies")
        again, _ = decide_release(store, store.stored_run(runs[1]))
    assert [f.case_id for f in decision.flaky] == ["a"]
    assert again.flaky == decision.flaky


def test_a_quarantined_case_is_left_out_and_named() -> None:
    then = {f"c{i}": (1, 1, 1) for i in range(50)}
    now = {**then, "c0": (1, 0, 0), "c1": (1, 0, 0)}  # 4 points
    entry = Quarantined(case="c0", reason="depends on today's date", by="jana")
    second = Quarantined(case="c1", reason="upstream outage", by="ops", suite="s")
    other = Quarantined(case="c2", reason="flaky upstream", by="jana", suite="elsewhere")
    left_out = tuple(for_suite([entry, second, other], "s").values())
    assert left_out == (entry, second)
    kept = decide(release("r2", now), release("r1", then))
    assert kept.outcome == "regression"
    decision = decide(release("r2", now), release("r1", then),
                      noise=Noise(quarantined=left_out))
    assert decision.outcome == "pass"
    assert decision.shared_cases == 48
    assert decision.quarantined == [entry, second]
    assert any("c0 (depends on today's date; set by jana)" in m for m in decision.messages)
    first = decide(release("r1", then), None, noise=Noise(quarantined=left_out))
    assert any("quarantined" in w for w in first.warnings)  # on every decision


def test_quarantine_in_callgate_toml_and_in_a_file(tmp_path: Path) -> None:
    config = tmp_path / "callgate.toml"
    config.write_text('[gate]\nrule = "statistical"\n[[gate.quarantine]]\ncase = "c0"\n'
                      'reason = "date"\nby = "jana"\n')
    settings = gate_settings(config)
    assert settings.rule == "statistical"
    assert settings.quarantine == [Quarantined(case="c0", reason="date", by="jana")]
    assert gate_settings(tmp_path / "absent.toml").rule == "points"
    listed = tmp_path / "quarantine.toml"
    listed.write_text('[[quarantine]]\ncase = "c9"\nreason = "x"\nby = "ops"\n')
    assert [q.case for q in quarantine_file(listed)] == ["c9"]


def test_a_quarantine_entry_without_a_reason_names_file_line_and_field(tmp_path: Path) -> None:
    config = tmp_path / "callgate.toml"
    config.write_text('[gate]\n[[gate.quarantine]]\ncase = "c0"\nby = "jana"\n'
                      'reason = ""\n')
    with pytest.raises(InputError) as error:
        gate_settings(config)
    text = str(error.value)
    assert "callgate.toml" in text and "reason" in text and ":5" in text
