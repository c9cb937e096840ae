"""A judge reached at another endpoint (`--api-base`, e.g. a local vLLM or Ollama server) and
found by name: the loopback server plays the local endpoint; the CLI runs as a subprocess."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import KEY, KEY_ENV
from live_judge import make_set, run, script_judge
from loopback import Loopback
from paths import ROOT

from callgate.judging.judge import load_judge


def keyless_spec(root: Path) -> Path:
    """A spec as a user copies it: the provider's own endpoint and key variable, which is
    not set here."""
    shutil.copy(ROOT / "judges" / "tool_choice.md", root / "tool_choice.md")
    spec = root / "tool_choice.toml"
    spec.write_text(
        'name = "tool_choice"\nmodel = "openai/judge-2026-01-01"\n'
        'api_key_env = "CALLGATE_UNSET_KEY"\nprompt = "tool_choice.md"\n'
        "[parameters]\ntemperature = 0\nsamples = 1\n"
        "[thresholds]\ntpr = 0.9\ntnr = 0.9\nmin_items_per_class = 4\n")
    return spec


@pytest.mark.slow
def test_api_base_reaches_a_keyless_endpoint_without_changing_the_fingerprint(
    tmp_path: Path, loopback: Loopback, callgate_exe: str, cli_env: dict
) -> None:
    spec = keyless_spec(tmp_path)
    labels = make_set(tmp_path / "set.jsonl")
    script_judge(loopback, labels)
    result = run(callgate_exe, cli_env, tmp_path, "judge", "calibrate", str(spec), "--set",
                 "set.jsonl", "--db", "c.db", "--api-base", loopback.base_url)
    assert result.returncode == 0, result.stdout + result.stderr
    assert len(loopback.requests) == 17
    # The spec's key belongs to the spec's endpoint: nothing is sent to the local one.
    assert all("Authorization" not in r.headers for r in loopback.requests)
    assert "17/17" in result.stderr  # the progress bar, like run's
    cert = json.loads((tmp_path / "tool_choice.cert.json").read_text())
    assert cert["fingerprint"] == load_judge(spec).fingerprint

    show = run(callgate_exe, cli_env, tmp_path, "judge", "show", str(spec), "--db", "c.db",
               "--api-base", loopback.base_url)
    assert f"endpoint     {loopback.base_url} (key: none sent)" in show.stdout
    assert "certified" in show.stdout and "NOT" not in show.stdout


@pytest.mark.slow
def test_api_key_env_names_the_key_for_the_other_endpoint(
    tmp_path: Path, loopback: Loopback, callgate_exe: str, cli_env: dict
) -> None:
    spec = keyless_spec(tmp_path)
    labels = make_set(tmp_path / "set.jsonl")
    script_judge(loopback, labels)
    result = run(callgate_exe, cli_env, tmp_path, "judge", "calibrate", str(spec), "--set",
                 "set.jsonl", "--db", "c.db", "--api-base", loopback.base_url,
                 "--api-key-env", KEY_ENV)
    assert result.returncode == 0, result.stdout + result.stderr
    assert {r.headers.get("Authorization") for r in loopback.requests} == {f"Bearer {KEY}"}
    assert KEY not in result.stdout + result.stderr


@pytest.mark.slow
def test_api_base_with_credentials_is_refused(
    tmp_path: Path, callgate_exe: str, cli_env: dict
) -> None:
    result = run(callgate_exe, cli_env, tmp_path, "judge", "show", "tool_choice", "--api-base",
                 "http://user:s3cret@localhost:8000/v1")
    assert result.returncode == 2 and "s3cret" not in result.stdout + result.stderr
    assert "--api-base" in result.stderr


@pytest.mark.slow
def test_bundled_judge_and_set_by_name(tmp_path: Path, callgate_exe: str, cli_env: dict) -> None:
    show = run(callgate_exe, cli_env, tmp_path, "judge", "show", "tool_choice")
    assert show.returncode == 0, show.stderr
    assert load_judge(ROOT / "judges" / "tool_choice.toml").fingerprint in show.stdout
    # By name, the set is found too; the judge's key is then the first thing missing.
    env = {k: v for k, v in cli_env.items() if k != "OPENAI_API_KEY"}
    calib = run(callgate_exe, env, tmp_path, "judge", "calibrate", "tool_choice", "--set",
                "tool_choice", "--db", "c.db")
    assert calib.returncode == 2 and "OPENAI_API_KEY is not set" in calib.stderr


@pytest.mark.slow
def test_calibration_tables_fit_80_columns(
    tmp_path: Path, loopback: Loopback, callgate_exe: str, cli_env: dict
) -> None:
    spec = keyless_spec(tmp_path)
    labels = make_set(tmp_path / "set.jsonl")
    script_judge(loopback, labels, wrong={"[item-05]"})  # not certified: a reason, a disagreement
    env = {**cli_env, "COLUMNS": "80"}
    result = run(callgate_exe, env, tmp_path, "judge", "calibrate", str(spec), "--set",
                 "set.jsonl", "--db", "c.db", "--api-base", loopback.base_url)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "…" not in result.stdout
    assert max(len(line) for line in result.stdout.splitlines()) <= 80
    for label in ("TPR [95% CI]", "TNR [95% CI]", "Cohen's kappa", "TP / FN / TN / FP",
                  "meets thresholds", "tool_choice", "arguments"):
        assert label in result.stdout


@pytest.mark.slow
def test_score_takes_a_bundled_judge_by_name(tmp_path: Path, callgate_exe: str,
                                             cli_env: dict) -> None:
    from callgate.cli.demo import example_path

    root = example_path()
    result = run(callgate_exe, cli_env, tmp_path, "score", str(root), "-r",
                 str(root / "responses-2026.10.jsonl"), "-m", "m", "--release", "1",
                 "--db", "c.db", "--judge", "tool_choice")
    # Found by name; refused only because no certificate exists for its fingerprint.
    assert result.returncode == 2
    assert "judge tool_choice (fingerprint" in result.stderr and "no certificate" in result.stderr
