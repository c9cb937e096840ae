"""The recovery gate (gating/recovery_gate.py, docs/faults.md): recovery per fault kind against
the baseline's, shown on every decision that has it, failing a release only when asked (`[gate]
recovery_max_drop`), never turning a failure into a pass; on constructed releases, on releases
scored into a store from recorded answers, and through the CLI."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from multiturn import STATE, env_suite, mt_case, score, turns
from releases import release, uniform

from callgate.gating.decision import decide
from callgate.gating.quarantine import gate_settings
from callgate.gating.recovery_gate import recovery_checks, with_recovery
from callgate.gating.release import gate_release
from callgate.gating.scores_file import ReleaseScores, read_release_file
from callgate.scoring.scores import Share
from callgate.store.db import Store
from callgate.suites.suite import load_suite

CLEAN = uniform(200, 190, 180)


def with_recovery_of(name: str, **kinds: tuple[int, int]) -> ReleaseScores:
    return release(name, CLEAN).model_copy(update={"recovery": {
        kind: Share.of(s, n) for kind, (s, n) in kinds.items()}})


def gated(now: ReleaseScores, then: ReleaseScores | None, max_drop: float | None):  # type: ignore[no-untyped-def]
    return with_recovery(decide(now, then), now, then, max_drop)


def test_a_drop_fails_only_when_gated() -> None:
    then = with_recovery_of("r1", timeout=(40, 50), empty=(30, 50))
    now = with_recovery_of("r2", timeout=(30, 50), empty=(30, 50))  # timeout 80% -> 60%
    shown = gated(now, then, None)
    assert shown.outcome == "pass" and shown.exit_code == 0
    assert ("recovery after timeout: 60.0% [46.2, 72.4] of 50, baseline 80.0% [67.0, 88.8] "
            "of 50, -20.0 points (not gated: [gate] recovery_max_drop)") in shown.messages
    failed = gated(now, then, 5.0)
    assert failed.outcome == "regression" and failed.exit_code == 1
    assert any(m.startswith("recovery after timeout") and m.endswith("— REGRESSION")
               for m in failed.messages)
    assert not any("empty" in m and "REGRESSION" in m for m in failed.messages)
    assert gated(now, then, 25.0).outcome == "pass"  # within the allowed drop


def test_it_never_turns_a_failure_into_a_pass_and_a_first_release_is_not_gated() -> None:
    then = with_recovery_of("r1", timeout=(10, 50))
    broken = release("r2", uniform(200, 150, 140)).model_copy(
        update={"recovery": {"timeout": Share.of(50, 50)}})
    assert gated(broken, then, 1.0).outcome == "regression"  # the shares fell; recovery rose
    first = gated(with_recovery_of("r1", timeout=(0, 50)), None, 1.0)
    assert first.outcome == "first_release"
    assert "recovery after timeout: 0.0% [0.0, 7.1] of 50 (none in the baseline)" in \
        first.messages
    plain = release("r2", CLEAN)
    assert gated(plain, then, 1.0).messages == decide(plain, then).messages  # nothing to say


def test_a_kind_new_in_this_release_is_shown_not_gated() -> None:
    (check,) = recovery_checks({"rate_limit": Share.of(1, 10)}, {"timeout": Share.of(9, 10)},
                               0.0)
    assert check.baseline is None and check.change is None and not check.failed


def test_recovery_is_kept_in_the_scores_file(tmp_path: Path) -> None:
    kept = with_recovery_of("r1", truncated=(3, 4))
    path = tmp_path / "r1.json"
    path.write_text(kept.to_json())
    assert read_release_file(path).recovery == kept.recovery


def line(case_id: str, repeat: int, retried: bool) -> dict[str, Any]:
    lookup = [("lookup_order", {"order_id": "ord_1"})]
    calls = [lookup, lookup] if retried else [lookup]
    final = "ord_1 is pending." if retried else "Done: ord_1 is all set."
    return {**turns(case_id, *calls, final, repeat=repeat),
            "faults": [{"tool": "lookup_order", "call": 0, "kind": "timeout"}]}


def scored_releases(tmp_path: Path) -> Path:
    case = mt_case("a", {"type": "trajectory", "mode": "superset",
                         "calls": [{"tool": "lookup_order"}]}, state=STATE,
                   faults=[{"tool": "lookup_order", "kind": "timeout", "calls": [1]}],
                   after_fault={"retries": 1, "no_success_claim": True})
    suite = load_suite(env_suite(tmp_path / "shop", [case]))
    score(tmp_path, suite, [line("a", r, True) for r in range(10)], release="r1")
    score(tmp_path, suite, [line("a", r, r < 4) for r in range(10)], release="r2")
    return tmp_path / "callgate.db"


def test_releases_scored_from_recorded_answers_are_gated_on_recovery(tmp_path: Path) -> None:
    db = scored_releases(tmp_path)
    with Store(db) as store:
        gate_release(store, "m", "r1")
        shown, scores = gate_release(store, "m", "r2")
    assert shown.outcome == "pass"
    assert scores.recovery is not None and scores.recovery["timeout"].successes == 4
    assert any("recovery after timeout: 40.0%" in m and "-60.0 points" in m
               for m in shown.messages)
    with Store(db) as store:
        failed, _ = gate_release(store, "m", "r2", recovery_max_drop=10.0)
    assert failed.outcome == "regression" and failed.exit_code == 1


def test_the_gate_setting_is_read_and_checked(tmp_path: Path) -> None:
    toml = tmp_path / "callgate.toml"
    toml.write_text("[gate]\nrecovery_max_drop = 5\n")
    assert gate_settings(toml).recovery_max_drop == 5.0
    assert gate_settings(tmp_path / "absent.toml").recovery_max_drop is None  # off by default
    toml.write_text("[gate]\nrule = \"points\"\nrecovery_max_drop = -1\n")
    with pytest.raises(Exception, match=r"callgate.toml:3: gate.recovery_max_drop"):
        gate_settings(toml)


@pytest.mark.slow
def test_the_cli_gates_recovery_when_callgate_toml_asks(tmp_path: Path, callgate_exe: str,
                                                        cli_env: dict[str, str]) -> None:
    db = scored_releases(tmp_path)
    with Store(db) as store:
        gate_release(store, "m", "r1")
    base = [callgate_exe, "gate", "--release", "r2", "--model", "m", "--db", str(db), "--json"]
    off = subprocess.run([*base, "--config", str(tmp_path / "none.toml")], env=cli_env,
                         capture_output=True, text=True, timeout=120)
    assert off.returncode == 0, off.stderr
    (tmp_path / "callgate.toml").write_text("[gate]\nrecovery_max_drop = 10\n")
    on = subprocess.run([*base, "--config", str(tmp_path / "callgate.toml")], env=cli_env,
                        capture_output=True, text=True, timeout=120)
    assert on.returncode == 1, on.stderr
    assert json.loads(on.stdout)["outcome"] == "regression"
