"""Claims the trace does not back (issue 37 point 3, its deterministic part, docs/policies.md):
a write tool's success claim (phrases or a regex) in the final answer with no successful call
of that tool is a violation of `unsupported_claims`, single- and multi-turn, with and without
an environment answering the calls; bad claims are refused naming the field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from factories import calls, case, line, message, tool_call, write_suite
from multiturn import ENV_PY, assistant, c, env_suite, score
from policy_verdicts import reasons, scored

from callgate.checks.claims import unsupported_claims
from callgate.checks.parsing import ParsedCall
from callgate.errors import InputError
from callgate.suites.policies import Policies
from callgate.suites.suite import load_suite

CANCEL = calls(("cancel_order", {"order_id": "ord_1"}))
CLAIMS = {"claims": {"cancel_order": ["cancelled", "canceled"]}}


def suite_with(root: Path, policies: dict[str, Any], cases: list[dict[str, Any]],
               environment: bool = False) -> Path:
    if environment:
        env_suite(root, cases, ENV_PY)
    else:
        write_suite(root, cases)
    meta = {"name": "s", "policies": policies, **({"environment": "env:Shop"}
                                                   if environment else {})}
    (root / "suite.json").write_text(json.dumps(meta))
    return root


def said(case_id: str, text: str, *made: dict[str, Any]) -> dict[str, Any]:
    return line(case_id, message(*made, content=text))


def test_a_single_turn_claim_without_the_call_is_flagged_and_with_it_is_not(
    tmp_path: Path
) -> None:
    root = suite_with(tmp_path / "s", CLAIMS, [case("lied", CANCEL), case("did", CANCEL),
                                               case("quiet", CANCEL)])
    cancel = tool_call("cancel_order", {"order_id": "ord_1", "reason": "duplicate"})
    got = scored(tmp_path, root, [
        said("lied", "Done: your order ord_1 has been Cancelled."),
        said("did", "I am cancelling it now; it will be cancelled shortly.", cancel),
        said("quiet", "Which order do you mean?"),
    ])
    assert reasons(got["lied"]) == [("unsupported_claims", (
        "the final answer claims cancel_order succeeded ('cancelled') but no call of "
        "cancel_order"))]
    assert got["lied"].tool == "missing_call"  # the tool verdict is its own
    assert got["did"].violations == () and got["quiet"].violations == ()


def test_phrases_match_whole_words_only_and_a_regex_is_searched(tmp_path: Path) -> None:
    policies = {"claims": {"cancel_order": {"regex": "(has|have) been cancel+ed"}}}
    root = suite_with(tmp_path / "s", policies, [case("a", CANCEL), case("b", CANCEL)])
    got = scored(tmp_path, root, [said("a", "It has been canceled."),
                                  said("b", "It was cancelled.")])
    assert [v.policy for v in got["a"].violations] == ["unsupported_claims"]
    assert "regex" in got["a"].violations[0].reason
    assert got["b"].violations == ()  # the regex asks for "has been"
    claims = Policies.model_validate({"claims": {"cancel_order": "cancelled"}}).claims
    assert claims is not None
    assert unsupported_claims(claims, "uncancelledness", []) == ()  # not the word


def test_a_multi_turn_claim_after_a_call_the_environment_refused_is_flagged(
    tmp_path: Path
) -> None:
    final = {"type": "trajectory", "mode": "superset", "args": "ignore",
             "calls": [{"tool": "cancel_order", "args": {}}]}
    root = suite_with(tmp_path / "s", CLAIMS, [
        case("refused", final, state={"orders": {"ord_3": {"status": "shipped"}}}),
        case("done", final, state={"orders": {"ord_1": {"status": "pending"}}})],
        environment=True)
    got = scored(tmp_path, root, [
        {"case_id": "refused", "repeat": 0, "turns": [
            assistant(c("cancel_order", order_id="ord_3", reason="duplicate")),
            assistant(content="Your order is cancelled.", turn=1)]},
        {"case_id": "done", "repeat": 0, "turns": [
            assistant(c("cancel_order", order_id="ord_1", reason="duplicate")),
            assistant(content="Your order is cancelled.", turn=1)]},
    ])
    assert reasons(got["refused"]) == [("unsupported_claims", (
        "the final answer claims cancel_order succeeded ('cancelled') but its 1 call(s) "
        "failed"))]
    assert got["done"].violations == ()


def test_only_the_final_answer_is_read_and_a_case_can_switch_claims_off(
    tmp_path: Path
) -> None:
    root = suite_with(tmp_path / "s", CLAIMS, [
        case("early", CANCEL), case("off", CANCEL, policies={"claims": None})])
    got = scored(tmp_path, root, [
        {"case_id": "early", "repeat": 0, "turns": [
            assistant(content="Cancelled? Let me look."),
            assistant(content="I could not find that order.", turn=1)]},
        said("off", "Cancelled."),
    ])
    assert got["early"].violations == () and got["off"].violations == ()


def test_unreadable_arguments_are_no_successful_call() -> None:
    claims = Policies.model_validate(CLAIMS).claims
    broken = ParsedCall(0, "cancel_order", None, "Expecting value")
    assert [v.policy for v in unsupported_claims(claims, "Cancelled.", [broken])] == [
        "unsupported_claims"]
    made = ParsedCall(0, "cancel_order", {"order_id": "ord_1"}, None)
    assert unsupported_claims(claims, "Cancelled.", [made], [{"error": "shipped"}])
    assert unsupported_claims(claims, "Cancelled.", [made], [{"status": "cancelled"}]) == ()


@pytest.mark.parametrize(("claims", "field"), [
    ({"delete_everything": "deleted"}, "policies.claims.delete_everything"),
    ({"cancel_order": []}, "policies.claims"),
    ({"cancel_order": {"regex": "(a"}}, "policies.claims"),
    ({"cancel_order": {"words": ["x"]}}, "policies.claims"),
])
def test_bad_claims_are_refused_naming_the_field(tmp_path: Path, claims: dict[str, Any],
                                                 field: str) -> None:
    root = suite_with(tmp_path / "s", {"claims": claims}, [case("a", CANCEL)])
    with pytest.raises(InputError) as raised:
        load_suite(root)
    assert raised.value.field is not None and raised.value.field.startswith(field)
    assert raised.value.path.endswith("suite.json")


def test_declared_claims_are_a_policy_of_the_suite(tmp_path: Path) -> None:
    suite = load_suite(suite_with(tmp_path / "s", CLAIMS, [case("a", CANCEL)]))
    assert suite.policy_names() == ["unsupported_claims"]
    result = score(tmp_path, suite, [said("a", "Cancelled!")])
    figures = result.scores.policies
    assert figures is not None
    assert figures.by_policy["unsupported_claims"].violations == 1
