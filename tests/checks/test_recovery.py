"""The after-fault checks (checks/recovery.py): pure functions over an attempt's calls, its
final answer and the faults its tool results carried."""

from __future__ import annotations

import pytest

from callgate.checks.recovery import (
    FAILURE_PHRASES,
    SUCCESS_PHRASES,
    check_after_fault,
    claims_success,
    fault_position,
    says,
)
from callgate.suites.faults import AfterFault
from callgate.suites.responses import ReplacedResult

TIMEOUT = ReplacedResult(tool="lookup", call=0, kind="timeout")


def recovered(expect: dict, calls: list[str], answer: str,
              faults: tuple[ReplacedResult, ...] = (TIMEOUT,)) -> tuple[bool, tuple[str, ...]]:
    found = check_after_fault(AfterFault.model_validate(expect), calls, answer, faults)
    assert found is not None
    return found.recovered, found.reasons


def test_retries_at_least_once_and_at_most_n() -> None:
    assert recovered({"retries": 2}, ["lookup", "lookup"], "") == (True, ())
    assert recovered({"retries": 2}, ["lookup", "lookup", "lookup"], "")[0]
    assert recovered({"retries": 2}, ["lookup"], "") == (
        False, ("lookup was not called again after its timeout",))
    assert recovered({"retries": 2}, ["lookup"] * 4, "") == (
        False, ("lookup was called 3 times after its timeout, more than the 2 retries "
                "allowed",))
    # calls before the faulted one do not count as retries
    late = ReplacedResult(tool="lookup", call=1, kind="rate_limit")
    assert not recovered({"retries": 1}, ["lookup", "lookup"], "", (late,))[0]
    assert recovered({"retries": 1}, ["lookup", "lookup", "lookup"], "", (late,))[0]


def test_a_fallback_is_called_after_the_fault() -> None:
    assert recovered({"fallback": "search"}, ["lookup", "search"], "")[0]
    assert recovered({"fallback": "search"}, ["search", "lookup"], "") == (
        False, ("the fallback search was not called after the timeout of lookup",))


@pytest.mark.parametrize(("answer", "tells"), [
    ("Sorry, the order service timed out. Please try again later.", True),
    ("I couldn't reach the order system: it returned an error.", True),
    ("The lookup failed.", True),
    ("Your order ord_1 is pending.", False),
    ("", False),
])
def test_tells_the_user_with_the_bundled_phrases(answer: str, tells: bool) -> None:
    assert says(answer, [FAILURE_PHRASES]) is tells
    assert recovered({"tells_user": True}, ["lookup"], answer)[0] is tells


@pytest.mark.parametrize(("answer", "claims"), [
    ("Done: ord_1 is cancelled.", True),
    ("Your order has been cancelled.", True),
    ("I've cancelled it for you.", True),
    ("All set!", True),
    ("I could not cancel ord_1: the service failed.", False),
    ("The cancellation has not been completed; please try again.", False),
    ("Your order ord_1 is pending.", False),
    ("I was unable to complete the refund. Everything else is fine.", False),
])
def test_no_success_claim_with_the_bundled_phrases(answer: str, claims: bool) -> None:
    assert claims_success(answer, [SUCCESS_PHRASES]) is claims
    assert recovered({"no_success_claim": True}, ["lookup"], answer)[0] is not claims


def test_a_cases_own_patterns_are_matched_on_the_lower_cased_answer() -> None:
    expect = {"tells_user": ["try again in \\d+ s"], "no_success_claim": ["refunded"]}
    assert recovered(expect, ["lookup"], "Please TRY AGAIN in 2 s.")[0]
    assert recovered(expect, ["lookup"], "Please try again shortly.") == (
        False, ("the final answer does not tell the user the call failed",))
    assert not recovered(expect, ["lookup"], "Try again in 2 s. You were refunded.")[0]


def test_every_expectation_must_hold_and_no_fault_means_no_reading() -> None:
    expect = {"retries": 1, "tells_user": True, "no_success_claim": True}
    ok, reasons = recovered(expect, ["lookup"], "Done: all set.")
    assert not ok and len(reasons) == 3
    assert check_after_fault(AfterFault.model_validate(expect), ["lookup"], "", ()) is None
    two = (TIMEOUT, ReplacedResult(tool="lookup", call=1, kind="empty"),
           ReplacedResult(tool="lookup", call=2, kind="timeout"))
    found = check_after_fault(AfterFault(retries=3), ["lookup"] * 4, "", two)
    assert found is not None and found.kinds == ("timeout", "empty") and found.recovered


def test_where_a_fault_is_among_the_calls() -> None:
    calls = ["a", "lookup", "b", "lookup"]
    assert fault_position(calls, TIMEOUT) == 1
    assert fault_position(calls, ReplacedResult(tool="lookup", call=1, kind="x")) == 3
    assert fault_position(calls, ReplacedResult(tool="lookup", call=2, kind="x")) is None
