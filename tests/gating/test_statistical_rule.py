"""The decision under the playbook's rule and the statistical one, and the figures a suite
gates (suite.json `gate.figures`, an imported BFCL suite's right arguments)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from releases import release

from callgate.gating.decision import decide
from callgate.gating.noise import Noise


def _noisy_drop() -> tuple[dict, dict]:
    """600 cases, 3 repeats: right tool falls 4 points, 24 cases flip worse and 25 better,
    every change of one repeat in a flaky case, so the paired test cannot tell it from
    noise."""
    then: dict[str, tuple[int, int, int]] = {}
    now: dict[str, tuple[int, int, int]] = {}
    plan = ([((3, 2), (3, 1))] * 24 + [((3, 1), (3, 2))] * 25  # the flips
            + [((3, 3), (3, 2))] * 150 + [((3, 1), (3, 0))] * 112  # down one repeat
            + [((3, 0), (3, 1))] * 100 + [((3, 2), (3, 3))] * 89  # up one repeat
            + [((3, 3), (3, 3))] * 100)
    for i, ((n0, r0), (n1, r1)) in enumerate(plan):
        then[f"c{i:03d}"] = (n0, r0, r0)
        now[f"c{i:03d}"] = (n1, r1, r1)
    return then, now


def test_a_drop_over_the_margin_the_paired_test_cannot_confirm() -> None:
    then, now = _noisy_drop()
    base, current = release("r1", then), release("r2", now)
    by_points = decide(current, base)
    tool = next(c for c in by_points.checks if c.name == "right_tool")
    assert (tool.flipped_worse, tool.flipped_better) == (24, 25)
    assert tool.change is not None and -4.1 < tool.change < -3.9
    # the playbook's rule: the exit code as before, the explanation says it is not significant
    assert by_points.outcome == "regression" and by_points.exit_code == 1
    said = [m for m in by_points.messages if "not significant" in m]
    assert said and said[0].startswith("right tool: regression by the playbook's rule; "
                                       "not significant, p = ")
    assert "--until-decided" in said[0] and "24 worse / 25 better" in said[0]
    assert tool.p_margin is not None and tool.p_margin > 0.05 and tool.tier == "cannot_tell"
    # the statistical rule: not a regression; it cannot tell, and says what could hide
    statistical = decide(current, base, noise=Noise(rule="statistical"))
    assert statistical.outcome == "inconclusive" and statistical.exit_code == 3
    assert statistical.rule == "statistical"
    assert not any(c.failed for c in statistical.checks)
    assert any("cannot tell by the statistical rule" in m and "could still hide" in m
               for m in statistical.messages)


def test_a_sure_drop_is_a_regression_under_both_rules() -> None:
    # 400 stable cases: 40 of them go from always right to always wrong (10 points)
    then = {f"c{i}": (3, 3, 3) for i in range(400)}
    now = {f"c{i}": (3, 0, 0) if i < 40 else (3, 3, 3) for i in range(400)}
    for rule in ("points", "statistical"):
        decision = decide(release("r2", now), release("r1", then), noise=Noise(rule=rule))
        assert decision.outcome == "regression", rule
        assert not any("not significant" in m for m in decision.messages)


def test_a_point_rule_pass_is_never_failed_by_the_statistical_rule() -> None:
    then = {f"c{i}": (3, 3, 3) for i in range(400)}
    now = {f"c{i}": (3, 0, 0) if i < 8 else (3, 3, 3) for i in range(400)}  # 2.0 points
    decision = decide(release("r2", now), release("r1", then),
                      noise=Noise(rule="statistical"))
    assert decision.outcome == "pass"


def _tool_falls_arguments_hold() -> tuple[dict, dict]:
    """100 single-attempt cases: 4 that had the right tool with wrong arguments now call the
    wrong tool; right arguments stays at 70."""
    then = {f"c{i:02d}": (1, int(i < 90), int(i < 70)) for i in range(100)}
    now = {f"c{i:02d}": (1, int(i < 86), int(i < 70)) for i in range(100)}
    return then, now


def test_a_suite_gating_right_arguments_passes_a_right_tool_drop() -> None:
    then, now = _tool_falls_arguments_hold()
    base, current = release("r1", then), release("r2", now)
    both = decide(current, base)
    assert both.outcome == "regression"
    arguments_only = decide(current, base, noise=Noise(gated=("right_arguments",)))
    assert arguments_only.outcome == "pass"
    tool = next(c for c in arguments_only.checks if c.name == "right_tool")
    assert not tool.gated and not tool.failed and tool.change == -4.0
    assert any(m.startswith("right tool: shown, not gated") for m in arguments_only.messages)


def _write(root: Path, answers: dict[str, list[dict]], gate: dict | None) -> Path:
    from conftest import lookup_case, write_suite
    from factories import line, message, tool_call, write_lines

    from callgate.gating.release import decide_release, gate_release
    from callgate.scoring.pipeline import score_file
    from callgate.store.db import Store
    from callgate.suites.suite import load_suite

    suite_dir = write_suite(root / "suite", [lookup_case(f"c{i:02d}") for i in range(100)])
    if gate is not None:
        (suite_dir / "suite.json").write_text(json.dumps({"gate": gate}))
    suite = load_suite(suite_dir)
    right = message(tool_call("lookup_order", {"order_id": "ord_1"}))
    wrong_value = message(tool_call("lookup_order", {"order_id": "ord_9"}))
    wrong_tool = message(tool_call("cancel_order", {"order_id": "ord_1", "reason": "other"}))

    def answer(i: int, tool_right: int) -> dict:
        return line(f"c{i:02d}", right if i < 70 else wrong_value if i < tool_right
                    else wrong_tool)

    db = root / "callgate.db"
    with Store(db) as store:
        for name, tool_right in (("r1", 90), ("r2", 86)):
            path = write_lines(root / f"{name}.jsonl", [answer(i, tool_right)
                                                        for i in range(100)])
            score_file(suite, path, store, model="m", release=name)
        gate_release(store, "m", "r1")
        decision, _ = decide_release(store, store.find_stored_run("suite", "m", "r2"))
    answers[str(gate)] = [decision.model_dump(mode="json")]
    return db


def test_suite_json_names_the_gated_figures_and_the_store_keeps_them(tmp_path: Path) -> None:
    seen: dict[str, list[dict]] = {}
    _write(tmp_path / "one", seen, {"figures": ["right_arguments"]})
    _write(tmp_path / "both", seen, {"figures": ["right_tool", "right_arguments"]})
    _write(tmp_path / "default", seen, None)
    one = seen[str({"figures": ["right_arguments"]})][0]
    both = seen[str({"figures": ["right_tool", "right_arguments"]})][0]
    default = seen["None"][0]
    assert one["outcome"] == "pass"
    assert both["outcome"] == "regression" and default["outcome"] == "regression"
    assert [c["gated"] for c in one["checks"]] == [False, True]


def test_a_bad_gate_field_names_the_file_and_field(tmp_path: Path) -> None:
    from conftest import lookup_case, write_suite

    from callgate.errors import InputError
    from callgate.suites.suite import load_suite

    suite_dir = write_suite(tmp_path / "suite", [lookup_case("a")])
    (suite_dir / "suite.json").write_text('{\n  "gate": {"figures": ["calls_per_task"]}\n}\n')
    with pytest.raises(InputError) as error:
        load_suite(suite_dir)
    text = str(error.value)
    assert "suite.json" in text and "gate.figures" in text and ":2" in text


@pytest.mark.slow
def test_the_gate_command_takes_the_rule_and_the_quarantine(tmp_path: Path, callgate_exe: str,
                                                           cli_env: dict[str, str]) -> None:
    import subprocess

    db = _write(tmp_path, {}, None)  # right tool falls 4 points on 100 single answers

    def gate(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([callgate_exe, "gate", "--model", "m", "--release", "r2",
                               "--db", str(db), *args], capture_output=True, text=True,
                              env=cli_env, cwd=tmp_path, timeout=120)

    by_points = gate()
    assert by_points.returncode == 1, by_points.stderr
    assert "not significant" in by_points.stdout
    statistical = gate("--rule", "statistical")
    assert statistical.returncode == 3, statistical.stderr
    assert "cannot tell" in statistical.stdout
    (tmp_path / "callgate.toml").write_text('[gate]\nrule = "statistical"\n')
    assert gate().returncode == 3  # [gate] rule
    quarantine = tmp_path / "quarantine.toml"
    quarantine.write_text("".join(f'[[quarantine]]\ncase = "c{i:02d}"\nreason = "moved"\n'
                                  'by = "ops"\n' for i in range(86, 90)))
    left_out = gate("--rule", "points", "--quarantine", str(quarantine))
    assert left_out.returncode == 0, left_out.stdout
    assert "4 case(s) quarantined" in left_out.stdout
    quarantine.write_text('[[quarantine]]\ncase = "c86"\nby = "ops"\n')
    bad = gate("--quarantine", str(quarantine))
    assert bad.returncode == 2
    assert len(bad.stderr.strip().splitlines()) == 1
    assert "quarantine.toml" in bad.stderr and "reason" in bad.stderr
