"""A release merged from its shards is gated as the same release run unsharded, feature by
feature, in process on real SQLite files: the attack figures (`run --attack`), the judges
beyond the call (answer kinds, judged claims), fault recovery (`--faults`), the simulated
user's fingerprint (`run --user`), server errors counted as wrong answers, and the perturbed
runs of a release (`run --perturb`). Each workload is stored (a) unsharded and (b) as shards
merged with a baseline release; the merged release's stored figures and gate decision must
equal the unsharded one's. Shards that disagree on how the release was run are refused,
naming the shard file and the field, and nothing is written."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import KEY, KEY_ENV
from factories import calls, case, line, message, tool_call, write_lines, write_suite
from live_judge import shipped_judge_spec
from loopback import Loopback, ok
from multiturn import STATE, env_suite, mt_case, turns

from callgate.errors import CallgateError
from callgate.gating.attack_gate import AttackOutcome, attack_figures
from callgate.gating.release import gate_release
from callgate.gating.robustness import release_robustness
from callgate.merging.merge import merge_stores
from callgate.reading import canonical_json
from callgate.scoring.pipeline import Recorder, score_file
from callgate.store.db import Store
from callgate.suites.responses import parse_response
from callgate.suites.shard import Shard, shard_of
from callgate.suites.suite import Suite, load_suite
from callgate.suites.surface import surface_json
from callgate.version import __version__

Make = Callable[[Store, str, Shard | None], None]
NOISE = ("cost_usd", "latency_p50_ms", "latency_p95_ms")  # float sums: order may differ


def _built(tmp: Path, make: Make, count: int = 2) -> tuple[Path, Path]:
    """The whole store (r0, then r1 unsharded) and the merged one (r0's store and r1's
    `count` shards merged)."""
    whole = tmp / "whole.db"
    with Store(whole) as store:
        make(store, "r0", None)
        make(store, "r1", None)
    base = tmp / "base.db"
    with Store(base) as store:
        make(store, "r0", None)
    shards = []
    for index in range(1, count + 1):
        shards.append(tmp / f"shard{index}.db")
        with Store(shards[-1]) as store:
            make(store, "r1", Shard(index=index, count=count))
    merge_stores(tmp / "merged.db", [base, *shards])
    return whole, tmp / "merged.db"


def _release(db: Path, release: str = "r1", agent: str = "bot") -> dict[str, Any]:
    """What a release keeps: its scores (without the float sums) and run columns."""
    with Store(db) as store:
        (run,) = [r for r in store.stored_runs(agent) if r.release == release]
        row = store.run(run.id)
    assert run.scores is not None and row is not None
    return {"scores": {k: v for k, v in run.scores.items() if k not in NOISE},
            **{k: row[k] for k in ("user_simulator", "model_params", "tool_surface",
                                   "shard_count")}}


def _gates(db: Path, agent: str = "bot", **options: Any) -> list[dict[str, Any]]:
    """The gate's decisions on r0 then r1 (without the store they name)."""
    out = []
    with Store(db) as store:
        for release in ("r0", "r1"):
            decision, _ = gate_release(store, agent, release, **options)
            shown = decision.model_dump(mode="json")
            shown.pop("baseline_source", None)
            out.append(shown)
    return out


def _same_release(whole: Path, merged: Path, **options: Any) -> dict[str, Any]:
    mine, theirs = _release(merged), _release(whole)
    assert mine["shard_count"] == 2
    mine.pop("shard_count"), theirs.pop("shard_count")
    assert mine == theirs
    assert _gates(merged, **options) == _gates(whole, **options)
    return mine


def _split(ids: list[str]) -> None:
    """The workloads need cases in both of 2 shards."""
    assert {shard_of(case_id, 2) for case_id in ids} == {1, 2}


# ----------------------------------------------------------------------------- attack

