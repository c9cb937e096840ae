"""BFCL result folders as callgate responses (`callgate import bfcl-results`), one suite for many
categories, and BFCL's summary figures, all compared with BFCL's own checker and its own
accuracy functions (tests/fixtures/bfcl)."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from bfcl_fixture import FIXTURES, load_harness

from callgate.errors import InputError
from callgate.importers import bfcl
from callgate.importers.bfcl import CATEGORIES, import_category, read_category
from callgate.importers.bfcl.results import convert_results, response_line
from callgate.importers.bfcl.summary import bfcl_summary
from callgate.suites.responses import read_responses
from callgate.suites.suite import Suite, load_suite

DATA = FIXTURES / "data"
CLI = Path(sys.executable).parent / "callgate"
harness = load_harness()
REFERENCE = harness.Reference(harness.load_ast_checker())
# Perturbations whose verdicts differ from BFCL's by design (docs/bfcl.md): left out here, so
# every figure must equal BFCL's.
KNOWN = {"broken_json", "non_object_args", "empty_args_string"}


def _bfcl_result(message: dict[str, Any]) -> Any:
    """What BFCL's OpenAI FC handler records for this response (`_parse_query_response_FC`)."""
    calls = message.get("tool_calls")
    if not calls:
        return message.get("content") or ""
    return [{c["function"]["name"]: c["function"]["arguments"]} for c in calls]


def _result_folder(suite: Suite, root: Path, pick: int, version: int = 4) -> dict[str, list[bool]]:
    """A BFCL-style result folder for one model: for each case, the perturbation `pick` steps
    along (0: the right answer). Returns BFCL's own verdict on every line, by category."""
    valid: dict[str, list[bool]] = {}
    lines: dict[str, list[str]] = {}
    for category in CATEGORIES:
        data = read_category(DATA, category)
        for index, entry in enumerate(data.entries):
            case = suite.cases[entry.id]
            options = [(label, m) for label, m in harness.perturbations(suite, case)
                       if label.split("@")[0].split(":")[0] not in KNOWN]
            _, message = options[(index * pick) % len(options)]
            names = harness.bfcl_names(case, entry)
            verdict = REFERENCE.valid(category, entry, data.answers.get(entry.id), message, names)
            valid.setdefault(category, []).append(verdict)
            record = {"id": entry.id, "result": _bfcl_result(message),
                      "input_token_count": 100 + index, "output_token_count": 7, "latency": 0.5}
            lines.setdefault(category, []).append(json.dumps(record))
    for category, text in lines.items():
        where = root / ("live" if category.startswith("live_") else "non_live")
        if version == 3:
            where = root
        where.mkdir(parents=True, exist_ok=True)
        name = f"BFCL_v{version}_{category}_result.json"
        (where / name).write_text("\n".join(text) + "\n", encoding="utf-8")
    return valid


@pytest.fixture(scope="module")
def suite_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return import_category(DATA, "all", tmp_path_factory.mktemp("bfcl") / "suite").out


def _helper_functions() -> dict[str, Any]:
    """BFCL's own accuracy functions, taken from its eval_runner_helper.py (the rest of that
    module needs pandas and BFCL's model configs)."""
    source = (FIXTURES / "checker" / "eval_runner_helper.py").read_text(encoding="utf-8")
    wanted = {"calculate_weighted_accuracy", "calculate_unweighted_accuracy",
              "calculate_percentage_weighted_accuracy"}
    tree = ast.parse(source)
    module = ast.Module(
        body=[n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in wanted],
        type_ignores=[])
    namespace: dict[str, Any] = {}
    exec(compile(module, "eval_runner_helper.py", "exec"), namespace)
    return namespace


