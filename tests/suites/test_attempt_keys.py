import random

from hypothesis import given
from hypothesis import strategies as st

from callgate.suites.attempt_keys import AttemptKeys

KEYS = st.lists(
    st.tuples(st.sampled_from(["a", "b", "c"]), st.integers(0, 12) | st.integers(2**32, 2**33)),
    max_size=60,
)


@given(KEYS)
def test_agrees_with_a_plain_set(keys: list[tuple[str, int]]) -> None:
    compact, plain = AttemptKeys(), set()
    for key in keys:
        assert compact.add(*key) is (key not in plain)
        plain.add(key)


def test_in_order_repeats_keep_nothing_per_attempt() -> None:
    keys = AttemptKeys()
    order = [(f"case-{c}", r) for r in range(200) for c in range(50)]
    assert all(keys.add(*key) for key in order)
    assert not any(keys.add(*key) for key in order)
    assert keys._ahead == set() and keys._below == [200] * 50


def test_shuffled_repeats_fold_once_the_gaps_fill() -> None:
    order = [("x", r) for r in range(1000)]
    random.Random(7).shuffle(order)
    keys = AttemptKeys()
    assert all(keys.add(*key) for key in order)
    assert keys._ahead == set() and keys._below == [1000]
    assert not keys.add("x", 999)
