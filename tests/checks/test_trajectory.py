import itertools
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from callgate.checks.matching import (
    Call,
    Mismatch,
    ReferenceStepCall,
    json_equal,
    match_trajectory,
)


def call(name: str, step: int, **arguments: Any) -> Call:
    return Call(name, arguments, step)


def want(name: str, step: int, **arguments: Any) -> ReferenceStepCall:
    return ReferenceStepCall(name, arguments, step)


# --- json_equal ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expected", "got", "equal"),
    [
        (True, 1, False),
        (1, True, False),
        (False, 0, False),
        (True, True, True),
        (1, 1.0, True),
        ([1, 2], [2, 1], False),
        ([1, 2], (1, 2), True),
        ({"a": 1, "b": [True]}, {"b": [True], "a": 1.0}, True),
        ({"a": 1}, {"a": 1, "b": 2}, False),
        ({"a": [1]}, {"a": [True]}, False),
        ("1", 1, False),
        (None, None, True),
        (None, 0, False),
    ],
)
def test_json_equal_cases(expected: Any, got: Any, equal: bool) -> None:
    assert json_equal(expected, got) is equal


# --- modes ----------------------------------------------------------------------------------

LOOKUP = want("lookup_order", 0, order_id="A1")
CANCEL = want("cancel_order", 1, order_id="A1", reason="duplicate")


def test_strict_accepts_the_reference_sequence() -> None:
    actual = [
        call("lookup_order", 0, order_id="A1"),
        call("cancel_order", 1, order_id="A1", reason="duplicate"),
    ]
    result = match_trajectory(actual, [LOOKUP, CANCEL], "strict")
    assert result.ok
    assert result.pairs == ((0, 0), (1, 1))
    assert result.mismatches == ()


def test_order_swap_fails_strict_but_passes_unordered() -> None:
    actual = [
        call("cancel_order", 0, order_id="A1", reason="duplicate"),
        call("lookup_order", 1, order_id="A1"),
    ]
    strict = match_trajectory(actual, [LOOKUP, CANCEL], "strict")
    assert not strict.ok
    assert strict.reason == (
        "order: cancel_order (step 1, call 1) came before lookup_order (step 2, call 2)"
    )
    assert strict.mismatches[0].expected == ("lookup_order", "cancel_order")
    assert strict.mismatches[0].got == ("cancel_order", "lookup_order")
    assert strict.pairs == ((0, 1), (1, 0))

    unordered = match_trajectory(actual, [LOOKUP, CANCEL], "unordered")
    assert unordered.ok
    assert unordered.pairs == ((0, 1), (1, 0))


def test_parallel_reference_calls_may_be_split_across_messages_under_strict() -> None:
    expected = [
        want("weather", 0, city="Oslo"),
        want("weather", 0, city="Rome"),
        want("summarise", 1),
    ]
    actual = [
        call("weather", 0, city="Rome"),
        call("weather", 1, city="Oslo"),
        call("summarise", 2),
    ]
    result = match_trajectory(actual, expected, "strict")
    assert result.ok
    assert result.pairs == ((0, 1), (1, 0), (2, 2))


def test_parallel_actual_calls_may_come_in_any_order_under_strict() -> None:
    expected = [want("weather", 0, city="Oslo"), want("weather", 1, city="Rome")]
    actual = [call("weather", 0, city="Rome"), call("weather", 0, city="Oslo")]
    result = match_trajectory(actual, expected, "strict")
    assert result.ok
    assert result.pairs == ((0, 1), (1, 0))


def test_strict_rejects_a_call_moved_past_a_later_step() -> None:
    expected = [want("a", 0), want("b", 0), want("c", 1)]
    actual = [call("a", 0), call("c", 1), call("b", 2)]
    result = match_trajectory(actual, expected, "strict")
    assert not result.ok
    assert result.reason == "order: c (step 2, call 2) came before b (step 3, call 3)"
    assert match_trajectory(actual, expected, "unordered").ok


def test_strict_reports_every_inversion() -> None:
    expected = [want("a", 0), want("b", 1), want("c", 2)]
    actual = [call("c", 0), call("b", 1), call("a", 2)]
    result = match_trajectory(actual, expected, "strict")
    assert not result.ok
    assert len(result.mismatches) == 3
    assert result.reason.endswith("(and 2 more)")


def test_strict_swaps_interchangeable_calls_instead_of_reporting_order() -> None:
    expected = [want("ping", 0), want("stop", 1), want("ping", 2)]
    actual = [call("ping", 0, n=1), call("stop", 1), call("ping", 2, n=2)]
    result = match_trajectory(actual, expected, "strict")
    assert result.ok
    assert result.pairs == ((0, 0), (1, 1), (2, 2))


