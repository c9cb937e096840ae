"""The three figures, Wilson intervals and pass^k, against values computed by hand."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from callgate.checks.verdict import Verdict
from callgate.scoring.scores import ScoreBuilder, pass_hat_k, percentile, score, wilson


def v(case_id: str, tool: bool, args: bool, calls: int = 1, status: str = "scored",
      repeat: int = 0) -> Verdict:
    return Verdict(case_id=case_id, repeat=repeat, status=status, right_tool=tool,
                   right_arguments=args, calls=calls)


def test_three_figures_by_hand() -> None:
    verdicts = [v("a", True, True), v("b", True, False, calls=2), v("c", False, False, calls=3),
                v("d", True, True, calls=0), v("e", False, False, status="truncated"),
                v("f", False, False, status="provider_error", calls=0)]
    s = score(verdicts, {"a": ["clean"], "b": ["clean"], "c": ["ambiguous"]})
    assert s.attempts == 6 and s.figures.scored == 4
    assert s.figures.right_tool.pct == pytest.approx(75.0)
    assert s.figures.right_arguments.pct == pytest.approx(50.0)
    assert s.figures.calls_per_task == pytest.approx(6 / 4)
    assert s.excluded == {
        "truncated": 1, "provider_error": 1, "environment_error": 0, "pending_judge": 0,
        "judge_error": 0, "target_error": 0,
    }
    assert s.by_tag["clean"].right_arguments.pct == pytest.approx(50.0)
    assert s.by_tag["ambiguous"].right_tool.pct == pytest.approx(0.0)


def test_wilson_matches_hand_computation() -> None:
    # 8 of 10 at z=1.96: centre (0.8 + 0.19208)/1.38415, half 1.96*sqrt(0.016+0.0096)/1.38415
    low, high = wilson(8, 10)
    assert low == pytest.approx(0.4902, abs=1e-4) and high == pytest.approx(0.9433, abs=1e-4)
    assert wilson(0, 0) is None
    assert wilson(0, 5)[0] == 0.0 and wilson(5, 5)[1] == 1.0


def test_pass_hat_k_as_in_tau_bench() -> None:
    assert pass_hat_k(3, 4, 1) == pytest.approx(0.75)
    assert pass_hat_k(3, 4, 2) == pytest.approx(3 / 6)
    assert pass_hat_k(3, 4, 4) == 0.0
    with pytest.raises(ValueError):
        pass_hat_k(1, 2, 3)


def test_mean_pass_hat_k_over_cases() -> None:
    verdicts = [v("a", True, True, repeat=0), v("a", True, True, repeat=1),
                v("b", True, True, repeat=0), v("b", True, False, repeat=1)]
    s = score(verdicts)
    assert s.pass_hat_k[1] == pytest.approx((1.0 + 0.5) / 2)
    assert s.pass_hat_k[2] == pytest.approx((1.0 + 0.0) / 2)


def test_cost_unknown_is_not_zero() -> None:
    builder = ScoreBuilder(tags_of={})
    builder.add(v("a", True, True), cost=None)
    assert builder.build().cost_usd is None
    builder.add(v("b", True, True), cost=0.25, latency_ms=100, provider="X")
    builder.add(v("c", True, True), cost=0.5, latency_ms=300, provider="X")
    s = builder.build()
    assert s.cost_usd == pytest.approx(0.75) and s.cost_unknown == 1
    assert s.latency_p50_ms == pytest.approx(200) and s.providers == {"X": 2}


def test_percentile() -> None:
    assert percentile([], 50) is None
    assert percentile([1.0, 2.0, 3.0, 4.0], 95) == pytest.approx(3.85)


verdict_strategy = st.builds(
    lambda tool, args_ok, calls, status: v("c", tool, tool and args_ok, calls, status),
    st.booleans(), st.booleans(), st.integers(0, 5),
    st.sampled_from(["scored", "scored", "scored", "truncated", "provider_error"]),
)


@given(st.lists(verdict_strategy, max_size=60))
def test_figures_stay_in_range_and_arguments_never_exceed_tool(verdicts: list[Verdict]) -> None:
    s = score(verdicts)
    fig = s.figures
    if fig.scored == 0:
        assert fig.right_tool.pct is None and fig.calls_per_task is None
        return
    for share in (fig.right_tool, fig.right_arguments):
        assert 0.0 <= share.pct <= 100.0
        assert 0.0 <= share.low <= share.pct <= share.high <= 100.0
    assert fig.right_arguments.pct <= fig.right_tool.pct
    assert fig.calls_per_task >= 0
    assert fig.scored + sum(s.excluded.values()) == len(verdicts)


@given(st.integers(0, 500), st.integers(1, 500))
def test_wilson_contains_the_estimate(successes: int, n: int) -> None:
    successes = min(successes, n)
    low, high = wilson(successes, n)
    assert low <= successes / n <= high
    assert not math.isnan(low)


def test_pass_hat_k_uses_cases_with_enough_trials() -> None:
    verdicts = [v("a", True, True, repeat=0), v("a", True, False, repeat=1),
                v("b", True, True, repeat=0), v("b", False, False, status="truncated", repeat=1)]
    s = score(verdicts)
    assert s.pass_hat_k[1] == pytest.approx((0.5 + 1.0) / 2)
    assert s.pass_hat_k[2] == pytest.approx(0.0)  # only case a has two scored trials


def test_tokens_unknown_are_not_zero() -> None:
    builder = ScoreBuilder(tags_of={})
    builder.add(v("a", True, True))
    assert builder.build().prompt_tokens is None
    builder.add(v("b", True, True), prompt_tokens=10, completion_tokens=3)
    s = builder.build()
    assert (s.prompt_tokens, s.completion_tokens) == (10, 3)
