"""`callgate run --answer-kind-judge / --claims-judge`: the judges beyond the call on a live run
(docs/guides/judge.md, "Applying them to a run"). The candidate and both judges are scripted on
one loopback server over real HTTP: the live run keeps the same figures with its release as
`score` keeps for the same answers, a rerun asks nothing, and a judge without a certificate is
refused as in `score` (unless --uncalibrated)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from conftest import KEY, KEY_ENV
from factories import case, message, tool_call, write_lines, write_suite
from live_judge import shipped_judge_spec
from live_runs import candidate, settings
from loopback import Loopback, ok
from typer.testing import CliRunner

from callgate.gating.release import gate_release
from callgate.judging.step import judge_step
from callgate.running.run import run_live
from callgate.scoring.behaviour import BehaviourJudges
from callgate.scoring.pipeline import score_file
from callgate.store.db import Store
from callgate.suites.suite import Suite, load_suite

LOOKUP_ARGS = {"order_id": "ord_1"}
# The candidate's text answers (case marker -> answer) and what the judges say of each.
ANSWERS = {"[q-ask]": "[k0] Which order do you mean?",
           "[q-cannot]": "[k1] Your order is on its way.",
           "[q-plain]": "[p0] Hello!"}
KINDS = {"[k0]": "ask", "[k1]": "answer"}
CLAIM = "[c0] I have cancelled it."




def the_suite(root: Path) -> Suite:
    lookup = {"type": "calls", "calls": [{"tool": "lookup_order", "args": {}}]}
    return load_suite(write_suite(root, [
        case("ask", {"type": "no_call", "answer": "ask"}, text="[q-ask] cancel my order"),
        case("cannot", {"type": "no_call", "answer": "cannot"}, text="[q-cannot] refund me"),
        case("plain", {"type": "no_call"}, text="[q-plain] hi"),
        case("claim", lookup, text="[q-claim] cancel ord_1", policies={"judge_claims": True}),
    ]))


def script(loopback: Loopback) -> None:
    """The candidate first; the judges' rules after, so they win on the judge prompts (which
    hold the case's marker too)."""
    for marker, text in ANSWERS.items():
        loopback.script(marker, ok(content=text))
    loopback.script("[q-claim]", ok(content=CLAIM,
                                    calls=[tool_call("lookup_order", LOOKUP_ARGS)]))
    for marker, kind in KINDS.items():
        loopback.script(marker, ok(content=json.dumps({"answer_kind": kind, "reason": "s"}),
                                   provider=None, cost=None))
    loopback.script("[c0]", ok(content=json.dumps(
        {"claim_support": "fail", "reason": "no cancel call backs it"}), provider=None,
        cost=None))


def recorded(path: Path) -> Path:
    """The same answers as a responses file, for `score`."""
    def said(case_id: str, text: str) -> dict[str, Any]:
        return {"case_id": case_id, "repeat": 0, "finish_reason": "stop",
                "response": {"role": "assistant", "content": text}}

    call = {"id": "call_1", "type": "function",
            "function": {"name": "lookup_order", "arguments": json.dumps(LOOKUP_ARGS)}}
    return write_lines(path, [said("ask", ANSWERS["[q-ask]"]),
                              said("cannot", ANSWERS["[q-cannot]"]),
                              said("plain", ANSWERS["[q-plain]"]),
                              {"case_id": "claim", "repeat": 0,
                               "response": message(call, content=CLAIM)}])


def judges(store: Store, root: Path, base_url: str) -> BehaviourJudges:
    steps = {name: judge_step(shipped_judge_spec(root, name, base_url), store, uncalibrated=True,
                              environ={KEY_ENV: KEY})
             for name in ("answer_kind", "claim_support")}
    return BehaviourJudges(**steps)


def judge_prompts(requests: list[Any]) -> list[str]:
    """The prompts of the judges' requests (their model is the judge's), sorted."""
    return sorted(r.body["messages"][0]["content"] for r in requests
                  if "judge" in str(r.body.get("model")))


def kept(store: Store, agent: str, release: str) -> tuple[Any, Any]:
    _, scores = gate_release(store, agent, release, suite="s")
    return scores.answer_kinds, scores.judged_claims


