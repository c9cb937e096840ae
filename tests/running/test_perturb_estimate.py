"""`run --perturb KIND --estimate`: the clean run and each variant's run counted in one
estimate, each variant's stored answers found under its own marker (so a perturbed release
already run costs nothing more), over real HTTP on 127.0.0.1 for the run itself."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from conftest import KEY, KEY_ENV, LOOKUP, write_suite
from factories import TRACK_SHIPMENT
from live_runs import candidate, settings
from loopback import Loopback
from name_model import NameModel
from typer.testing import CliRunner

from callgate.cli.main import app
from callgate.cli.perturbing import estimate_perturbed, run_perturbed, specs_of
from callgate.running.estimate import estimate_run
from callgate.running.run import run_live
from callgate.store.db import Store
from callgate.suites.suite import load_suite

TOOLS = [LOOKUP, TRACK_SHIPMENT]
CASES = 6
KINDS = ["mask-names", "prompt-format"]


def _case(index: int) -> dict[str, Any]:
    tool = "lookup_order" if index % 2 == 0 else "track_shipment"
    return {"id": f"c{index}", "messages": [
        {"role": "system", "content": "You help with orders."},
        {"role": "user", "content": f"[c{index}] {tool}"}],
            "expect": {"type": "calls", "calls": [{"tool": tool, "args": {"order_id": "ord_1"}}]}}


def test_the_estimate_counts_every_variant_and_finds_their_stored_answers(tmp_path: Path
                                                                          ) -> None:
    suite = load_suite(write_suite(tmp_path / "suite", [_case(i) for i in range(CASES)], TOOLS))
    with Loopback(default=NameModel(TOOLS, p=0.5)) as server, \
            Store(tmp_path / "callgate.db") as store:
        model = candidate(server)
        plain = estimate_run(suite, model, store, settings(repeats=2))
        before = estimate_perturbed(store, suite, model, settings(repeats=2), specs_of(KINDS, 0))
        run_perturbed(store, suite, "cand", "r1", settings(repeats=2), specs_of(KINDS, 0),
                      lambda on, with_settings: run_live(
                          on, model, store, release="r1", settings=with_settings,
                          environ={KEY_ENV: KEY}),
                      max_drop=None, max_excluded=0.2)
        asked = len(server.requests)
        after = estimate_perturbed(store, suite, model, settings(repeats=2), specs_of(KINDS, 0))
        clean_after = estimate_run(suite, model, store, settings(repeats=2))
    assert plain.to_call == CASES * 2
    assert before.attempts == before.to_call == 3 * CASES * 2 == asked
    assert before.prompt_tokens is not None and plain.prompt_tokens is not None
    assert before.prompt_tokens > 2 * plain.prompt_tokens  # three runs' prompts, not one
    assert [note.split(":")[0] for note in before.notes[:3]] == [
        "clean run", "mask-names run", "prompt-format run"]
    # every variant's answers are stored under its own marker: nothing is left to call
    assert (after.to_call, after.cached, after.prompt_tokens) == (0, 3 * CASES * 2, 0)
    assert clean_after.to_call == 0


def test_the_cli_estimates_a_perturbed_run_and_calls_nothing(tmp_path: Path) -> None:
    suite = write_suite(tmp_path / "suite", [_case(i) for i in range(CASES)], TOOLS)
    done = CliRunner().invoke(app, [
        "run", str(suite), "-m", "openai/gpt-4o-mini", "-k", "2", "--perturb", "mask-names",
        "--estimate", "--json", "--db", str(tmp_path / "c.db")])
    assert done.exit_code == 0, done.output
    found = json.loads(done.stdout)
    assert found["to_call"] == 2 * CASES * 2
    assert found["usd"] is not None and found["usd"] > 0
    assert found["cached"] == 0 and found["attempts"] == found["to_call"]
