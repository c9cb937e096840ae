"""The excluded kinds in words (`--max-excluded`'s help, the gate's inconclusive line) name
every kind that counts against --max-excluded, a simulated user's errors included."""

from __future__ import annotations

from callgate.scoring.exclusion import EXCLUDED_IN_WORDS, EXCLUDED_KINDS, excluded_share


def test_every_excluded_kind_is_named_in_words() -> None:
    named = EXCLUDED_IN_WORDS.replace(" or ", ", ").removesuffix(" errors").split(", ")
    assert len(named) == len(EXCLUDED_KINDS)
    for kind, words in zip(EXCLUDED_KINDS, named, strict=True):
        assert kind.removesuffix("_error").replace("_", " ") in words, (kind, words)
    # A simulated user's errors count against --max-excluded like the others.
    assert excluded_share(4, {"user_error": 1}) == 0.25