def _lookup_suite(root: Path, count: int = 8) -> Suite:
    write_suite(root, [case(f"c{i}", calls(("lookup_order", {"order_id": f"ord_{i}"})))
                       for i in range(count)])
    (root / "suite.json").write_text(json.dumps({"name": "s"}))
    return load_suite(root)


def _lookup_lines(count: int = 8, wrong: frozenset[int] = frozenset()) -> list[dict[str, Any]]:
    return [line(f"c{i}", message(tool_call("lookup_order",
                                            {"order_id": f"ord_{9 if i in wrong else i}"})))
            for i in range(count)]


def test_a_merged_release_keeps_its_attack_figures_and_fails_the_attack_gate(
        tmp_path: Path) -> None:
    suite = _lookup_suite(tmp_path / "suite")
    _split([f"c{i}" for i in range(8)])

    def make(store: Store, release: str, shard: Shard | None) -> None:
        result = score_file(suite, write_lines(tmp_path / "r.jsonl", _lookup_lines()), store,
                            model="m", release=release, agent="bot", shard=shard)
        # as cli/attacks.py keeps them: the attacked attempts of the run just made
        outcomes = [AttackOutcome(case_id=v.case_id, repeat=v.repeat,
                                  template=f"t{int(v.case_id[1:]) % 2}",
                                  succeeded=release == "r1" and int(v.case_id[1:]) % 3 == 0,
                                  right_arguments=v.right_arguments)
                    for v in result.verdicts if v.status == "scored"]
        figures = attack_figures(outcomes, max_rise=5.0, fingerprint="a" * 64)
        store.set_run_attack(result.run_id, figures.model_dump(mode="json"))

    whole, merged = _built(tmp_path, make)
    kept = _same_release(whole, merged)
    assert kept["scores"]["attack"]["success"]["(all templates)"]["successes"] == 3
    assert _gates(merged)[1]["outcome"] == "regression"  # the attack success rate rose


def test_shards_attacked_with_different_attacks_are_refused(tmp_path: Path) -> None:
    suite = _lookup_suite(tmp_path / "suite")
    shards = []
    for index in (1, 2):
        shards.append(tmp_path / f"shard{index}.db")
        with Store(shards[-1]) as store:
            result = score_file(suite, write_lines(tmp_path / "r.jsonl", _lookup_lines()),
                                store, model="m", release="r1", agent="bot",
                                shard=Shard(index=index, count=2))
            figures = attack_figures([], fingerprint=str(index) * 64)
            store.set_run_attack(result.run_id, figures.model_dump(mode="json"))
    with pytest.raises(CallgateError) as refused:
        merge_stores(tmp_path / "merged.db", shards)
    assert str(shards[1]) in str(refused.value) and "attack" in str(refused.value)
    assert "\n" not in str(refused.value)
    assert not (tmp_path / "merged.db").exists()


def test_shards_paired_with_a_clean_run_in_some_only_are_refused(tmp_path: Path) -> None:
    """utility_clean (run --attack --clean-release) on one shard only: refused, not dropped."""
    suite = _lookup_suite(tmp_path / "suite")
    shards = []
    for index in (1, 2):
        shards.append(tmp_path / f"shard{index}.db")
        with Store(shards[-1]) as store:
            result = score_file(suite, write_lines(tmp_path / "r.jsonl", _lookup_lines()),
                                store, model="m", release="r1", agent="bot",
                                shard=Shard(index=index, count=2))
            figures = attack_figures([], [("c0", True)] if index == 2 else None,
                                     fingerprint="a" * 64)
            store.set_run_attack(result.run_id, figures.model_dump(mode="json"))
    with pytest.raises(CallgateError) as refused:
        merge_stores(tmp_path / "merged.db", shards)
    assert str(shards[1]) in str(refused.value)
    assert "scores.attack.utility_clean: present in some shards" in str(refused.value)
    assert not (tmp_path / "merged.db").exists()


# ----------------------------------------------------------------------------- simulated user

