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
from live_judge import run
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


def spec(root: Path, name: str, base_url: str, min_items: int = 3) -> Path:
    """A copy of the shipped judge's prompt, pointed at the loopback, with low thresholds."""
    shutil.copy(ROOT / "judges" / f"{name}.md", root / f"{name}.md")
    path = root / f"{name}.toml"
    path.write_text(
        f'name = "{name}"\nmodel = "openai/judge-2026-01-01"\napi_base = "{base_url}"\n'
        f'api_key_env = "{KEY_ENV}"\nprompt = "{name}.md"\ndimensions = ["{name}"]\n'
        "[parameters]\ntemperature = 0\nsamples = 1\n"
        f"[thresholds]\ntpr = 0.9\ntnr = 0.9\nmin_items_per_class = {min_items}\n")
    return path


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
    judge = load_judge(spec(tmp_path, "answer_kind", loopback.base_url))
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
    judge = load_judge(spec(tmp_path, "claim_support", loopback.base_url, min_items=4))
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
    judge = load_judge(spec(tmp_path, "answer_kind", loopback.base_url))
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
    path = spec(tmp_path, "answer_kind", "http://127.0.0.1:9")
    path.write_text(path.read_text().replace('["answer_kind"]', '["answer_kind", "arguments"]'))
    with pytest.raises(InputError) as raised:
        load_judge(path)
    assert raised.value.field == "dimensions" and "a judge of its own" in raised.value.message


@pytest.mark.slow
def test_the_cli_calibrates_the_answer_kind_judge_and_says_why_it_is_void(
    tmp_path: Path, loopback: Loopback, callgate_exe: str, cli_env: dict[str, str]
) -> None:
    path = spec(tmp_path, "answer_kind", loopback.base_url)
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
