"""The figures' Wilson intervals clustered by case: repeats of one case are not independent
attempts, so the interval is Wilson's at n / design effect (1 + (m − 1)·ICC, ICC by case)."""

from __future__ import annotations

import json
import random
import subprocess
from collections import Counter
from pathlib import Path

import pytest
from factories import LOOKUP_ORDER, calls, case, line, message, tool_call, write_lines, write_suite

from callgate.checks.verdict import Verdict
from callgate.scoring.scores import Share, score
from callgate.stats import design_effect, wilson


def _verdicts(outcomes: dict[str, list[tuple[bool, bool]]]) -> list[Verdict]:
    """(right tool, right arguments) per repeat, per case."""
    return [Verdict(case_id=case_id, repeat=r, status="scored", right_tool=tool,
                    right_arguments=args, calls=1)
            for case_id, repeats in outcomes.items() for r, (tool, args) in enumerate(repeats)]


def _once(cases: int = 40) -> dict[str, list[tuple[bool, bool]]]:
    """One attempt per case: 32 of 40 right tool, 26 right arguments."""
    return {f"c{n:02d}": [(n < 32, n < 26)] for n in range(cases)}


def test_identical_repeats_get_the_one_repeat_interval() -> None:
    once = score(_verdicts(_once())).figures
    thrice = score(_verdicts({c: r * 3 for c, r in _once().items()})).figures
    for name in ("right_tool", "right_arguments"):
        one, three = getattr(once, name), getattr(thrice, name)
        assert three.n == 3 * one.n and three.pct == pytest.approx(one.pct)
        assert three.low == pytest.approx(one.low, rel=1e-12)
        assert three.high == pytest.approx(one.high, rel=1e-12)
        assert three.design_effect == pytest.approx(3.0) and three.icc == pytest.approx(1.0)
        # the attempt-level interval, which today's figures showed, is sqrt(3) narrower
        low, high = wilson(three.successes, three.n)
        assert (one.high - one.low) / (100 * (high - low)) == pytest.approx(3 ** 0.5, rel=0.1)


def test_independent_looking_repeats_keep_the_attempt_level_interval() -> None:
    rng = random.Random(7)
    # every case the same rate, so its repeats vary as independent draws: ICC about 0
    outcomes = {f"c{n:03d}": [(rng.random() < 0.8, rng.random() < 0.6) for _ in range(4)]
                for n in range(300)}
    figures = score(_verdicts(outcomes)).figures
    for share in (figures.right_tool, figures.right_arguments):
        low, high = wilson(share.successes, share.n)
        assert share.icc is not None and share.icc < 0.05
        assert share.design_effect < 1.15
        width = share.high - share.low
        assert 100 * (high - low) <= width <= 1.08 * 100 * (high - low)


def test_one_repeat_is_bit_for_bit_the_attempt_level_interval() -> None:
    figures = score(_verdicts(_once())).figures
    for share in (figures.right_tool, figures.right_arguments):
        low, high = wilson(share.successes, share.n)
        assert (share.low, share.high) == (100 * low, 100 * high)
        assert share.design_effect == 1.0 and share.icc is None
        assert share == Share.of(share.successes, share.n)


def test_per_tag_figures_are_clustered_too() -> None:
    outcomes = {c: r * 2 for c, r in _once().items()}
    tags = {c: ["all"] for c in outcomes}
    s = score(_verdicts(outcomes), tags)
    assert s.by_tag["all"] == s.figures
    assert s.by_tag["all"].right_tool.design_effect == pytest.approx(2.0)


def test_a_negative_icc_never_narrows_the_interval() -> None:
    # each case one right and one wrong: less alike within a case than between (ICC < 0)
    outcomes = {f"c{n:02d}": [(True, True), (False, False)] for n in range(20)}
    share = score(_verdicts(outcomes)).figures.right_tool
    assert share.icc == 0.0 and share.design_effect == 1.0
    assert (share.low, share.high) == tuple(100 * b for b in wilson(20, 40))


def test_cases_in_any_order_give_the_same_bits() -> None:
    # a merged release reads its cases in another order than the unsharded run scored them
    rng = random.Random(3)
    outcomes = {f"c{n:03d}": [(rng.random() < 0.7, rng.random() < 0.5)
                              for _ in range(rng.randint(1, 5))] for n in range(200)}
    shuffled = list(outcomes.items())
    rng.shuffle(shuffled)
    assert score(_verdicts(dict(shuffled))).figures == score(_verdicts(outcomes)).figures
    groups = [(sum(t for t, _ in r), len(r)) for r in outcomes.values()]
    assert design_effect(groups[::-1]) == design_effect(groups)


def test_an_icc_of_zero_is_exactly_zero() -> None:
    # between- and within-case variance equal: summed in floats the estimate came out 1e-16,
    # a design effect of 1.0000000000000002 and an interval off the attempt-level one
    share = Share.by_case(Counter([(0, 1), (2, 2), (3, 4), (1, 2)]))
    assert share.icc == 0.0 and share.design_effect == 1.0
    assert (share.low, share.high) == tuple(100 * b for b in wilson(6, 9))


def _answers(tmp_path: Path, repeats: int) -> Path:
    """Twelve cases, each answering alike in every repeat: 9 right, 3 with the wrong order."""
    suite = write_suite(tmp_path / "suite", [
        case(f"c{n:02d}", calls(("lookup_order", {"order_id": "ord_1"}))) for n in range(12)],
        tools=[LOOKUP_ORDER])
    lines = [line(f"c{n:02d}", message(tool_call("lookup_order",
                                                 {"order_id": "ord_1" if n < 9 else "ord_2"})),
                  repeat=r)
             for n in range(12) for r in range(repeats)]
    write_lines(tmp_path / f"r{repeats}.jsonl", lines)
    return suite


@pytest.mark.slow
def test_score_states_the_design_effect(tmp_path: Path, callgate_exe: str,
                                        cli_env: dict[str, str]) -> None:
    suite = _answers(tmp_path, 3)
    _answers(tmp_path, 1)

    def scored(repeats: int, *extra: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [callgate_exe, "score", str(suite), "-r", str(tmp_path / f"r{repeats}.jsonl"),
             "-m", "m", "--release", f"r{repeats}",
             "--db", str(tmp_path / f"{repeats}{len(extra)}.db"), *extra],
            cwd=tmp_path, env=cli_env, capture_output=True, text=True, check=False)
        assert done.returncode == 0, done.stderr
        return done

    thrice = json.loads(scored(3, "--json").stdout)["scores"]["figures"]["right_arguments"]
    once = json.loads(scored(1, "--json").stdout)["scores"]["figures"]["right_arguments"]
    assert (thrice["successes"], thrice["n"]) == (27, 36)
    assert thrice["design_effect"] == pytest.approx(3.0) and thrice["icc"] == pytest.approx(1.0)
    assert (thrice["low"], thrice["high"]) == pytest.approx((once["low"], once["high"]))
    assert once["design_effect"] == 1.0 and once["icc"] is None

    table = " ".join(scored(3).stdout.split())  # the note under the table wraps at its width
    assert "intervals clustered by case" in table and "right arguments 3.00 (ICC 1.00)" in table
    assert "clustered" not in scored(1).stdout