def test_a_live_run_keeps_the_figures_score_keeps_and_a_rerun_asks_nothing(
    tmp_path: Path, loopback: Loopback
) -> None:
    suite = the_suite(tmp_path / "s")
    (tmp_path / "j").mkdir()
    script(loopback)
    with Store(tmp_path / "run.db") as store:
        live = run_live(suite, candidate(loopback), store, release="r1", settings=settings(),
                        environ={KEY_ENV: KEY},
                        behaviour=judges(store, tmp_path / "j", loopback.base_url))
        run_kinds, run_claims = kept(store, "cand", "r1")
    assert live.called == 4 and live.judge_pacing is not None  # the judges' calls were paced
    assert run_kinds is not None and run_claims is not None
    assert run_kinds.judged == 2 and run_kinds.confusion["cannot"]["answer"] == 1
    assert (run_claims.judged, run_claims.unsupported) == (1, 1)
    run_prompts = judge_prompts(loopback.requests)
    assert len(run_prompts) == 3  # two kinds and one claim; the plain case is no judge's

    # `score` on the same answers, in a store of its own (nothing cached): the same figures,
    # from the same judge prompts.
    asked_before = len(loopback.requests)
    with Store(tmp_path / "score.db") as store:
        score_file(suite, recorded(tmp_path / "r.jsonl"), store, model="m", release="r1",
                   behaviour=judges(store, tmp_path / "j", loopback.base_url))
        score_kinds, score_claims = kept(store, "m", "r1")
    assert score_kinds == run_kinds and score_claims == run_claims
    scored = loopback.requests[asked_before:]
    assert len(scored) == 3 and judge_prompts(scored) == run_prompts

    # The same run again: every answer and every verdict from the store.
    seen = len(loopback.requests)
    with Store(tmp_path / "run.db") as store:
        again = run_live(suite, candidate(loopback), store, release="r1", settings=settings(),
                         environ={KEY_ENV: KEY},
                         behaviour=judges(store, tmp_path / "j", loopback.base_url))
        assert kept(store, "cand", "r1") == (run_kinds, run_claims)
    assert len(loopback.requests) == seen  # zero requests: candidate or judge
    assert again.called == 0 and again.judge_pacing is None


def test_run_refuses_an_uncalibrated_judge_unless_told_and_then_keeps_its_figures(
    tmp_path: Path, loopback: Loopback
) -> None:
    from callgate.cli.main import app

    the_suite(tmp_path / "s")
    (tmp_path / "j").mkdir()
    script(loopback)
    kind_judge = shipped_judge_spec(tmp_path / "j", "answer_kind", loopback.base_url)
    claims = shipped_judge_spec(tmp_path / "j", "claim_support", loopback.base_url)
    db = tmp_path / "c.db"
    args = ["run", str(tmp_path / "s"), "--model", "openrouter/test/model",
            "--api-base", loopback.base_url, "--api-key-env", KEY_ENV, "-k", "1",
            "--db", str(db), "--release", "r1", "--answer-kind-judge", str(kind_judge),
            "--claims-judge", str(claims), "--json"]
    refused = CliRunner().invoke(app, args, env={KEY_ENV: KEY})
    assert refused.exit_code == 2, refused.output
    assert "certificate" in refused.output
    assert loopback.requests == []  # refused before anything was asked
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM runs").fetchone()[0] == 0

    done = CliRunner().invoke(app, [*args, "--uncalibrated"], env={KEY_ENV: KEY})
    assert done.exit_code == 0, done.output
    document = json.loads(done.stdout)
    assert document["scores"]["answer_kinds"]["judged"] == 2
    assert document["scores"]["answer_kinds"]["certified"] is False
    assert document["scores"]["judged_claims"]["unsupported"] == 1
    assert document["live"]["judge_pacing"] is not None
    with Store(db) as store:
        kinds, judged_claims = kept(store, "openrouter/test/model", "r1")
    assert kinds is not None and kinds.macro_f1 is not None
    assert judged_claims is not None and judged_claims.per_100 == 100.0

    # `score` with the same options on the same answers (the options are shared): the same
    # figures, every verdict from the cache.
    seen = len(loopback.requests)
    scored = CliRunner().invoke(app, [
        "score", str(tmp_path / "s"), "-r", str(recorded(tmp_path / "r.jsonl")), "-m", "m",
        "--release", "r2", "--db", str(db), "--answer-kind-judge", str(kind_judge),
        "--claims-judge", str(claims), "--uncalibrated", "--json"], env={KEY_ENV: KEY})
    assert scored.exit_code == 0, scored.output
    figures = json.loads(scored.stdout)["scores"]
    for name in ("answer_kinds", "judged_claims"):
        assert figures[name] == document["scores"][name]
    assert len(loopback.requests) == seen


