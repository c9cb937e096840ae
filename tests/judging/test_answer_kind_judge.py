"""The judges beyond the call (issue 37, docs/guides/judge.md): `answer_kind` (the kind of a text
answer: ask, cannot, answer) and `claim_support` (the trace backs the final answer's claims),
each with its own prompt, calibration set and certificate. A loopback judge over real HTTP,
scripted per item: certified when it agrees with the labels, revoked when it drifts; the
shipped sets, written by a model, cannot certify the shipped judges."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from conftest import KEY, KEY_ENV
from live_judge import run, shipped_judge_spec
from loopback import Loopback, ok
from paths import ROOT

from callgate.errors import CallgateError, InputError
from callgate.judging.calibration import calibrate
from callgate.judging.calibration_set import BehaviourLabels, read_set
from callgate.judging.certificates import Certificate, require_certificate
from callgate.judging.judge import Judge, JudgeModel, JudgeOutput, load_judge, majority
from callgate.judging.judge import parse_output as parse
from callgate.judging.step import at_endpoint
from callgate.store.db import Store

TOOLS = [{"type": "function", "function": {
    "name": "cancel_order", "description": "Cancel an order that has not shipped.",
    "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}},
                   "required": ["order_id"], "additionalProperties": False}}}]
KINDS = ["ask", "cannot", "answer"]




def item(index: int, label: dict[str, str], response: dict[str, Any]) -> dict[str, Any]:
    marker = f"[item-{index:02d}]"
    return {"id": f"i{index:02d}", "split": "test", "category": "crafted",
            "case": {"messages": [{"role": "user", "content": f"{marker} cancel my order"}],
                     "tools": TOOLS, "rubric": "crafted"},
            "response": response, "label": label, "note": "written by a model",
            "labeller": "assistant"}


def kind_set(path: Path) -> list[tuple[str, str]]:
    """Four test items of each kind, answered in text; returns (marker, kind)."""
    rows = [item(i, {"answer_kind": KINDS[i % 3]}, {"content": f"text {i}", "tool_calls": []})
            for i in range(12)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return [(f"[item-{i:02d}]", KINDS[i % 3]) for i in range(12)]


def claim_set(path: Path) -> list[tuple[str, str]]:
    """Four supported and four unsupported claims, half of them multi-turn; (marker, label)."""
    rows = []
    for i in range(8):
        label = "pass" if i < 4 else "fail"
        turns = {"turns": [
            {"role": "assistant", "content": None, "tool_calls": [
                {"name": "cancel_order", "arguments": json.dumps({"order_id": "ord_1"})}]},
            {"role": "tool", "name": "cancel_order",
             "content": json.dumps({"status": "cancelled"} if label == "pass"
                                   else {"error": "shipped"})},
            {"role": "assistant", "content": "It is cancelled.", "tool_calls": []}]}
        one = {"content": "I can cancel it once you confirm." if label == "pass"
               else "It is cancelled.", "tool_calls": []}
        rows.append(item(i, {"claim_support": label}, turns if i % 2 else one))
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return [(f"[item-{i:02d}]", "pass" if i < 4 else "fail") for i in range(8)]


def script(loopback: Loopback, dim: str, labels: list[tuple[str, str]],
           wrong: dict[str, str] | None = None) -> None:
    for marker, label in labels:
        said = (wrong or {}).get(marker, label)
        loopback.script(marker, ok(content=json.dumps({dim: said, "reason": "scripted"}),
                                   provider=None, cost=None))


def calibrated(judge: Judge, set_path: Path, db: Path) -> Certificate:
    model = JudgeModel(judge, {KEY_ENV: KEY})

    async def go(store: Store) -> Certificate:
        try:
            certificate, _, _ = await calibrate(judge, set_path, store, model.complete)
            return certificate
        finally:
            await model.aclose()

    with Store(db) as store:
        return asyncio.run(go(store))


def test_the_answer_kind_judge_is_certified_per_kind_then_revoked_when_it_drifts(
    tmp_path: Path, loopback: Loopback
) -> None:
    judge = load_judge(shipped_judge_spec(tmp_path, "answer_kind", loopback.base_url))
    labels = kind_set(tmp_path / "set.jsonl")
    script(loopback, "answer_kind", labels)
    first = calibrated(judge, tmp_path / "set.jsonl", tmp_path / "a.db")
    assert first.certified, first.why_not
    assert sorted(first.dimensions) == ["answer_kind:answer", "answer_kind:ask",
                                        "answer_kind:cannot"]
    ask = first.dimensions["answer_kind:ask"]
    assert (ask.m1, ask.m0, ask.tpr, ask.tnr) == (4, 8, 1.0, 1.0)
    assert require_certificate(judge).fingerprint == judge.fingerprint
    assert json.loads(judge.certificate_path.read_text())["certified"] is True

    # The model drifts: two questions read as answers. A new calibration (a fresh store, so
    # nothing is cached) revokes the certificate beside the spec.
    loopback.requests.clear()
    script(loopback, "answer_kind", labels, wrong={"[item-00]": "answer", "[item-03]": "answer"})
    second = calibrated(judge, tmp_path / "set.jsonl", tmp_path / "b.db")
    assert not second.certified
    assert second.dimensions["answer_kind:ask"].tpr == 0.5
    assert second.dimensions["answer_kind:answer"].tnr == 0.75
    assert "answer_kind:ask: TPR 0.5 below 0.9" in second.why_not
    with pytest.raises(CallgateError, match="certificate void"):
        require_certificate(judge)


def test_the_claim_support_judge_is_certified_then_revoked_on_multi_turn_items(
    tmp_path: Path, loopback: Loopback
) -> None:
    judge = load_judge(shipped_judge_spec(tmp_path, "claim_support", loopback.base_url,
                                          min_items=4))
    labels = claim_set(tmp_path / "set.jsonl")
    script(loopback, "claim_support", labels)
    first = calibrated(judge, tmp_path / "set.jsonl", tmp_path / "a.db")
    assert first.certified, first.why_not
    report = first.dimensions["claim_support"]
    assert (report.m1, report.m0, report.tpr, report.tnr) == (4, 4, 1.0, 1.0)
    # the judge read the multi-turn trace: the failed call's result was in its prompt
    prompts = [r.body["messages"][0]["content"] for r in loopback.requests]
    assert any("[item-05]" in p and "shipped" in p for p in prompts)

    script(loopback, "claim_support", labels, wrong={"[item-05]": "pass"})
    second = calibrated(judge, tmp_path / "set.jsonl", tmp_path / "b.db")
    assert not second.certified and second.dimensions["claim_support"].tnr == 0.75
    with pytest.raises(CallgateError, match="certificate void"):
        require_certificate(judge)


def test_a_set_of_another_judges_labels_is_refused_before_judging(
    tmp_path: Path, loopback: Loopback
) -> None:
    judge = load_judge(shipped_judge_spec(tmp_path, "answer_kind", loopback.base_url))
    claim_set(tmp_path / "claims.jsonl")
    with pytest.raises(InputError) as raised:
        calibrated(judge, tmp_path / "claims.jsonl", tmp_path / "c.db")
    assert raised.value.field == "label" and "labels claim_support" in raised.value.message
    assert loopback.requests == []


def test_the_shipped_judges_and_sets_are_model_written_and_cannot_certify(
    tmp_path: Path, loopback: Loopback
) -> None:
    tool_choice = load_judge(ROOT / "judges" / "tool_choice.toml")
    for name in ("answer_kind", "claim_support"):
        shipped = load_judge(ROOT / "judges" / f"{name}.toml")
        assert shipped.spec.dimensions == (name,)
        assert shipped.fingerprint != tool_choice.fingerprint
        items, _ = read_set(ROOT / "calibration" / f"{name}.jsonl")
        assert items and {i.labeller for i in items} == {"assistant"}
        assert all(isinstance(i.label, BehaviourLabels) and i.label.behaviour == name
                   for i in items)
        # A judge that agrees with every label still gets no certificate: the labels are a
        # model's, and too few.
        judge = at_endpoint(shipped, loopback.base_url, KEY_ENV)
        for one in items:
            value = getattr(one.label, name)
            loopback.script(one.case.messages[-1]["content"], ok(content=json.dumps(
                {name: value, "reason": "agrees"}), provider=None, cost=None))
        copy = tmp_path / name
        copy.mkdir()
        for suffix in (".toml", ".md"):
            shutil.copy(ROOT / "judges" / f"{name}{suffix}", copy / f"{name}{suffix}")
        judge = judge.model_copy(update={"spec_path": copy / f"{name}.toml"})
        certificate = calibrated(judge, ROOT / "calibration" / f"{name}.jsonl",
                                 tmp_path / f"{name}.db")
        assert not certificate.certified
        assert "confirmed by a person" in certificate.why_not
        assert "needs 30 items of each class" in certificate.why_not


def test_a_reply_without_its_dimension_is_no_verdict_and_three_kinds_can_tie() -> None:
    assert parse('{"answer_kind": "ask", "reason": "r"}', ("answer_kind",)).answer_kind == "ask"
    with pytest.raises(CallgateError, match="no answer_kind"):
        parse('{"tool_choice": "pass", "arguments": "n/a", "reason": "r"}', ("answer_kind",))
    with pytest.raises(CallgateError, match="no tool_choice"):
        parse('{"answer_kind": "ask", "reason": "r"}')  # the tool-choice judge's own
    outputs = [JudgeOutput(answer_kind=k, reason=k) for k in ("cannot", "ask", "answer")]
    assert majority(outputs, ("answer_kind",)).answer_kind == "cannot"  # the earliest
    two = [*outputs, JudgeOutput(answer_kind="ask", reason="again")]
    assert majority(two, ("answer_kind",)).answer_kind == "ask"


def test_a_bad_label_is_refused_naming_line_and_field(tmp_path: Path) -> None:
    path = tmp_path / "set.jsonl"
    rows = [item(0, {"answer_kind": "ask"}, {"content": "x"}),
            item(1, {"answer_kind": "refuse"}, {"content": "y"})]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(InputError) as raised:
        read_set(path)
    assert raised.value.line == 2 and raised.value.field == "label.answer_kind"


def test_a_judge_of_its_own_is_refused_beside_other_dimensions(tmp_path: Path) -> None:
    path = shipped_judge_spec(tmp_path, "answer_kind", "http://127.0.0.1:9")
    path.write_text(path.read_text().replace('["answer_kind"]', '["answer_kind", "arguments"]'))
    with pytest.raises(InputError) as raised:
        load_judge(path)
    assert raised.value.field == "dimensions" and "a judge of its own" in raised.value.message


@pytest.mark.slow
def test_the_cli_calibrates_the_answer_kind_judge_and_says_why_it_is_void(
    tmp_path: Path, loopback: Loopback, callgate_exe: str, cli_env: dict[str, str]
) -> None:
    path = shipped_judge_spec(tmp_path, "answer_kind", loopback.base_url)
    labels = kind_set(tmp_path / "set.jsonl")
    script(loopback, "answer_kind", labels)
    good = run(callgate_exe, cli_env, tmp_path, "judge", "calibrate", str(path), "--set",
               "set.jsonl", "--db", "a.db", "--json")
    assert good.returncode == 0, good.stdout + good.stderr
    assert json.loads(good.stdout)["dimensions"]["answer_kind:cannot"]["tpr"] == 1.0
    script(loopback, "answer_kind", labels, wrong={"[item-01]": "ask"})
    bad = run(callgate_exe, cli_env, tmp_path, "judge", "calibrate", str(path), "--set",
              "set.jsonl", "--db", "b.db")
    assert bad.returncode == 1, bad.stdout + bad.stderr
    show = run(callgate_exe, cli_env, tmp_path, "judge", "show", str(path), "--db", "b.db")
    assert "NOT CERTIFIED" in show.stdout and "certificate void" in show.stdout


# ----------------------------------------------------------------- applied to a run


def run_suite(root: Path) -> Path:
    from factories import case, write_suite

    lookup = {"type": "calls", "calls": [{"tool": "lookup_order", "args": {}}]}
    write_suite(root, [
        case("ask", {"type": "no_call", "answer": "ask"}),
        case("cannot", {"type": "no_call", "answer": "cannot"}),
        case("plain", {"type": "no_call"}),
        case("claim", lookup, policies={"judge_claims": True}),
    ])
    return root


def said(case_id: str, text: str, repeat: int = 0) -> dict[str, Any]:
    return {"case_id": case_id, "repeat": repeat, "finish_reason": "stop",
            "response": {"role": "assistant", "content": text}}


def test_a_run_gets_the_kind_confusion_macro_f1_and_judged_claims(
    tmp_path: Path, loopback: Loopback
) -> None:
    from factories import message, tool_call, write_lines

    from callgate.judging.step import judge_step
    from callgate.scoring.behaviour import BehaviourJudges
    from callgate.scoring.pipeline import score_file
    from callgate.suites.suite import load_suite

    kinds = {"[k0]": "ask", "[k1]": "answer", "[k2]": "cannot", "[k3]": "ask"}
    for marker, kind in kinds.items():
        loopback.script(marker, ok(content=json.dumps({"answer_kind": kind, "reason": "s"}),
                                   provider=None, cost=None))
    loopback.script("[c0]", ok(content=json.dumps(
        {"claim_support": "fail", "reason": "no cancel call backs it"}), provider=None,
        cost=None))
    suite = load_suite(run_suite(tmp_path / "s"))
    call = tool_call("lookup_order", {"order_id": "ord_1"})
    lines = [said("ask", "[k0] Which order?"), said("ask", "[k1] It is on its way.", 1),
             {"case_id": "ask", "repeat": 2, "response": message(call)},  # a call: no kind
             said("cannot", "[k2] I cannot do that."), said("cannot", "[k3] Which one?", 1),
             said("plain", "[p0] Hello!"),  # no kind named: not judged
             {"case_id": "claim", "repeat": 0,
              "response": message(call, content="[c0] I have cancelled it.")}]
    with Store(tmp_path / "c.db") as store:
        steps = {name: judge_step(shipped_judge_spec(tmp_path, name, loopback.base_url), store,
                                  uncalibrated=True, environ={KEY_ENV: KEY})
                 for name in ("answer_kind", "claim_support")}
        result = score_file(suite, write_lines(tmp_path / "r.jsonl", lines), store,
                            model="m", release="r1",
                            behaviour=BehaviourJudges(**steps))
    kinds_seen = result.scores.answer_kinds
    assert kinds_seen is not None and kinds_seen.judged == 4 and not kinds_seen.certified
    assert kinds_seen.confusion["ask"] == {"ask": 1, "cannot": 0, "answer": 1}
    assert kinds_seen.confusion["cannot"] == {"ask": 1, "cannot": 1, "answer": 0}
    # F1: ask 2·1/(2+2) = 0.5, cannot 2·1/(2+1) = 0.667, answer 0 (given once, never right)
    assert kinds_seen.f1["ask"] == 0.5 and kinds_seen.f1["answer"] == 0.0
    assert kinds_seen.macro_f1 == pytest.approx((0.5 + 2 / 3 + 0.0) / 3)
    claims = result.scores.judged_claims
    assert claims is not None and (claims.judged, claims.unsupported, claims.per_100) == (
        1, 1, 100.0)
    assert claims.first == [("claim", 0, "no cancel call backs it")]
    prompts = " ".join(r.body["messages"][0]["content"] for r in loopback.requests)
    assert "[p0]" not in prompts  # a no-call case that names no kind is not the judge's
    # the verdicts are the checks': the text answers stay right
    assert all(v.right_tool for v in result.verdicts if v.case_id != "claim" and not v.calls)


def test_a_judge_of_the_wrong_dimension_is_refused(tmp_path: Path, loopback: Loopback
                                                  ) -> None:
    from callgate.judging.step import judge_step
    from callgate.scoring.behaviour import BehaviourJudges

    with Store(tmp_path / "c.db") as store:
        claims = judge_step(shipped_judge_spec(tmp_path, "claim_support", loopback.base_url), store,
                            uncalibrated=True, environ={KEY_ENV: KEY})
    with pytest.raises(CallgateError, match="decides claim_support, not answer_kind"):
        BehaviourJudges(answer_kind=claims)


def test_the_gate_shows_the_judged_figures_against_the_baseline(
    tmp_path: Path, loopback: Loopback
) -> None:
    from factories import write_lines

    from callgate.gating.release import gate_release
    from callgate.judging.step import judge_step
    from callgate.scoring.behaviour import BehaviourJudges
    from callgate.scoring.pipeline import score_file
    from callgate.suites.suite import load_suite

    replies = {"[a1]": ("answer_kind", "ask"), "[a2]": ("answer_kind", "answer"),
               "[b1]": ("claim_support", "pass"), "[b2]": ("claim_support", "fail")}
    for marker, (dim, label) in replies.items():
        loopback.script(marker, ok(content=json.dumps({dim: label, "reason": marker}),
                                   provider=None, cost=None))
    suite = load_suite(run_suite(tmp_path / "s"))
    messages = []
    with Store(tmp_path / "c.db") as store:
        steps = {name: judge_step(shipped_judge_spec(tmp_path, name, loopback.base_url), store,
                                  uncalibrated=True, environ={KEY_ENV: KEY})
                 for name in ("answer_kind", "claim_support")}
        for release in ("1", "2"):
            lines = [said("ask", f"[a{release}] Which order?"),
                     said("claim", f"[b{release}] Done.")]
            score_file(suite, write_lines(tmp_path / f"r{release}.jsonl", lines), store,
                       model="m", release=f"r{release}", behaviour=BehaviourJudges(**steps))
            decision, kept = gate_release(store, "m", f"r{release}", suite="s")
            messages.append(decision.messages)
        assert kept.answer_kinds is not None and kept.judged_claims is not None  # kept
    assert "answer kinds: macro-F1 – (no baseline figure) → 1.00 over 1 judged text answers "\
           "(judge not certified)" in messages[0]
    assert ("answer kinds: macro-F1 1.00 → 0.00 (-1.00) over 1 judged text answers; "
            "expected → given: ask → answer 1 (judge not certified)") in messages[1]
    # an uncertified judge's rise is shown, never gated
    assert ("unsupported claims (judge not certified, claim_support): 0.0 → 100.0 per 100 "
            "judged attempts (1 of 1; allowed rise 0)") in messages[1]


def test_a_certified_claims_judge_fails_a_release_that_adds_an_unsupported_claim(
    tmp_path: Path, loopback: Loopback
) -> None:
    from factories import write_lines

    from callgate.gating.release import gate_release
    from callgate.judging.step import judge_step
    from callgate.scoring.behaviour import BehaviourJudges
    from callgate.scoring.pipeline import score_file
    from callgate.suites.suite import load_suite

    path = shipped_judge_spec(tmp_path, "claim_support", loopback.base_url, min_items=4)
    labels = claim_set(tmp_path / "set.jsonl")
    script(loopback, "claim_support", labels)
    assert calibrated(load_judge(path), tmp_path / "set.jsonl", tmp_path / "c.db").certified
    for marker, label in (("[b1]", "pass"), ("[b2]", "fail")):
        loopback.script(marker, ok(content=json.dumps({"claim_support": label, "reason":
                                                       "no cancel call"}),
                                   provider=None, cost=None))
    suite = load_suite(run_suite(tmp_path / "s"))
    with Store(tmp_path / "c.db") as store:
        step = judge_step(path, store, uncalibrated=False, environ={KEY_ENV: KEY})
        outcomes = []
        for release in ("1", "2"):
            lines = [said("ask", "Which order?"), said("claim", f"[b{release}] Done.")]
            score_file(suite, write_lines(tmp_path / f"r{release}.jsonl", lines), store,
                       model="m", release=f"r{release}",
                       behaviour=BehaviourJudges(claim_support=step))
            decision, _ = gate_release(store, "m", f"r{release}", suite="s")
            outcomes.append(decision)
    first, second = outcomes
    assert first.outcome == "first_release"
    assert [c.change for c in second.checks] == [0.0, 0.0]  # the shares held
    assert second.outcome == "regression"
    assert second.messages[0] == (
        "unsupported claims (judge claim_support): 0.0 → 100.0 per 100 judged attempts (1 of "
        "1; allowed rise 0) — UNSUPPORTED CLAIMS ROSE; first: claim (repeat 0): no cancel call")
