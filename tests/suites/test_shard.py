"""The split of cases into shards: pure, deterministic, stable, roughly even."""

from __future__ import annotations

import pytest

from callgate.errors import CallgateError
from callgate.suites.shard import Shard, missing_shards, parse_shard, shard_of, split

CASE_IDS = [f"case_{i:05d}" for i in range(10_000)]


def test_every_case_in_exactly_one_shard() -> None:
    for count in (1, 2, 3, 4, 7, 16):
        shards = split(CASE_IDS, count)
        assert sorted(shards) == list(range(1, count + 1))
        flat = [case_id for ids in shards.values() for case_id in ids]
        assert sorted(flat) == sorted(CASE_IDS)  # none lost, none twice
        for index, ids in shards.items():
            assert all(Shard(index=index, count=count).holds(c) for c in ids)
            assert not any(Shard(index=index % count + 1, count=count).holds(c)
                           for c in ids) or count == 1


def test_split_is_stable_when_cases_are_added_or_removed() -> None:
    before = {c: shard_of(c, 4) for c in CASE_IDS}
    changed = CASE_IDS[::3] + [f"new_{i}" for i in range(500)]  # two thirds gone, some new
    after = {c: shard_of(c, 4) for c in changed}
    assert all(after[c] == before[c] for c in changed if c in before)


def test_split_does_not_depend_on_order_or_process() -> None:
    # A fixed value: the hash is SHA-256, not Python's per-process salted hash().
    assert shard_of("ord", 4) == int.from_bytes(
        __import__("hashlib").sha256(b"ord").digest()[:8], "big") % 4 + 1
    assert split(reversed(CASE_IDS), 4)[2] == list(reversed(split(CASE_IDS, 4)[2]))


def test_split_is_roughly_even() -> None:
    for count in (4, 8):
        sizes = [len(ids) for ids in split(CASE_IDS, count).values()]
        expected = len(CASE_IDS) / count
        assert max(abs(size - expected) for size in sizes) < 0.1 * expected, sizes


@pytest.mark.parametrize("text", ["", "2", "0/4", "5/4", "1/0", "a/b", "-1/4", "1/4/2"])
def test_bad_shard_is_a_usage_error(text: str) -> None:
    with pytest.raises(CallgateError, match="--shard"):
        parse_shard(text)


def test_parse_and_missing() -> None:
    assert parse_shard(" 3/8 ") == Shard(index=3, count=8)
    assert str(parse_shard("1/1")) == "1/1"
    assert missing_shards([1, 3], 4) == [2, 4]
    assert missing_shards([1, 2], 2) == []