def test_strict_finds_an_ordered_pairing_the_plain_matching_misses() -> None:
    # Augmenting paths pair e0 -> a2 and e1 -> a0 (crossed); the ordered pairing is diagonal.
    expected = [want("x", 0, p=1), want("x", 1, q=1), want("x", 2, r=1)]
    actual = [call("x", 0, p=1, q=1), call("x", 1, q=1, r=1), call("x", 2, p=1, r=1)]
    result = match_trajectory(actual, expected, "strict")
    assert result.ok
    assert result.pairs == ((0, 0), (1, 1), (2, 2))


def test_unordered_counts_duplicates() -> None:
    once = [call("refund", 0, amount=5)]
    twice = [call("refund", 0, amount=5), call("refund", 1, amount=5)]
    expected_twice = [want("refund", 0, amount=5), want("refund", 1, amount=5)]

    missing = match_trajectory(once, expected_twice, "unordered")
    assert not missing.ok
    assert missing.reason == "missing call to refund at step 2"
    assert missing.mismatches[0].call_index is None
    assert missing.mismatches[0].expected == {"amount": 5}

    extra = match_trajectory(twice, expected_twice[:1], "unordered")
    assert not extra.ok
    assert extra.reason == "unexpected call to refund at step 2, call 2"
    assert extra.mismatches[0].got == {"amount": 5}

    assert match_trajectory(twice, expected_twice, "unordered").ok


def test_superset_allows_extra_calls_but_not_missing_ones() -> None:
    expected = [want("refund", 0, amount=5)]
    actual = [call("lookup", 0), call("refund", 1, amount=5), call("refund", 2, amount=5)]
    result = match_trajectory(actual, expected, "superset")
    assert result.ok
    assert len(result.pairs) == 1

    twice = [want("refund", 0, amount=5), want("refund", 1, amount=5)]
    short = match_trajectory([call("refund", 0, amount=5)], twice, "superset")
    assert not short.ok
    assert short.reason == "missing call to refund at step 2"


def test_subset_allows_missing_calls_but_not_extra_ones() -> None:
    expected = [want("lookup", 0), want("refund", 1, amount=5)]
    result = match_trajectory([call("refund", 0, amount=5)], expected, "subset")
    assert result.ok
    assert result.pairs == ((1, 0),)

    extra = match_trajectory([call("refund", 0, amount=5), call("delete", 1)], expected, "subset")
    assert not extra.ok
    assert extra.reason == "unexpected call to delete at step 2, call 2"


def test_empty_sequences() -> None:
    assert match_trajectory([], [], "strict").ok
    assert match_trajectory([call("a", 0)], [], "superset").ok
    assert match_trajectory([], [want("a", 0)], "subset").ok
    assert match_trajectory([], [want("a", 0)], "strict").reason == "missing call to a at step 1"


# --- optimal pairing ------------------------------------------------------------------------


def greedy_first_fit(actual: list[Call], expected: list[ReferenceStepCall]) -> bool:
    """The naive pairing the module must not use: each expected call takes the first free fit."""
    free = list(range(len(actual)))
    for exp in expected:
        fit = next(
            (
                a
                for a in free
                if actual[a].name == exp.name
                and all(actual[a].arguments.get(k) == v for k, v in exp.arguments.items())
            ),
            None,
        )
        if fit is None:
            return False
        free.remove(fit)
    return True


@pytest.mark.parametrize("mode", ["strict", "unordered", "superset", "subset"])
def test_optimal_matching_succeeds_where_greedy_first_fit_fails(mode: str) -> None:
    expected = [want("lookup", 0, id="a"), want("lookup", 0, id="a", include=True)]
    actual = [call("lookup", 0, id="a", include=True), call("lookup", 1, id="a")]
    assert not greedy_first_fit(actual, expected)

    result = match_trajectory(actual, expected, mode)  # type: ignore[arg-type]
    assert result.ok
    assert result.pairs == ((0, 1), (1, 0))


# --- argument rules -------------------------------------------------------------------------


def test_exact_rejects_an_extra_argument_that_key_accepts() -> None:
    expected = [want("search", 0, query="shoes")]
    actual = [call("search", 0, query="shoes", limit=10)]
    assert match_trajectory(actual, expected, args="key").ok

    result = match_trajectory(actual, expected, args="exact")
    assert not result.ok
    assert result.reason == "step 1, call 1 search: unexpected argument limit=10"
    assert result.mismatches[0].argument == "limit"


def test_key_rule_requires_listed_arguments() -> None:
    result = match_trajectory([call("search", 3, limit=10)], [want("search", 0, query="shoes")])
    assert not result.ok
    assert result.reason == 'step 4, call 1 search: argument query missing, expected "shoes"'