def _bfcl_figures(valid: dict[str, list[bool]]) -> dict[str, float]:
    """BFCL's summary, as generate_leaderboard_csv composes it (a category not given counts
    as 0 with its dataset size; the sizes only matter for the live figure, where all are given)."""
    f = _helper_functions()

    def score(category: str) -> dict[str, Any]:
        if category not in valid:
            return {"accuracy": 0, "total_count": 1, "display_accuracy": "N/A"}
        verdicts = valid[category]
        accuracy = sum(verdicts) / len(verdicts)
        return {"accuracy": accuracy, "total_count": len(verdicts), "display_accuracy": accuracy}

    weighted, unweighted = f["calculate_weighted_accuracy"], f["calculate_unweighted_accuracy"]
    simple = unweighted([score(c) for c in ("simple_python", "simple_java", "simple_javascript")])
    non_live = unweighted([simple, *(score(c) for c in ("multiple", "parallel",
                                                           "parallel_multiple"))])
    live = weighted([score(c) for c in ("live_simple", "live_multiple", "live_parallel",
                                        "live_parallel_multiple")])
    irrelevance = unweighted([score("irrelevance"), score("live_irrelevance")])
    multi_turn = unweighted([score(c) for c in ("multi_turn_base", "multi_turn_miss_func",
                                                "multi_turn_miss_param",
                                                "multi_turn_long_context")])
    web = unweighted([score("web_search_base"), score("web_search_no_snippet")])
    memory = unweighted([score(c) for c in ("memory_kv", "memory_vector", "memory_rec_sum")])
    agentic = unweighted([web, memory])
    overall = f["calculate_percentage_weighted_accuracy"](
        [non_live, live, irrelevance, multi_turn, agentic], [10, 10, 10, 30, 40])
    parts = {"non-live AST": non_live, "live AST": live, "irrelevance": irrelevance,
             "multi-turn": multi_turn, "overall": overall}
    return {name: 100 * part["accuracy"] for name, part in parts.items()}


def test_one_suite_holds_every_category_tagged(suite_dir: Path) -> None:
    suite = load_suite(suite_dir)
    entries = [e.id for c in CATEGORIES for e in read_category(DATA, c).entries]
    assert list(suite.cases) == entries  # every case BFCL scores, the never-passable included
    assert suite.name == "bfcl"
    for category in CATEGORIES:
        ids = {e.id for e in read_category(DATA, category).entries}
        assert {c for c, tags in suite.case_tags().items() if category in tags} == ids
    # One catalogue for all: each case still sees exactly its own BFCL docs under BFCL's names.
    for category in CATEGORIES:
        for entry in read_category(DATA, category).entries:
            offered = suite.offered_tools(suite.cases[entry.id])
            language = bfcl.language_of(category)
            assert offered == [bfcl.convert_function(f, entry.id, language)
                               for f in entry.function]
    repeated = import_category(DATA, ["parallel", "all", "parallel"], suite_dir.parent / "again")
    assert repeated.categories[0] == "parallel" and len(repeated.categories) == len(CATEGORIES)


def test_result_lines_become_responses() -> None:
    calls = {"id": "x", "result": [{"f": '{"a": 1}'}, {"g": {"b": 2}}], "latency": 1.25,
             "input_token_count": 10, "output_token_count": 3}
    line = response_line(calls)
    assert line["response"]["tool_calls"][0]["function"] == {"name": "f", "arguments": '{"a": 1}'}
    assert json.loads(line["response"]["tool_calls"][1]["function"]["arguments"]) == {"b": 2}
    assert line["latency_ms"] == 1250 and line["usage"]["prompt_tokens"] == 10
    text = response_line({"id": "x", "result": "I cannot do that."})
    assert text["response"] == {"role": "assistant", "content": "I cannot do that."}
    assert "tool_calls" not in response_line({"id": "x", "result": []})["response"]


def test_v3_and_v4_folders_give_the_same_responses(suite_dir: Path, tmp_path: Path) -> None:
    suite = load_suite(suite_dir)
    _result_folder(suite, tmp_path / "v4", pick=3)
    _result_folder(suite, tmp_path / "v3", pick=3, version=3)
    v4 = convert_results(tmp_path / "v4", suite, tmp_path / "v4.jsonl")
    v3 = convert_results(tmp_path / "v3", suite, tmp_path / "v3.jsonl")
    assert (tmp_path / "v4.jsonl").read_text() == (tmp_path / "v3.jsonl").read_text()
    assert v4.responses == len(suite.cases) and v4.missing == [] and v3.categories
    assert len(list(read_responses(tmp_path / "v4.jsonl", set(suite.cases)))) == len(suite.cases)


