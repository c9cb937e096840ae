"""The judged shares' intervals (raw and Rogan–Gladen corrected) and the gate's unpaired
detectable drop clustered by case, as the figures' intervals are: repeats of one case are not
independent attempts, so k identical repeats say what one attempt per case says."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from audit_releases import audit_in_full, repeats_suite, scored_release
from judge_outputs import certificate, out
from live_judge import certified, run  # noqa: F401  (certified: a fixture)
from loopback import Loopback
from paths import ROOT
from releases import release

from callgate.checks.verdict import Verdict
from callgate.gating.decision import decide
from callgate.judging.estimates import Clustering, raw_share, rogan_gladen_share
from callgate.judging.judge import Judge, corrected_share, load_judge
from callgate.judging.step import JudgedTally, judged_shares
from callgate.report.console import clustering_note


@pytest.fixture
def judge() -> Judge:
    return load_judge(ROOT / "judges" / "tool_choice.toml")


# Per case, the judge's (tool choice, arguments): 14 pass/pass, 4 pass/fail, 6 fail.
CASES = ([("pass", "pass")] * 14 + [("pass", "fail")] * 4 + [("fail", "n/a")] * 6)


def _tally(repeats: int) -> JudgedTally:
    """Every case judged the same way in each of its repeats."""
    tally = JudgedTally()
    for n, (tool, args) in enumerate(CASES):
        for r in range(repeats):
            tally.add(Verdict(case_id=f"c{n:02d}", repeat=r, status="pending_judge"),
                      out(tool, args))
    return tally


def test_identical_repeats_get_the_one_repeat_judged_interval(judge: Judge) -> None:
    once = judged_shares(_tally(1), judge.fingerprint, certificate(judge)).model_dump(
        mode="json", exclude_unset=True)
    thrice = judged_shares(_tally(3), judge.fingerprint, certificate(judge)).model_dump(
        mode="json", exclude_unset=True)
    for dim in ("tool_choice", "arguments"):
        one, three = once[dim], thrice[dim]
        assert three["n"] == 3 * one["n"]
        assert (three["raw"], three["corrected"]) == pytest.approx((one["raw"], one["corrected"]))
        # today the three repeats' interval is about sqrt(3) narrower
        assert (three["low"], three["high"]) == pytest.approx((one["low"], one["high"]),
                                                              rel=1e-12)
        assert (three["design_effect"], three["icc"]) == (3.0, 1.0)
        assert (one["design_effect"], one["icc"]) == (1.0, None)


def test_one_repeat_is_bit_for_bit_the_unclustered_interval(judge: Judge) -> None:
    shares = judged_shares(_tally(1), judge.fingerprint, certificate(judge)).model_dump(
        mode="json", exclude_unset=True)
    for dim, passes, n, rates in (("tool_choice", 18, 24, (0.90, 0.90, 50, 50)),
                                  ("arguments", 14, 18, (0.95, 0.90, 40, 40))):
        expected = corrected_share(passes, n, *rates)
        assert expected is not None
        assert {k: shares[dim][k] for k in expected} == expected


def test_uncertified_shares_carry_the_design_effect_too(judge: Judge) -> None:
    shares = judged_shares(_tally(2), judge.fingerprint, None).model_dump(
        mode="json", exclude_unset=True)
    assert shares["tool_choice"]["corrected"] is None
    assert shares["tool_choice"]["design_effect"] == 2.0


def test_raw_and_rogan_gladen_estimates_are_clustered() -> None:
    once = Clustering.of("judged", [(1, 1)] * 18 + [(0, 1)] * 6)
    thrice = Clustering.of("judged", [(3, 3)] * 18 + [(0, 3)] * 6)
    assert once.design_effect == 1.0 and thrice.design_effect == 3.0
    for one, three in ((raw_share(18, 24, once), raw_share(54, 72, thrice)),
                       (rogan_gladen_share(18, 24, 0.9, 0.9, 50, 50, once),
                        rogan_gladen_share(54, 72, 0.9, 0.9, 50, 50, thrice))):
        assert one is not None and three is not None
        assert three.value == pytest.approx(one.value)
        assert (three.low, three.high) == pytest.approx((one.low, one.high), rel=1e-12)
        assert three.clustering == (thrice,)
    # one attempt per case: the unclustered estimates, to the bit
    assert raw_share(18, 24, once) == raw_share(18, 24).model_copy(update={"clustering": (once,)})
    clustered_rg, plain_rg = rogan_gladen_share(18, 24, 0.9, 0.9, 50, 50, once), \
        rogan_gladen_share(18, 24, 0.9, 0.9, 50, 50)
    assert plain_rg is not None and clustered_rg is not None
    assert (clustered_rg.low, clustered_rg.high, clustered_rg.se) == (
        plain_rg.low, plain_rg.high, plain_rg.se)


def test_the_scores_table_says_the_judged_intervals_are_clustered(judge: Judge) -> None:
    from callgate.scoring.scores import score

    verdicts = [Verdict(case_id=f"d{n}", repeat=r, status="scored", right_tool=True,
                        right_arguments=True, calls=1) for n in range(5) for r in range(3)]
    scores = score(verdicts).model_copy(update={
        "judged": judged_shares(_tally(3), judge.fingerprint, certificate(judge))})
    note = clustering_note([("r1", scores)])
    assert note is not None
    assert "judged right tool 3.00 (ICC 1.00)" in note
    assert "judged right arguments 3.00 (ICC 1.00)" in note


def test_repeats_do_not_shrink_the_unpaired_detectable_drop() -> None:
    """Three identical repeats of each case are one draw each: the unpaired detectable drop is
    the one-attempt one (counted by attempts it was about sqrt(3) smaller)."""
    once = {f"c{i:04d}": (1, int(i < 1800), int(i < 1500)) for i in range(2000)}
    thrice = {case: (3, 3 * tool, 3 * args) for case, (_, tool, args) in once.items()}
    single = decide(release("r2", once), release("r1", once))
    repeated = decide(release("r2", thrice), release("r1", thrice))
    for one, three in zip(single.checks, repeated.checks, strict=True):
        assert one.detectable_drop_unpaired is not None
        assert three.detectable_drop_unpaired == pytest.approx(one.detectable_drop_unpaired,
                                                               rel=1e-9)


def test_the_unpaired_detectable_drop_reads_each_sides_size() -> None:
    from callgate.gating.statistics import detectable_drop_unpaired

    equal = detectable_drop_unpaired(2000, 0.9)
    # a release of half the baseline's effective size can detect less than two of the same
    smaller = detectable_drop_unpaired(2000, 0.9, n_after=1000)
    assert equal is not None and smaller is not None and smaller > equal
    assert detectable_drop_unpaired(2000, 0.9, n_after=2000) == pytest.approx(equal, rel=1e-9)


@pytest.mark.slow
def test_scored_and_audited_judged_shares_of_repeats_through_the_cli(
    certified: Path, loopback: Loopback, callgate_exe: str, cli_env: dict,  # noqa: F811
    tmp_path: Path
) -> None:
    """score --json and judge audit --json: three identical repeats of every case give the
    judged shares' raw and Rogan–Gladen intervals of one attempt per case."""
    exe, env = callgate_exe, cli_env
    repeats_suite(tmp_path / "suite")
    runs = {repeats: scored_release(loopback, exe, env, tmp_path, certified, f"r{repeats}", repeats)
            for repeats in (1, 3)}
    stored, audited = {}, {}
    for repeats, run_id in runs.items():
        audit_in_full(tmp_path, run_id)
        audit = run(exe, env, tmp_path, "judge", "audit", str(run_id), "--json", "--db", "c.db")
        assert audit.returncode == 0, audit.stderr
        audited[repeats] = json.loads(audit.stdout)["dimensions"]["tool_choice"]
        from callgate.store.db import Store

        with Store(tmp_path / "c.db") as store:
            scores = store.stored_run(run_id).scores  # type: ignore[union-attr]
        stored[repeats] = scores["judged"]["tool_choice"]
    assert stored[3]["design_effect"] == 3.0 and stored[1]["design_effect"] == 1.0
    assert (stored[3]["low"], stored[3]["high"]) == pytest.approx(
        (stored[1]["low"], stored[1]["high"]), rel=1e-9)
    for kind in ("raw", "rogan_gladen"):
        one, three = audited[1][kind], audited[3][kind]
        assert (three["low"], three["high"]) == pytest.approx((one["low"], one["high"]),
                                                              rel=1e-9)
    assert audited[3]["raw"]["clustering"][0]["design_effect"] == 3.0
    assert audited[3]["rogan_gladen"]["design_effect"] == 3.0