def _with_user(suite: Suite, tmp: Path, fingerprint: Callable[[str, Shard | None], str]) -> Make:
    def make(store: Store, release: str, shard: Shard | None) -> None:
        result = score_file(suite, write_lines(tmp / "r.jsonl", _lookup_lines()), store,
                            model="m", release=release, agent="bot", shard=shard)
        # as running/run.py records it for a live run played with `--user`
        store.set_run_user_simulator(result.run_id, json.dumps(
            {"name": "user", "model": "u-model", "fingerprint": fingerprint(release, shard)}))
    return make


def test_a_merged_release_keeps_the_simulated_users_fingerprint(tmp_path: Path) -> None:
    suite = _lookup_suite(tmp_path / "suite")
    whole, merged = _built(tmp_path, _with_user(suite, tmp_path,
                                                lambda release, _: release[-1] * 64))
    kept = _same_release(whole, merged)
    assert json.loads(kept["user_simulator"])["fingerprint"] == "1" * 64
    assert any("simulated user changed since r0" in w for w in _gates(merged)[1]["warnings"])


def test_shards_played_by_different_simulated_users_are_refused(tmp_path: Path) -> None:
    suite = _lookup_suite(tmp_path / "suite")
    make = _with_user(suite, tmp_path, lambda _, shard: str(shard.index if shard else 0) * 64)
    shards = []
    for index in (1, 2):
        shards.append(tmp_path / f"shard{index}.db")
        with Store(shards[-1]) as store:
            make(store, "r1", Shard(index=index, count=2))
    with pytest.raises(CallgateError) as refused:
        merge_stores(tmp_path / "merged.db", shards)
    message_ = str(refused.value)
    assert message_.startswith(f"{shards[1]}: ") and "user_simulator" in message_
    assert "\n" not in message_
    assert not (tmp_path / "merged.db").exists()


# ----------------------------------------------------------------------------- server errors

def test_a_merged_release_keeps_server_errors_counted_as_wrong_answers(tmp_path: Path) -> None:
    suite = _lookup_suite(tmp_path / "suite")
    lines = _lookup_lines()
    lines[3] = {"case_id": "c3", "repeat": 0, "error": {"kind": "server_error", "status": 502}}

    def make(store: Store, release: str, shard: Shard | None) -> None:
        score_file(suite, write_lines(tmp_path / "r.jsonl", lines), store, model="m",
                   release=release, agent="bot", shard=shard, server_errors="count")

    whole, merged = _built(tmp_path, make)
    assert _same_release(whole, merged)["scores"]["server_errors"] == "count"


# ----------------------------------------------------------------------------- fault recovery

def _recovery_line(case_id: str, repeat: int, retried: bool) -> dict[str, Any]:
    lookup = [("lookup_order", {"order_id": "ord_1"})]
    made = [lookup, lookup] if retried else [lookup]
    final = "ord_1 is pending." if retried else "Done: ord_1 is all set."
    return {**turns(case_id, *made, final, repeat=repeat),
            "faults": [{"tool": "lookup_order", "call": 0, "kind": "timeout"}]}


def test_a_merged_release_keeps_its_fault_recovery_figures(tmp_path: Path) -> None:
    ids = [f"a{i}" for i in range(6)]
    _split(ids)
    cases = [mt_case(case_id, {"type": "trajectory", "mode": "superset",
                               "calls": [{"tool": "lookup_order"}]}, state=STATE,
                     faults=[{"tool": "lookup_order", "kind": "timeout", "calls": [1]}],
                     after_fault={"retries": 1, "no_success_claim": True})
             for case_id in ids]
    suite = load_suite(env_suite(tmp_path / "shop", cases))

    def make(store: Store, release: str, shard: Shard | None) -> None:
        # r0 always recovers; r1 recovers in some repeats of some cases (clustered by case)
        lines = [_recovery_line(case_id, r, release == "r0" or (i + r) % 3 != 0 or i == 0)
                 for i, case_id in enumerate(ids) for r in range(3)]
        score_file(suite, write_lines(tmp_path / "r.jsonl", lines), store, model="m",
                   release=release, agent="bot", shard=shard)

    whole, merged = _built(tmp_path, make)
    kept = _same_release(whole, merged, recovery_max_drop=10.0)
    assert kept["scores"]["recovery"]["timeout"]["n"] == 18
    assert _gates(merged, recovery_max_drop=10.0)[1]["outcome"] == "regression"