def test_ignore_compares_names_only() -> None:
    expected = [want("search", 0, query="shoes")]
    assert match_trajectory([call("search", 0, query="hats")], expected, args="ignore").ok
    assert not match_trajectory([call("browse", 0, query="shoes")], expected, args="ignore").ok


def test_per_tool_overrides_the_default_rule() -> None:
    expected = [want("search", 0, query="shoes"), want("log", 1, text="searched")]
    actual = [call("search", 0, query="shoes"), call("log", 1, text="free text here")]
    assert not match_trajectory(actual, expected, args="exact").ok
    assert match_trajectory(actual, expected, args="exact", per_tool={"log": "ignore"}).ok

    extra = [call("search", 0, query="shoes", limit=3), call("log", 1, text="searched")]
    assert match_trajectory(extra, expected, args="key").ok
    strict_search = match_trajectory(extra, expected, args="key", per_tool={"search": "exact"})
    assert not strict_search.ok
    assert strict_search.mismatches[0].tool == "search"


def test_bool_never_equals_an_integer() -> None:
    expected = [want("lookup", 0, include=True)]
    result = match_trajectory([call("lookup", 0, include=1)], expected)
    assert not result.ok
    assert result.reason == "step 1, call 1 lookup: argument include expected true, got 1"
    assert match_trajectory([call("lookup", 0, include=True)], expected).ok
    assert match_trajectory([call("count", 0, n=2.0)], [want("count", 0, n=2)]).ok


def test_custom_value_match_is_used() -> None:
    def one_of(spec: Any, got: Any) -> bool:
        return got in spec if isinstance(spec, list) else json_equal(spec, got)

    expected = [want("convert", 0, unit=["C", "celsius"])]
    assert match_trajectory([call("convert", 0, unit="celsius")], expected, value_match=one_of).ok
    assert not match_trajectory([call("convert", 0, unit="celsius")], expected).ok


# --- mismatch messages ----------------------------------------------------------------------


def test_mismatch_names_step_call_and_argument() -> None:
    expected = [
        want("lookup_order", 0, order_id="A1"),
        want("refund", 1, order_id="A1"),
        want("note", 2),
        want("cancel_order", 2, order_id="A1", reason="duplicate"),
    ]
    actual = [
        call("lookup_order", 0, order_id="A1"),
        call("refund", 1, order_id="A1"),
        call("note", 2),
        call("cancel_order", 2, order_id="A1", reason="other"),
    ]
    result = match_trajectory(actual, expected, "strict")
    assert not result.ok
    assert result.mismatches == (
        Mismatch(
            step=2,
            call_index=3,
            tool="cancel_order",
            argument="reason",
            expected="duplicate",
            got="other",
            message='step 3, call 4 cancel_order: argument reason expected "duplicate", '
            'got "other"',
        ),
    )
    assert result.reason == result.mismatches[0].message
    assert result.pairs == ((0, 0), (1, 1), (2, 2))


def test_leftover_is_compared_with_the_closest_same_name_call() -> None:
    expected = [want("cancel", 0, id="A1", reason="duplicate", notify=True)]
    actual = [
        call("cancel", 0, id="B2", reason="other", notify=False),
        call("cancel", 1, id="A1", reason="other", notify=True),
    ]
    result = match_trajectory(actual, expected, "superset")
    assert not result.ok
    assert [m.argument for m in result.mismatches] == ["reason"]
    assert result.mismatches[0].call_index == 1


def test_reason_counts_further_mismatches() -> None:
    result = match_trajectory(
        [call("pay", 0, amount=1, currency="EUR")],
        [want("pay", 0, amount=2, currency="USD"), want("email", 1)],
        "unordered",
    )
    assert not result.ok
    assert len(result.mismatches) == 3
    assert result.reason == "step 1, call 1 pay: argument amount expected 2, got 1 (and 2 more)"
    assert result.mismatches[-1].message == "missing call to email at step 2"


def test_long_values_are_shortened_in_messages() -> None:
    result = match_trajectory([call("say", 0, text="y" * 500)], [want("say", 0, text="x" * 500)])
    assert not result.ok
    assert len(result.reason) < 200
    assert result.mismatches[0].expected == "x" * 500


# --- properties -----------------------------------------------------------------------------

NAMES = st.sampled_from(["a", "b"])
ARGS = st.dictionaries(st.sampled_from(["x", "y", "z"]), st.integers(0, 1), max_size=3)
STEPS = st.integers(0, 3)
actual_calls = st.lists(st.builds(Call, NAMES, ARGS, STEPS), max_size=5)
expected_calls = st.lists(st.builds(ReferenceStepCall, NAMES, ARGS, STEPS), max_size=5)