def test_results_that_do_not_fit_the_suite_are_refused(suite_dir: Path, tmp_path: Path) -> None:
    suite = load_suite(import_category(DATA, "live_simple", tmp_path / "one").out)
    folder = tmp_path / "r"
    folder.mkdir()
    path = folder / "BFCL_v4_live_simple_result.json"
    ids = list(suite.cases)
    path.write_text("".join(json.dumps({"id": i, "result": []}) + "\n" for i in ids[:-1]))
    with pytest.raises(InputError, match=rf"no result for 1 of the suite's {len(ids)}"):
        convert_results(folder, suite, tmp_path / "out.jsonl")
    with path.open("a") as handle:
        handle.write(json.dumps({"id": "live_simple_999-0-0", "result": []}) + "\n")
    with pytest.raises(InputError) as info:
        convert_results(folder, suite, tmp_path / "out.jsonl")
    assert info.value.line == len(ids) and "no case 'live_simple_999-0-0'" in str(info.value)
    assert not (tmp_path / "out.jsonl").exists()  # nothing half-written
    # Categories the suite does not hold are left alone, and said so.
    path.write_text("".join(json.dumps({"id": i, "result": []}) + "\n" for i in ids))
    (folder / "BFCL_v4_simple_java_result.json").write_text("{}\n")
    done = convert_results(folder, suite, tmp_path / "out.jsonl")
    assert (done.categories, done.ignored) == (["live_simple"], ["simple_java"])


def test_summary_figures_are_bfcls(suite_dir: Path, tmp_path: Path) -> None:
    valid = _result_folder(load_suite(suite_dir), tmp_path / "r", pick=5)
    counts = {c: (sum(v), len(v)) for c, v in valid.items()}
    ours = {f.name: f.pct for f in bfcl_summary(counts)}
    theirs = _bfcl_figures(valid)
    assert ours.keys() == theirs.keys()
    for name, pct in theirs.items():
        assert ours[name] == pytest.approx(pct, abs=1e-9), name
    assert 0 < theirs["live AST"] < 100  # not trivially all right or all wrong


def _cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(CLI), *args], capture_output=True, text=True, check=False, env=env)


@pytest.mark.slow
def test_round_trip_import_score_gate(tmp_path: Path) -> None:
    """A BFCL result folder → import bfcl-results → score → gate, with BFCL's figures."""
    env = {**os.environ, "COLUMNS": "200"}
    suite_out = tmp_path / "suite"
    imported = _cli("import", "bfcl", str(DATA), "--category", "all", "--out", str(suite_out),
                    env=env)
    assert imported.returncode == 0, imported.stderr
    assert "6 cases BFCL's own checker can never pass" in imported.stdout
    suite = load_suite(suite_out)
    db = str(tmp_path / "db.sqlite")
    expected_by_release = {}
    for release, pick in (("r1", 0), ("r2", 1)):
        folder = tmp_path / release / "my-model-FC"
        valid = _result_folder(suite, folder, pick=pick)
        expected_by_release[release] = valid
        responses = tmp_path / f"{release}.jsonl"
        converted = _cli("import", "bfcl-results", str(folder.parent), "--suite", str(suite_out),
                         "--out", str(responses), env=env)
        assert converted.returncode == 0, converted.stderr
        assert f"converted {len(suite.cases)} BFCL results" in converted.stdout
        scored = _cli("score", str(suite_out), "-r", str(responses), "-m", "my-model",
                      "--release", release, "--db", db, "--json", env=env)
        assert scored.returncode == 0, scored.stderr
        scores = json.loads(scored.stdout)["scores"]
        for category, verdicts in valid.items():
            share = scores["by_tag"][category]["right_arguments"]
            assert (share["successes"], share["n"]) == (sum(verdicts), len(verdicts)), category
            assert share["pct"] == pytest.approx(100 * sum(verdicts) / len(verdicts), abs=0.01)
        every = [v for verdicts in valid.values() for v in verdicts]
        overall = scores["figures"]["right_arguments"]
        assert (overall["successes"], overall["n"]) == (sum(every), len(every))
    # The console report prints BFCL's summary figures, equal to BFCL's own.
    text = _cli("score", str(suite_out), "-r", str(tmp_path / "r2.jsonl"), "-m", "my-model",
                "--release", "r2-text", "--db", str(tmp_path / "other.sqlite"), env=env)
    assert text.returncode == 0, text.stderr
    for name, pct in _bfcl_figures(expected_by_release["r2"]).items():
        assert f"{name}: {pct:.2f}" in text.stdout, (name, text.stdout[-2000:])
    first = _cli("gate", "-m", "my-model", "--release", "r1", "--db", db, env=env)
    assert first.returncode == 0, first.stdout + first.stderr
    second = _cli("gate", "-m", "my-model", "--release", "r2", "--db", db, "--baseline", "auto",
                  env=env)
    r1 = [v for vs in expected_by_release["r1"].values() for v in vs]
    r2 = [v for vs in expected_by_release["r2"].values() for v in vs]
    drop = 100 * (sum(r1) / len(r1) - sum(r2) / len(r2))
    assert drop > 2  # BFCL's own accuracy fell by more than the gate allows
    assert second.returncode == 1, second.stdout + second.stderr
