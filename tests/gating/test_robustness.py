"""Robustness (gating/robustness.py, cli/perturbing.py): a release run again with its tool
surface worded another way, over real HTTP on 127.0.0.1, against a loopback model that finds
tools by name (tests/name_model.py). Masking the names must drop the right-tool share by what the
model was scripted to, within the paired interval; reordering must not move it; the perturbed
runs are stored beside the clean run, never as a release; the gate decides on constructed
releases."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import KEY, KEY_ENV, LOOKUP, write_suite
from factories import TRACK_SHIPMENT
from live_runs import candidate, settings
from loopback import Loopback, ok, tool_call, turn_of
from name_model import NameModel

from callgate.cli.perturbing import PerturbedRuns, run_perturbed, specs_of
from callgate.gating.release import gate_release
from callgate.gating.robustness import gate, worst_kept
from callgate.running.run import LiveRun, run_live
from callgate.running.settings import RunSettings
from callgate.store.db import Store
from callgate.suites.suite import Suite, load_suite

TOOLS = [LOOKUP, TRACK_SHIPMENT]
CASES = 80


def _case(index: int) -> dict[str, Any]:
    tool = "lookup_order" if index % 2 == 0 else "track_shipment"
    case_id = f"c{index:02d}"
    return {"id": case_id, "tags": ["clean"],
            "messages": [{"role": "system", "content": "You help with orders."},
                         {"role": "user", "content": f"[{case_id}] {tool} ord_1"}],
            "expect": {"type": "calls", "calls": [{"tool": tool, "args": {"order_id": "ord_1"}}]}}


@pytest.fixture
def suite(tmp_path: Path) -> Suite:
    return load_suite(write_suite(tmp_path / "suite", [_case(i) for i in range(CASES)], TOOLS))


def _perturbed(server: Loopback, store: Store, suite: Suite, release: str, kinds: list[str],
               seed: int = 0, max_drop: float | None = None, repeats: int = 2) -> PerturbedRuns:
    def run(on: Suite, with_settings: RunSettings) -> LiveRun:
        return run_live(on, candidate(server), store, release=release, settings=with_settings,
                        environ={KEY_ENV: KEY})

    return run_perturbed(store, suite, "cand", release, settings(repeats=repeats),
                         specs_of(kinds, seed), run, max_drop=max_drop, max_excluded=0.2)


def test_masking_names_drops_right_tool_by_the_scripted_amount(suite: Suite, tmp_path: Path
                                                               ) -> None:
    p = 0.6  # masked, the model finds the tool by its description 60% of the time
    drops = []
    for seed in (1, 2, 3):
        model = NameModel(TOOLS, p=p, seed=seed)
        with Loopback(default=model) as server, Store(tmp_path / f"s{seed}.db") as store:
            out = _perturbed(server, store, suite, "r1",
                             ["mask-names", "reorder-tools", "reorder-params"], seed=seed)
        assert out.robustness is not None
        masked, tools, params = out.robustness.perturbations
        assert (masked.kind, tools.kind, params.kind) == (
            "mask-names", "reorder-tools", "reorder-params")
        figure = masked.right_tool
        assert figure is not None and figure.clean == 100.0
        assert figure.low <= 100 * (1 - p) <= figure.high, (seed, figure)
        assert masked.right_arguments is not None
        assert masked.right_arguments.drop == pytest.approx(figure.drop)
        drops.append(figure.drop)
        # the model reads names: reordering takes nothing
        for same in (tools, params):
            assert same.right_tool is not None and same.right_tool.drop == 0.0
            assert same.right_tool.worse == 0
        # the tools that lost calls, with what was called instead under the catalogue's names
        assert {loss.tool for loss in masked.lost} == {"lookup_order", "track_shipment"}
        for loss in masked.lost:
            assert set(loss.called_instead) == {"lookup_order", "track_shipment"} - {loss.tool}
        assert out.robustness.figure == pytest.approx(100 - figure.drop)
        assert out.robustness.worst == "mask-names"
        assert out.robustness.decision == "not_gated" and out.robustness.exit_code == 0
    assert sum(drops) / len(drops) == pytest.approx(100 * (1 - p), abs=8)


def test_perturbed_runs_sit_beside_the_clean_run_and_come_from_the_cache(
        suite: Suite, tmp_path: Path) -> None:
    with Loopback(default=NameModel(TOOLS, p=0.5)) as server, \
            Store(tmp_path / "callgate.db") as store:
        first = _perturbed(server, store, suite, "r1", ["mask-names", "prompt-format"])
        asked = len(server.requests)
        again = _perturbed(server, store, suite, "r1", ["mask-names", "prompt-format"])
        releases = store.runs("cand")
        clean = store.find_run(suite.name, "cand", "r1")
        perturbed = store.perturbed_runs(suite.name, "cand", "r1")
        masked_prompt = server.requests[CASES * 2]  # the first request of the masked run
    assert asked == 3 * CASES * 2  # clean, masked and reformatted: each its own requests
    assert len(server.requests) == asked  # the second time, every answer is stored
    assert again.clean.called == 0 and all(live.called == 0 for _, live in again.runs)
    assert first.robustness is not None and again.robustness is not None
    # the same figures, re-scored from the store (as new runs of the release)
    assert [p.model_dump(exclude={"run"}) for p in again.robustness.perturbations] == [
        p.model_dump(exclude={"run"}) for p in first.robustness.perturbations]
    assert again.robustness.figure == first.robustness.figure
    # the release is the clean run; each perturbation is kept beside it, marked
    assert [r["id"] for r in releases] == [clean["id"]] == [again.clean.result.run_id]
    # a perturbed run replaced only the run of its own perturbation
    assert sorted(r["id"] for r in perturbed) == sorted(
        live.result.run_id for _, live in again.runs)
    assert clean["perturbation"] is None
    assert sorted(r["perturbation"].split('"kind":"')[1].split('"')[0] for r in perturbed) == [
        "mask-names", "prompt-format"]
    names = {t["function"]["name"] for t in masked_prompt.body["tools"]}
    assert names == {"tool_1", "tool_2"}


def test_a_distractor_takes_the_calls_it_was_scripted_to(suite: Suite, tmp_path: Path) -> None:
    model = NameModel(TOOLS, p=1.0, seed=5, distracted=0.3)
    with Loopback(default=model) as server, Store(tmp_path / "callgate.db") as store:
        out = _perturbed(server, store, suite, "r1", ["distractor"], seed=5)
    assert out.robustness is not None
    (only,) = out.robustness.perturbations
    assert only.right_tool is not None and only.right_tool.low <= 30 <= only.right_tool.high
    distractors = {name for _, live in out.runs for name in live.result.suite.tools} - {
        "lookup_order", "track_shipment"}
    assert len(distractors) == 2
    assert {called for loss in only.lost for called in loss.called_instead} <= distractors


def _release(server: Loopback, store: Store, suite: Suite, release: str, max_drop: float | None
             ) -> PerturbedRuns:
    out = _perturbed(server, store, suite, release, ["mask-names"], max_drop=max_drop,
                     repeats=1)
    gate_release(store, "cand", release)  # the clean shares are the same: it is released
    return out


def test_the_gate_fails_a_release_that_lost_robustness(suite: Suite, tmp_path: Path) -> None:
    with Store(tmp_path / "callgate.db") as store:
        with Loopback(default=NameModel(TOOLS, p=0.9, seed=1)) as server:
            first = _release(server, store, suite, "r1", max_drop=10)
        with Loopback(default=NameModel(TOOLS, p=0.85, seed=2)) as server:
            close = _release(server, store, suite, "r2", max_drop=10)
        with Loopback(default=NameModel(TOOLS, p=0.4, seed=3)) as server:
            brittle = _perturbed(server, store, suite, "r3", ["mask-names"], max_drop=10,
                                 repeats=1)
            ungated = _perturbed(server, store, suite, "r3", ["mask-names"], repeats=1)
    assert first.robustness is not None and close.robustness is not None
    assert brittle.robustness is not None and ungated.robustness is not None
    # a first release: no baseline figure, recorded, passes
    assert first.robustness.baseline_release is None and first.robustness.decision == "pass"
    assert close.robustness.baseline_release == "r1"
    assert close.robustness.change == pytest.approx(
        close.robustness.figure - first.robustness.figure)
    assert abs(close.robustness.change) <= 10 and close.robustness.decision == "pass"
    assert brittle.robustness.baseline_release == "r2"
    assert close.robustness.figure - brittle.robustness.figure > 10
    assert brittle.robustness.decision == "regression" and brittle.robustness.exit_code == 1
    assert "FAIL" in brittle.robustness.lines()[-1]
    # off by default: the same figures, not gated
    assert ungated.robustness.decision == "not_gated" and ungated.robustness.exit_code == 0
    assert ungated.robustness.change == brittle.robustness.change


def test_gate_decisions_on_figures() -> None:
    assert gate(80.0, 95.0, None) == ("not_gated", "")
    assert gate(80.0, 95.0, 10)[0] == "regression"
    assert gate(85.0, 95.0, 10)[0] == "pass"  # exactly the allowed drop
    assert gate(99.0, 95.0, 0)[0] == "pass"
    assert gate(80.0, None, 10) == (
        "pass", "robustness gate: no baseline figure on the same perturbations; recorded, "
        "passes")
    assert gate(None, 95.0, 10)[0] == "inconclusive"
    assert worst_kept([]) == (None, None)


def test_a_bad_team_file_stops_before_any_call(suite: Suite, tmp_path: Path) -> None:
    (tmp_path / "names.json").write_text('{"lookup_order": "track_shipment"}')
    with Loopback(default=NameModel(TOOLS, p=1.0)) as server, \
            Store(tmp_path / "callgate.db") as store:
        with pytest.raises(Exception, match="already a tool's name"):
            _perturbed(server, store, suite, "r1", [f"rename={tmp_path / 'names.json'}"])
        assert server.requests == [] and store.runs() == []


def test_a_conversation_gets_its_results_under_masked_names(tmp_path: Path) -> None:
    """A case whose calls get scripted results: the masked call is answered as the tool it
    stands for, the next turn is sent the masked name back, and the trajectory is right."""
    described = LOOKUP["function"]["description"]

    def reply(request: dict[str, Any]) -> Any:
        if turn_of(request):
            return ok(content="It has shipped.")
        name = next(t["function"]["name"] for t in request["tools"]
                    if t["function"]["description"] == described)
        return ok(calls=[tool_call(name, {"order_id": "ord_1"}, "m0")])

    case = {"id": "loop", "messages": [{"role": "user", "content": "[loop] where is ord_1?"}],
            "expect": {"type": "trajectory", "calls": [{"tool": "lookup_order",
                                                        "args": {"order_id": "ord_1"}}]},
            "tool_results": [{"tool": "lookup_order", "result": {"status": "shipped"}}]}
    suite = load_suite(write_suite(tmp_path / "suite", [case], TOOLS))
    with Loopback(default=reply) as server, Store(tmp_path / "callgate.db") as store:
        out = _perturbed(server, store, suite, "r1", ["mask-names"], repeats=1)
        second = server.requests[-1].body["messages"]
    (_, masked), = out.runs
    assert masked.result.verdicts[0].right_arguments
    assert second[-2]["tool_calls"][0]["function"]["name"].startswith("tool_")
    assert json.loads(second[-1]["content"]) == {"status": "shipped"}
