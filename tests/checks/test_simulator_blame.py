"""The simulator's blame, read from the scenario and what the user wrote (checks.simulator_blame,
docs/simulated-user.md "Blame"): a secret said as a whole token is a leak; a value of a known
fact's shape that differs from the fact, that the user was not told and that is no other fact's,
is a contradiction; a value the agent said first, another fact's value, a number or a word is
not; stopping before any call is ending early; all of them together, each named."""

from __future__ import annotations

from typing import Any

import pytest

from callgate.checks.simulator_blame import (
    Played,
    contradicted,
    leaked,
    shape_of,
    simulator_faults,
)
from callgate.suites.cases import Scenario
from callgate.suites.responses import parse_response
from callgate.suites.suite import Case


def scenario(**fields: Any) -> Scenario:
    return Scenario.model_validate({"instructions": "Cancel the duplicate order.", **fields})


def played(*texts: str, heard: str = "Which order?") -> Played:
    return Played(texts=list(texts), heard=[heard] * len(texts))


@pytest.mark.parametrize(("value", "said", "same_shape"), [
    ("ord_1", "ord_22", True),
    ("ord_1", "ORD_3", True),  # case-insensitive
    ("ord_1", "ord_", False),
    ("ord_1", "word_2", False),  # inside a longer token
    ("ord_1", "ord_2x", False),
    ("A-1234", "A-99", True),
    ("2026-05-01", "2026-06-12", True),
    ("2026-05-01", "2026-06", False),
])
def test_a_fact_s_shape_frees_its_digits_and_nothing_else(value: str, said: str,
                                                          same_shape: bool) -> None:
    shape = shape_of(value)
    assert shape is not None
    assert bool(shape.search(f"It is {said}.")) is same_shape


@pytest.mark.parametrize("value", ["duplicate", "3", "12 500", ""])
def test_a_word_or_a_number_has_no_shape_of_its_own(value: str) -> None:
    assert shape_of(value) is None


def test_a_value_of_a_fact_s_shape_the_user_made_up_is_a_contradiction() -> None:
    known = scenario(known={"order_id": "ord_1", "reason": "duplicate", "quantity": 2})
    assert contradicted(known, played("Sure.", "It's ord_2, and I want 5 of them.")) == [
        "it said 'ord_2' where the scenario's order_id is 'ord_1'"]
    # The fact itself, a number, or a word are not contradictions it can tell.
    assert contradicted(known, played("It is ord_1, for another reason, 5 of them.")) == []


def test_a_value_the_user_was_told_or_another_fact_s_is_not_a_contradiction() -> None:
    two = scenario(known={"order_id": "ord_1", "other_order": "ord_7"})
    assert contradicted(two, played("Not ord_7: cancel ord_1.")) == []
    told = played("No, not ord_4: ord_1.", heard="Is it ord_4?")
    assert contradicted(scenario(known={"order_id": "ord_1"}), told) == []
    # What it was told only later does not excuse an earlier turn.
    later = Played(texts=["It is ord_4.", "Yes, ord_4."], heard=["Which order?", "ord_4?"])
    assert contradicted(scenario(known={"order_id": "ord_1"}), later) == [
        "it said 'ord_4' where the scenario's order_id is 'ord_1'"]


def test_a_secret_is_leaked_when_said_as_a_whole_token() -> None:
    secret = scenario(secret=["ord_1", "4111 1111"])
    assert leaked(secret, played("My card is 4111 1111, order ORD_1.")) == [
        "it said 'ord_1', which the scenario keeps secret",
        "it said '4111 1111', which the scenario keeps secret"]
    assert leaked(secret, played("It is ord_12, card 4111 11119.")) == []
    # A secret said is a leak, not also a contradiction of a fact of its shape.
    both = scenario(known={"order_id": "ord_2"}, secret=["ord_1"])
    assert contradicted(both, played("ord_1 please")) == []


def test_every_fault_of_a_user_is_named() -> None:
    case = Case.model_validate({
        "id": "c", "messages": [{"role": "user", "content": "hi"}],
        "expect": {"type": "final_state", "calls": [
            {"tool": "cancel_order", "args": {"order_id": "ord_1", "reason": "duplicate"}}]},
        "scenario": {"instructions": "x", "known": {"order_id": "ord_1"}, "secret": ["ord_9"]}})
    assert case.scenario is not None
    no_call = parse_response({"case_id": "c", "repeat": 0, "turns": [{"content": "Which?"}]})
    user = played("ord_9, no wait, ord_3")
    user.stopped = True
    assert simulator_faults(case, case.scenario, user, no_call) == [
        "it ended the conversation before the agent made any call",
        "it said 'ord_9', which the scenario keeps secret",
        "it said 'ord_3' where the scenario's order_id is 'ord_1'"]
    fine = played("It is ord_1.")
    assert simulator_faults(case, case.scenario, fine, no_call) == []