# ----------------------------------------------------------------------------- judges beyond



def test_a_merged_release_keeps_its_answer_kinds_and_judged_claims(
        tmp_path: Path, loopback: Loopback) -> None:
    from callgate.judging.step import judge_step
    from callgate.scoring.behaviour import BehaviourJudges

    asks, claims = [f"ask{i}" for i in range(4)], [f"claim{i}" for i in range(4)]
    _split(asks), _split(claims)
    lookup = {"type": "calls", "calls": [{"tool": "lookup_order", "args": {}}]}
    root = tmp_path / "s"
    write_suite(root, [case(i, {"type": "no_call", "answer": "ask"}) for i in asks]
                + [case(i, lookup, policies={"judge_claims": True}) for i in claims])
    suite = load_suite(root)
    given = ["ask", "answer", "cannot", "ask"]
    for release in ("r0", "r1"):
        for i in range(4):
            loopback.script(f"[{release}-k{i}]", ok(content=json.dumps(
                {"answer_kind": "ask" if release == "r0" else given[i], "reason": "s"}),
                provider=None, cost=None))
            loopback.script(f"[{release}-c{i}]", ok(content=json.dumps(
                {"claim_support": "fail" if release == "r1" and i % 2 else "pass",
                 "reason": f"reason {i}"}), provider=None, cost=None))
    call = tool_call("lookup_order", {"order_id": "ord_1"})

    def make(store: Store, release: str, shard: Shard | None) -> None:
        lines = [{"case_id": a, "repeat": 0, "finish_reason": "stop", "response": {
                     "role": "assistant", "content": f"[{release}-k{i}] Which order?"}}
                 for i, a in enumerate(asks)]
        lines += [{"case_id": c, "repeat": 0, "response": message(
                      call, content=f"[{release}-c{i}] I have cancelled it.")}
                  for i, c in enumerate(claims)]
        steps = {name: judge_step(shipped_judge_spec(tmp_path, name, loopback.base_url), store,
                                  uncalibrated=True, environ={KEY_ENV: KEY})
                 for name in ("answer_kind", "claim_support")}
        score_file(suite, write_lines(tmp_path / "r.jsonl", lines), store, model="m",
                   release=release, agent="bot", shard=shard,
                   behaviour=BehaviourJudges(**steps))

    whole, merged = _built(tmp_path, make)
    kept = _same_release(whole, merged)["scores"]
    assert kept["answer_kinds"]["judged"] == 4 and kept["judged_claims"]["unsupported"] == 2
    assert any(m.startswith("answer kinds: macro-F1 1.00 →") for m in _gates(merged)[1][
        "messages"])


# ----------------------------------------------------------------------------- perturbed runs

MARKER = {"kind": "paraphrase", "seed": 0, "fingerprint": "p" * 64, "detail": ""}


def _perturbed(store: Store, suite: Suite, release: str, shard: Shard | None,
               lines: list[dict[str, Any]]) -> None:
    """A perturbed run of the release, stored as `run --perturb` stores it (cli/perturbing.py:
    the run row marked with its perturbation, its attempts through the Recorder)."""
    run_id = store.replace_run(suite, "bot", release, "recorded", __version__,
                               shard=(shard.index, shard.count) if shard else None, model="m",
                               tool_surface=surface_json(suite),
                               perturbation=canonical_json(MARKER))
    recorder = Recorder(suite, store, run_id)
    for item in lines:
        if shard is None or shard.holds(item["case_id"]):
            recorder.add(parse_response(item), json.dumps(item))
    recorder.finish()