def test_a_run_cut_short_while_the_judges_judge_keeps_the_verdicts_paid_for(
    tmp_path: Path, loopback: Loopback
) -> None:
    """Ctrl-C during the answer_kind judge's batch: the verdict it already gave stays cached,
    the run is marked interrupted (never a baseline), and the same run again asks only the
    verdicts that never came, no answer."""
    import asyncio
    import dataclasses

    import pytest

    suite = the_suite(tmp_path / "s")
    (tmp_path / "j").mkdir()
    script(loopback)
    with Store(tmp_path / "run.db") as store:
        real = judges(store, tmp_path / "j", loopback.base_url)
        assert real.answer_kind is not None
        answer = real.answer_kind.complete

        async def cut(messages: list[dict[str, Any]]) -> str | None:
            if "[k1]" not in messages[0]["content"]:
                return await answer(messages)
            for _ in range(500):  # until the other verdict is cached, then Ctrl-C
                if next(iter(store.db.query("SELECT count(*) AS n FROM judge_cache")))["n"]:
                    break
                await asyncio.sleep(0.01)
            raise KeyboardInterrupt

        cutting = dataclasses.replace(
            real, answer_kind=dataclasses.replace(real.answer_kind, complete=cut,
                                                  concurrency=2))
        with pytest.raises(KeyboardInterrupt):
            run_live(suite, candidate(loopback), store, release="r1", settings=settings(),
                     environ={KEY_ENV: KEY}, behaviour=cutting)
        assert [r["status"] for r in store.db.query("SELECT status FROM runs")] == [
            "interrupted"]
        assert next(iter(store.db.query("SELECT count(*) AS n FROM judge_cache")))["n"] == 1

    seen = len(loopback.requests)
    with Store(tmp_path / "run.db") as store:
        again = run_live(suite, candidate(loopback), store, release="r1", settings=settings(),
                         environ={KEY_ENV: KEY},
                         behaviour=judges(store, tmp_path / "j", loopback.base_url))
        kinds, claims = kept(store, "cand", "r1")
    asked = loopback.requests[seen:]
    assert again.called == 0  # every answer from the store
    assert len(asked) == 2 and len(judge_prompts(asked)) == 2  # [k1] and the claim only
    assert not any("[k0]" in r.body["messages"][0]["content"] for r in asked)
    assert kinds is not None and kinds.judged == 2 and claims is not None


def test_a_run_the_budget_ends_is_judged_over_what_it_answered_then_resumed(
    tmp_path: Path, loopback: Loopback
) -> None:
    """--max-attempts (as --max-cost) ends the run early: as the tool-choice judge, the judges
    judge the attempts it answered; resumed, only the new answers are judged."""
    suite = the_suite(tmp_path / "s")
    (tmp_path / "j").mkdir()
    script(loopback)
    with Store(tmp_path / "run.db") as store:
        first = run_live(suite, candidate(loopback), store, release="r1",
                         settings=settings(concurrency=1, max_attempts=2),
                         environ={KEY_ENV: KEY},
                         behaviour=judges(store, tmp_path / "j", loopback.base_url))
        (row,) = store.db.query("SELECT scores FROM runs")
        stopped = json.loads(row["scores"])
    assert first.called == 2 and first.budget is not None
    assert stopped["answer_kinds"]["judged"] == 2  # ask and cannot, the two answered
    assert stopped["judged_claims"]["judged"] == 0  # the claim case was never answered
    assert len(judge_prompts(loopback.requests)) == 2

    seen = len(loopback.requests)
    with Store(tmp_path / "run.db") as store:
        again = run_live(suite, candidate(loopback), store, release="r1", settings=settings(),
                         environ={KEY_ENV: KEY},
                         behaviour=judges(store, tmp_path / "j", loopback.base_url))
        kinds, claims = kept(store, "cand", "r1")
    asked = loopback.requests[seen:]
    assert again.called == 2 and again.cached == 2
    assert len(judge_prompts(asked)) == 1  # the claim alone; the two kinds from the cache
    assert kinds is not None and kinds.judged == 2
    assert claims is not None and (claims.judged, claims.unsupported) == (1, 1)