def brute_force_strict(actual: list[Call], expected: list[ReferenceStepCall], rule: str) -> bool:
    def fits(e: int, a: int) -> bool:
        got, spec = actual[a].arguments, expected[e].arguments
        same = got == spec if rule == "exact" else all(got.get(k) == v for k, v in spec.items())
        return actual[a].name == expected[e].name and same

    if len(actual) != len(expected):
        return False
    for perm in itertools.permutations(range(len(actual))):
        if all(fits(e, a) for e, a in enumerate(perm)) and all(
            not (expected[e1].step < expected[e2].step and actual[a1].step > actual[a2].step)
            for (e1, a1), (e2, a2) in itertools.permutations(enumerate(perm), 2)
        ):
            return True
    return False


@pytest.mark.slow
@settings(max_examples=400)
@given(actual_calls, expected_calls, st.sampled_from(["exact", "key"]))
def test_strict_agrees_with_brute_force(
    actual: list[Call], expected: list[ReferenceStepCall], rule: Any
) -> None:
    result = match_trajectory(actual, expected, "strict", args=rule)
    assert result.ok is brute_force_strict(actual, expected, rule)
    if not result.ok:
        assert result.mismatches
        assert result.reason.startswith(result.mismatches[0].message)


@given(expected_calls, st.randoms())
def test_unordered_is_invariant_under_permuting_actual_calls(
    expected: list[ReferenceStepCall], random: Any
) -> None:
    actual = [Call(e.name, e.arguments, e.step) for e in expected]
    random.shuffle(actual)
    assert match_trajectory(actual, expected, "unordered", args="exact").ok


@given(actual_calls, expected_calls, st.randoms())
def test_unordered_verdict_ignores_actual_order(
    actual: list[Call], expected: list[ReferenceStepCall], random: Any
) -> None:
    shuffled = list(actual)
    random.shuffle(shuffled)
    first = match_trajectory(actual, expected, "unordered")
    second = match_trajectory(shuffled, expected, "unordered")
    assert first.ok is second.ok
    assert len(first.pairs) == len(second.pairs)


@given(actual_calls, expected_calls)
def test_superset_and_subset_are_dual(
    actual: list[Call], expected: list[ReferenceStepCall]
) -> None:
    swapped_actual = [Call(e.name, e.arguments, e.step) for e in expected]
    swapped_expected = [ReferenceStepCall(a.name, a.arguments, a.step) for a in actual]
    superset = match_trajectory(actual, expected, "superset", args="exact")
    subset = match_trajectory(swapped_actual, swapped_expected, "subset", args="exact")
    assert superset.ok is subset.ok
    assert len(superset.pairs) == len(subset.pairs)


@given(actual_calls, expected_calls, st.sampled_from(["strict", "unordered", "superset", "subset"]))
def test_a_looser_rule_never_turns_a_pass_into_a_fail(
    actual: list[Call], expected: list[ReferenceStepCall], mode: Any
) -> None:
    verdicts = [
        match_trajectory(actual, expected, mode, args=rule).ok
        for rule in ("exact", "key", "ignore")
    ]
    assert verdicts == sorted(verdicts)  # False... then True...
    if match_trajectory(actual, expected, "strict").ok:
        assert match_trajectory(actual, expected, "unordered").ok


# --- size: no input makes strict matching exponential -----------------------------------------
# These sizes took the old subset search minutes and gigabytes (issue 13); they carry no timing
# assertion, but a return to an exponential search makes them hang the suite.


def test_issue_13_reproduction_is_decided_with_the_order_reason() -> None:
    n = 22  # the old search: 174 s and 1.9 GB
    expected = [ReferenceStepCall("gw", {}, i) for i in range(n)]
    expected += [ReferenceStepCall("book", {}, n)]
    actual = [Call("gw", {}, 0) for _ in range(n - 1)] + [Call("book", {}, 0), Call("gw", {}, 1)]
    result = match_trajectory(actual, expected, "strict", args="ignore")
    assert not result.ok
    assert result.reason == f"order: book (step 1, call {n}) came before gw (step 2, call {n + 1})"
    assert match_trajectory(actual, expected, "unordered", args="ignore").ok


def test_a_turn_of_50_same_name_calls_is_decided() -> None:
    n = 50
    expected = [want("weather", i // 10, city=f"c{i}") for i in range(n)] + [want("book", 5)]
    # All 50 weather calls in one message in reverse order, then the booking.
    actual = [call("weather", 0, city=f"c{i}") for i in reversed(range(n))] + [call("book", 1)]
    result = match_trajectory(actual, expected, "strict")
    assert result.ok
    assert result.pairs == (*((i, n - 1 - i) for i in range(n)), (n, n))
    # The last city asked for after the booking: an order mismatch, found without a search.
    late = [*actual[1:n], call("book", 1), call("weather", 2, city=f"c{n - 1}")]
    result = match_trajectory(late, expected, "strict")
    assert not result.ok
    assert result.reason.startswith("order: book (step 2, call 50) came before weather")