def _robustness(db: Path) -> dict[str, Any]:
    with Store(db) as store:
        found = release_robustness(store, "s", "bot", "r1", max_drop=5.0)
    assert found is not None
    shown = found.model_dump(mode="json", exclude={"clean_run"})
    for perturbation in shown["perturbations"]:
        perturbation.pop("run")
    return shown


def test_a_merged_release_keeps_its_perturbed_runs_and_their_robustness(
        tmp_path: Path) -> None:
    suite = _lookup_suite(tmp_path / "suite")
    _split([f"c{i}" for i in range(8)])

    def make(store: Store, release: str, shard: Shard | None) -> None:
        score_file(suite, write_lines(tmp_path / "r.jsonl", _lookup_lines()), store,
                   model="m", release=release, agent="bot", shard=shard)
        worse = frozenset({1, 2} if release == "r1" else {1})
        _perturbed(store, suite, release, shard, _lookup_lines(wrong=worse))

    whole, merged = _built(tmp_path, make)
    _same_release(whole, merged)
    kept = _robustness(merged)
    assert kept == _robustness(whole)
    assert kept["decision"] == "regression" and kept["perturbations"][0]["cases"] == 8


def test_shards_with_different_perturbations_are_refused(tmp_path: Path) -> None:
    suite = _lookup_suite(tmp_path / "suite")
    shards = []
    for index in (1, 2):
        shards.append(tmp_path / f"shard{index}.db")
        with Store(shards[-1]) as store:
            shard = Shard(index=index, count=2)
            score_file(suite, write_lines(tmp_path / "r.jsonl", _lookup_lines()), store,
                       model="m", release="r1", agent="bot", shard=shard)
            if index == 2:  # shard 1 ran the release clean only
                _perturbed(store, suite, "r1", shard, _lookup_lines())
    with pytest.raises(CallgateError) as refused:
        merge_stores(tmp_path / "merged.db", shards)
    message_ = str(refused.value)
    assert message_.startswith(f"{shards[1]}: ") and "perturbation" in message_
    assert "\n" not in message_
    assert not (tmp_path / "merged.db").exists()


def _fault_suite(tmp: Path, ids: list[str], own: bool) -> Suite:
    """Cases faulted on their first lookup; `own`: each case states its after_fault (else a
    --faults plan gives the faults and the after_fault)."""
    faulted: dict[str, Any] = {
        "faults": [{"tool": "lookup_order", "kind": "timeout", "calls": [1]}],
        "after_fault": {"retries": 1, "no_success_claim": True}} if own else {}
    cases = [mt_case(case_id, {"type": "trajectory", "mode": "superset",
                               "calls": [{"tool": "lookup_order"}]}, state=STATE, **faulted)
             for case_id in ids]
    return load_suite(env_suite(tmp / "shop", cases))


def test_recovery_merged_into_a_store_holding_the_other_shard_is_the_unsharded_one(
        tmp_path: Path) -> None:
    ids = [f"a{i}" for i in range(6)]
    suite = _fault_suite(tmp_path, ids, own=True)
    lines = [_recovery_line(case_id, r, (i + r) % 3 != 0 or i == 0)
             for i, case_id in enumerate(ids) for r in range(3)]
    responses = write_lines(tmp_path / "r.jsonl", lines)
    stores = {}
    for name, shard in (("whole", None), ("s1", Shard(index=1, count=2)),
                        ("s2", Shard(index=2, count=2))):
        stores[name] = tmp_path / f"{name}.db"
        with Store(stores[name]) as store:
            score_file(suite, responses, store, model="m", release="r1", agent="bot",
                       shard=shard)
    merge_stores(tmp_path / "merged.db", [stores["s1"]])
    merge_stores(tmp_path / "merged.db", [stores["s2"]])  # --into: the release had shard 1
    merged = _release(tmp_path / "merged.db")["scores"]
    assert merged["recovery"] == _release(stores["whole"])["scores"]["recovery"]
    assert merged["recovery"]["timeout"]["n"] == 18


