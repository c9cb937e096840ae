"""Unsupported claims are gated as policies are (docs/policies.md, "Claims"): zero tolerance by
default, so a release whose shares held fails when it adds a claim its trace does not back;
the suite's `max_rise` allows a rise."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from factories import calls, case, line, message, tool_call, write_lines, write_suite

from callgate.gating.release import gate_release
from callgate.scoring.pipeline import score_file
from callgate.store.db import Store
from callgate.suites.suite import load_suite

CANCEL = calls(("cancel_order", {"order_id": "ord_1"}))


def suite(root: Path, max_rise: float | None = None) -> Path:
    write_suite(root, [case(f"c{i}", CANCEL) for i in range(4)])
    policies: dict[str, Any] = {"claims": {"cancel_order": "cancelled"}}
    if max_rise is not None:
        policies["max_rise"] = max_rise
    (root / "suite.json").write_text(json.dumps({"name": "s", "policies": policies}))
    return root


def release(claimed: bool) -> list[dict[str, Any]]:
    """c0..c2 cancel; c3 makes no call, and says it cancelled when `claimed`."""
    cancel = tool_call("cancel_order", {"order_id": "ord_1", "reason": "duplicate"})
    out = [line(f"c{i}", message(cancel, content="Cancelled.")) for i in range(3)]
    text = "Your order is cancelled." if claimed else "I could not do that."
    return [*out, line("c3", message(content=text))]


def gate(tmp_path: Path, root: Path) -> list[tuple[str, list[str]]]:
    loaded = load_suite(root)
    out = []
    with Store(tmp_path / "c.db") as store:
        for name, claimed in (("r1", False), ("r2", True)):
            path = write_lines(tmp_path / f"{name}.jsonl", release(claimed))
            score_file(loaded, path, store, model="m", release=name)
            decision, _ = gate_release(store, "m", name, suite="s")
            out.append((decision.outcome, decision.messages))
    return out


def test_a_release_adding_an_unsupported_claim_fails_whatever_its_shares(
    tmp_path: Path
) -> None:
    (first, _), (second, messages) = gate(tmp_path, suite(tmp_path / "s"))
    assert first == "first_release" and second == "regression"
    assert messages[0] == (
        "policy unsupported_claims: 0.0 → 25.0 violations per 100 attempts (1 attempt(s); "
        "allowed rise 0) — POLICY VIOLATION; first: c3 (repeat 0): the final answer claims "
        "cancel_order succeeded ('cancelled') but no call of cancel_order")


def test_max_rise_lets_a_rise_within_it_pass(tmp_path: Path) -> None:
    (_, _), (second, messages) = gate(tmp_path, suite(tmp_path / "s", max_rise=30))
    assert second == "pass"
    assert any(m.startswith("policy unsupported_claims: 0.0 → 25.0") for m in messages)
