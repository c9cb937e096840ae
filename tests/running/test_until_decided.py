"""`run --until-decided`: some cases asked more often (RunSettings.case_repeats, only the new
repeats called), and the adaptive loop against a stored baseline over real HTTP on 127.0.0.1:
a loopback model whose answers are right with a per-case seeded probability."""

from __future__ import annotations

from pathlib import Path

from conftest import KEY, KEY_ENV, lookup_case, write_suite
from factories import line, message, tool_call, write_lines
from live_runs import candidate, settings
from loopback import Loopback
from seeded_model import SeededModel

from callgate.cli.until_decided import until_decided
from callgate.gating.release import gate_release
from callgate.running.run import LiveRun, run_live
from callgate.running.settings import RunSettings
from callgate.scoring.pipeline import score_file
from callgate.store.db import Store
from callgate.suites.suite import Suite, load_suite

CASES = [f"c{i:02d}" for i in range(40)]
FLAKY = CASES[:20]  # right 2 of 3 times in the baseline


def _suite(tmp_path: Path) -> Suite:
    return load_suite(write_suite(tmp_path / "suite", [lookup_case(c) for c in CASES]))


def _baseline(tmp_path: Path, suite: Suite, store: Store) -> None:
    right = message(tool_call("lookup_order", {"order_id": "ord_1"}))
    wrong = message(tool_call("lookup_order", {"order_id": "ord_9"}))
    lines = [line(c, wrong if c in FLAKY and repeat == 2 else right, repeat)
             for c in CASES for repeat in range(3)]
    score_file(suite, write_lines(tmp_path / "r1.jsonl", lines), store, model="cand",
               release="r1")
    gate_release(store, "cand", "r1")  # a first release: the baseline


def _loop(tmp_path: Path, suite: Suite, server: Loopback, store: Store, rounds: int):
    def run_once(with_settings: RunSettings) -> LiveRun:
        return run_live(suite, candidate(server), store, release="r2", settings=with_settings,
                        environ={KEY_ENV: KEY})

    return until_decided(store, suite, "cand", "r2", settings(repeats=1), run_once,
                         margin=2.0, max_rounds=rounds, max_excluded=0.2, per_round=10)


def test_case_repeats_ask_some_cases_more_and_call_only_the_new_repeats(tmp_path: Path
                                                                        ) -> None:
    suite = _suite(tmp_path)
    model = SeededModel({c: 0.5 for c in CASES}, seed=1)
    with Loopback(default=model) as server, Store(tmp_path / "callgate.db") as store:
        def run_once(with_settings: RunSettings) -> LiveRun:
            return run_live(suite, candidate(server), store, release="r2",
                            settings=with_settings, environ={KEY_ENV: KEY})

        first = run_once(settings(repeats=1))
        assert first.called == 40
        again = run_once(settings(repeats=1, case_repeats={"c03": 4, "c07": 2}))
        assert (again.called, again.cached) == (4, 40)
        run = store.find_stored_run(suite.name, "cand", "r2")
        assert run is not None
        trials = {row[0]: row[1] for row in store.case_tallies(run.id)}
    assert trials["c03"] == 4 and trials["c07"] == 2 and trials["c00"] == 1
    assert model.asked["c03"] == 4 and model.asked["c00"] == 1


def test_a_large_drop_is_decided_at_the_first_look(tmp_path: Path) -> None:
    suite = _suite(tmp_path)
    # 16 of the 20 stable cases now always wrong: a 40-point drop, sure at once
    p = {c: 0.0 if c in CASES[20:36] else 2 / 3 if c in FLAKY else 1.0 for c in CASES}
    with Loopback(default=SeededModel(p)) as server, Store(tmp_path / "callgate.db") as store:
        _baseline(tmp_path, suite, store)
        out = _loop(tmp_path, suite, server, store, rounds=3)
        asked = len(server.requests)
    assert out.tier == "regression" and out.exit_code == 1
    assert (out.rounds, out.reasked, asked) == (1, 0, 40)
    assert out.baseline == "r1"


def test_an_undecided_gate_re_asks_only_the_flaky_cases_and_settles(tmp_path: Path) -> None:
    """No change: the flaky cases are right 2 times in 3 now as then. The first round's
    single answers make the point drop exceed the margin by chance (this seed), the test
    cannot confirm it, and the re-asked attempts go to the baseline's flaky cases only; the
    gate never ends in a regression."""
    suite = _suite(tmp_path)
    p = {c: (2 / 3 if c in FLAKY else 1.0) for c in CASES}
    model = SeededModel(p, seed=3)
    with Loopback(default=model) as server, Store(tmp_path / "callgate.db") as store:
        _baseline(tmp_path, suite, store)
        out = _loop(tmp_path, suite, server, store, rounds=4)
        asked = len(server.requests)
    assert out.readings and out.tier in ("pass", "cannot_tell")
    assert out.rounds > 1 and out.reasked > 0
    assert asked == 40 + out.reasked  # each round called only its new repeats
    more = {c for c, n in model.asked.items() if n > 1}
    assert more and more <= set(FLAKY)
    assert "until decided:" in out.lines()[0]