def test_shards_scored_under_a_fault_plan_by_the_library_merge_to_the_unsharded_run(
        tmp_path: Path) -> None:
    """score_file keeps the plan with the run (runs.fault_plan), as `callgate score --faults`
    does, so the merge reads the shards' recovery again with the plan's after_fault; shards of
    a store scored before the plan was kept (no runs.fault_plan) are refused."""
    from callgate.suites.fault_runs import with_fault_plan

    ids = [f"a{i}" for i in range(6)]
    plan = tmp_path / "faults.json"
    plan.write_text(json.dumps({
        "faults": [{"tool": "lookup_order", "kind": "timeout", "calls": [1]}],
        "after_fault": {"retries": 1, "no_success_claim": True}}))
    suite = with_fault_plan(_fault_suite(tmp_path, ids, own=False), plan)
    lines = [_recovery_line(case_id, r, r != 0) for case_id in ids for r in range(2)]
    answers = write_lines(tmp_path / "r.jsonl", lines)
    with Store(tmp_path / "whole.db") as store:
        score_file(suite, answers, store, model="m", release="r1", agent="bot")
    shards = []
    for index in (1, 2):
        shards.append(tmp_path / f"shard{index}.db")
        with Store(shards[-1]) as store:
            result = score_file(suite, answers, store, model="m", release="r1", agent="bot",
                                shard=Shard(index=index, count=2))
        assert result.scores.recovery is not None  # the plan's after_fault gave them
    merge_stores(tmp_path / "merged.db", shards)
    merged = _release(tmp_path / "merged.db")["scores"]["recovery"]
    assert merged == _release(tmp_path / "whole.db")["scores"]["recovery"]
    assert merged["timeout"]["n"] == 12
    for shard in shards:  # as stored before runs.fault_plan was kept
        with Store(shard) as store, store.atomic():
            store.db.execute("UPDATE runs SET fault_plan = NULL")
    with pytest.raises(CallgateError) as refused:
        merge_stores(tmp_path / "refused.db", shards)
    message_ = str(refused.value)
    assert message_.startswith(f"{shards[0]}: ") and "scores.recovery" in message_
    assert "\n" not in message_
    assert not (tmp_path / "refused.db").exists()


def test_a_shard_whose_cases_met_no_fault_merges_with_one_that_did(tmp_path: Path) -> None:
    ids = [f"a{i}" for i in range(6)]
    faulted = [case_id for case_id in ids if shard_of(case_id, 2) == 1]
    own = {"faults": [{"tool": "lookup_order", "kind": "timeout", "calls": [1]}],
           "after_fault": {"retries": 1, "no_success_claim": True}}
    suite = load_suite(env_suite(tmp_path / "shop", [
        mt_case(case_id, {"type": "trajectory", "mode": "superset",
                          "calls": [{"tool": "lookup_order"}]}, state=STATE,
                **(own if case_id in faulted else {}))
        for case_id in ids]))
    lookup = [("lookup_order", {"order_id": "ord_1"})]
    lines = [_recovery_line(case_id, r, r != 1) if case_id in faulted
             else turns(case_id, lookup, "ord_1 is pending.", repeat=r)
             for case_id in ids for r in range(3)]

    def make(store: Store, release: str, shard: Shard | None) -> None:
        score_file(suite, write_lines(tmp_path / "r.jsonl", lines), store, model="m",
                   release=release, agent="bot", shard=shard)

    whole, merged = _built(tmp_path, make)
    with Store(tmp_path / "shard2.db") as store:
        (run,) = store.stored_runs("bot")
    assert run.scores is not None and run.scores["recovery"] is None  # met no fault
    kept = _same_release(whole, merged)
    assert kept["scores"]["recovery"]["timeout"]["n"] == 3 * len(faulted)
