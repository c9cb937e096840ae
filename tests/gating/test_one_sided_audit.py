"""Only one release audited: an audit that shows the judge erred in the release's favour never
lets it pass on the judge's word (issue 40). End to end: a certified loopback judge, releases
scored with the CLI into one store, audits labelled, `callgate gate` as a subprocess; and the
rule's arithmetic on its own."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from audit_releases import audit_judged, mixed_suite, score_mixed
from live_judge import certified, run  # noqa: F401  (certified: a fixture)
from loopback import Loopback

from callgate.gating.audit_rule import Side, _reading
from callgate.judging.audit import ReleasePart
from callgate.judging.estimates import Z_PAIR, AuditTable


class _Gated:
    """A `callgate gate --json` run: its exit code and its messages, one a line."""

    def __init__(self, done: subprocess.CompletedProcess) -> None:
        self.returncode = done.returncode
        doc = json.loads(done.stdout) if done.stdout.strip() else {}
        self.stdout = "\n".join([*doc.get("messages", []), *doc.get("warnings", [])])
        self.stderr = done.stderr


def _gate(exe: str, env: dict, cwd: Path, release: str, *extra: str) -> _Gated:
    return _Gated(run(exe, env, cwd, "gate", "-m", "m", "--release", release, "--db", "c.db",
                      "--json", *extra))


def _first(exe: str, env: dict, cwd: Path) -> None:
    first = _gate(exe, env, cwd, "r1", "--scores-out", "r1.json")
    assert first.returncode == 0, first.stdout + first.stderr


@pytest.mark.slow
def test_a_release_23_points_worse_audited_alone_under_a_lenient_judge_is_inconclusive(
    certified: Path,  # noqa: F811
    loopback: Loopback, callgate_exe: str, cli_env: dict, tmp_path: Path,
) -> None:
    # 30 judged cases. Baseline: 24 truly right, the judge says so (80.0). Release: 17 truly
    # right (56.7, 23.3 points worse), the judge lenient on it passes 24 (80.0 as given).
    exe, env = callgate_exe, cli_env
    mixed_suite(tmp_path / "suite", 0, 30)
    first = score_mixed(loopback, exe, env, tmp_path, certified, "r1", [], [n < 24
                                                                            for n in range(30)])
    second = score_mixed(loopback, exe, env, tmp_path, certified, "r2", [],
                         [n < 24 for n in range(30)])
    _first(exe, env, tmp_path)
    today = _gate(exe, env, tmp_path, "r2")
    assert today.returncode == 0, today.stdout  # no audit: as the judge gave them, equal

    audit_judged(tmp_path, second, [n < 17 for n in range(30)], n=20)
    for extra in ((), ("--baseline", "r1.json")):
        gated = _gate(exe, env, tmp_path, "r2", *extra)
        assert gated.returncode == 3, gated.stdout + gated.stderr
        out = gated.stdout
        assert "r2 as the judge gave it 80.0" in out and "r1 as the judge gave it 80.0" in out
        assert "the judge was lenient on this release" in out
        assert "the judge's word cannot pass this release" in out
        found = re.search(r"audit the baseline r1: about (\d+) labels of its 30 judged attempts:"
                          rf" callgate judge audit {first} --n (\d+), then callgate judge label "
                          rf"--audit {first}", out)
        assert found is not None, out
        assert found[1] == found[2] and 1 <= int(found[1]) <= 30
        assert "REGRESSION" not in out  # a baseline judge that lenient is possible

    # The way on: audit the baseline too; both audited, the audited estimates decide (as before).
    audit_judged(tmp_path, first, [n < 24 for n in range(30)])
    both = _gate(exe, env, tmp_path, "r2")
    assert both.returncode == 1, both.stdout + both.stderr
    assert "against the baseline's audited 80.0" in both.stdout and "REGRESSION" in both.stdout
    assert "cannot pass this release" not in both.stdout


@pytest.mark.slow
def test_an_audit_that_agrees_with_the_judge_keeps_the_decision(
    certified: Path,  # noqa: F811
    loopback: Loopback, callgate_exe: str, cli_env: dict, tmp_path: Path,
) -> None:
    # Baseline 24 of 30 as given. r2: 23 right, the judge says so: a 3.3-point drop as given,
    # a regression, kept. r3 (r2 failed, so r1 stays the baseline): 24 right, as the judge
    # says: a pass, kept.
    exe, env = callgate_exe, cli_env
    mixed_suite(tmp_path / "suite", 0, 30)
    score_mixed(loopback, exe, env, tmp_path, certified, "r1", [], [n < 24 for n in range(30)])
    second = score_mixed(loopback, exe, env, tmp_path, certified, "r2", [],
                         [n < 23 for n in range(30)])
    _first(exe, env, tmp_path)
    audit_judged(tmp_path, second, [n < 23 for n in range(30)], n=20)
    gated = _gate(exe, env, tmp_path, "r2")
    assert gated.returncode == 1, gated.stdout + gated.stderr
    assert "right tool fell 3.3 points (80.0 → 76.7; allowed drop 2) — REGRESSION" in gated.stdout
    assert "the judge-as-given share lies in the audited interval" in gated.stdout

    third = score_mixed(loopback, exe, env, tmp_path, certified, "r3", [],
                        [n < 24 for n in range(30)])
    audit_judged(tmp_path, third, [n < 24 for n in range(30)], n=20)
    gated = _gate(exe, env, tmp_path, "r3")
    assert gated.returncode == 0, gated.stdout + gated.stderr
    assert "only this release is audited" in gated.stdout
    assert "r3 as the judge gave it 80.0, audited" in gated.stdout
    assert "the judge-as-given share lies in the audited interval" in gated.stdout
    assert "audit the baseline" not in gated.stdout


@pytest.mark.slow
def test_the_mirror_only_the_baseline_audited_and_its_judge_strict(
    certified: Path,  # noqa: F811
    loopback: Loopback, callgate_exe: str, cli_env: dict, tmp_path: Path,
) -> None:
    # Baseline: 24 of 30 truly right, the judge strict on it passes 17 (56.7 as given).
    # Release: 17 truly right, the judge says so: as given, no change; truly 23.3 worse.
    exe, env = callgate_exe, cli_env
    mixed_suite(tmp_path / "suite", 0, 30)
    first = score_mixed(loopback, exe, env, tmp_path, certified, "r1", [],
                        [n < 17 for n in range(30)])
    second = score_mixed(loopback, exe, env, tmp_path, certified, "r2", [],
                         [n < 17 for n in range(30)])
    _first(exe, env, tmp_path)
    audit_judged(tmp_path, first, [n < 24 for n in range(30)])
    gated = _gate(exe, env, tmp_path, "r2")
    assert gated.returncode == 3, gated.stdout + gated.stderr
    out = gated.stdout
    assert "only the baseline r1 is audited" in out
    assert "the audit says the judge was strict on the baseline r1" in out
    assert "r1 as the judge gave it 56.7, audited 80.0" in out
    assert re.search(rf"audit the release r2: about \d+ labels of its 30 judged attempts: "
                     rf"callgate judge audit {second} --n \d+, then callgate judge label "
                     rf"--audit {second}", out), out


@pytest.mark.slow
def test_a_drop_beyond_the_margin_whatever_the_baseline_judge_did_is_a_regression(
    certified: Path,  # noqa: F811
    loopback: Loopback, callgate_exe: str, cli_env: dict, tmp_path: Path,
) -> None:
    # 24 checked and 6 judged cases. Baseline: 20 checked right, the judge passes none of the
    # judged (66.7). Release: 16 checked right, the judge passes all 6 (73.3 as given: a rise),
    # its audit says none is right (53.3). Even if the baseline's judge was wrong on every
    # judged case it could only have been too strict: 66.7 at the least, 13.3 points above.
    exe, env = callgate_exe, cli_env
    mixed_suite(tmp_path / "suite", 24, 6)
    score_mixed(loopback, exe, env, tmp_path, certified, "r1", [n < 20 for n in range(24)],
                [False] * 6)
    second = score_mixed(loopback, exe, env, tmp_path, certified, "r2",
                         [n < 16 for n in range(24)], [True] * 6)
    _first(exe, env, tmp_path)
    assert _gate(exe, env, tmp_path, "r2").returncode == 0  # as the judge gave them: a rise
    audit_judged(tmp_path, second, [False] * 6)
    gated = _gate(exe, env, tmp_path, "r2")
    assert gated.returncode == 1, gated.stdout + gated.stderr
    assert ("with the most favourable reading of r1's judge error (r1 66.7: every judged pass "
            "of it wrong) the change is -13.3") in gated.stdout
    assert "whatever its judge did — REGRESSION" in gated.stdout


# --------------------------------------------------------------------------- the rule alone


def _part(right: int, n: int, judged: int, passes: int) -> ReleasePart:
    return ReleasePart(deterministic_right=right, deterministic_n=n, judged=judged,
                       judged_passes=passes, table=AuditTable())


def _now(given: float, audited: float, se: float) -> Side:
    return Side(release="r2", run=2, given=given, part=_part(0, 0, 100, round(given)),
                audited=audited, se=se, audited_text="ppi++")


def test_a_judge_lenient_on_the_release_without_consequence_keeps_the_pass() -> None:
    then = Side(release="r1", run=1, given=70.0, part=_part(0, 0, 100, 70))
    # Lenient (80 above 75 ± 2.2), but 75 against the baseline's 70 as given holds.
    outcome, text = _reading("right_tool", _now(80.0, 75.0, 1.0), then, 2.0, Z_PAIR, None)
    assert outcome == "pass" and "no drop beyond 2" in text
    # Lenient and the audited figure against the baseline's as given may drop beyond 2.
    outcome, text = _reading("right_tool", _now(80.0, 69.0, 1.0), then, 2.0, Z_PAIR,
                             AuditTable(pass_pass=60, fail_pass=10, fail_fail=30))
    assert outcome == "undecided" and "audit the baseline r1: about" in text
    # The same estimates, the judge not beyond the audited interval: today's reading stands.
    outcome, _ = _reading("right_tool", _now(70.5, 69.0, 1.0), then, 2.0, Z_PAIR, None)
    assert outcome == "pass"


def test_a_judge_strict_on_the_release_never_withholds_a_pass() -> None:
    then = Side(release="r1", run=1, given=70.0, part=_part(0, 0, 100, 70))
    outcome, text = _reading("right_tool", _now(70.0, 85.0, 1.0), then, 2.0, Z_PAIR, None)
    assert outcome == "pass", text


def test_the_mirror_regression_when_even_a_fully_strict_release_judge_cannot_close_it() -> None:
    # Baseline audited at 95 ± 0 (its judge said 80); the release: 50 checked of 90 right and
    # 10 judged of which the judge passed 0: at most 60 whatever its judge did.
    then = Side(release="r1", run=1, given=80.0, audited=95.0, se=0.0, audited_text="ppi++")
    now = Side(release="r2", run=2, given=50.0, part=_part(50, 90, 10, 0))
    outcome, text = _reading("right_tool", now, then, 2.0, Z_PAIR, None)
    assert outcome == "regression", text
    assert "every judged fail of it right) the change is -35.0" in text
