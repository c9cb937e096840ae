"""Issue 10, the judge's certificate: spec errors, judge errors, the arguments population,
revocation and the labels a certificate is bound to."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from callgate.config import MAX_TOKENS_KEYS, Candidate
from callgate.errors import InputError
from callgate.judge import load_judge

ROOT = Path(__file__).resolve().parents[1]
SECRET = "sk-proj-" + "Zq7" * 16  # a 56-character key that must never be echoed


def write_spec(root: Path, body: str) -> Path:
    shutil.copy(ROOT / "judges" / "tool_choice.md", root / "tool_choice.md")
    spec = root / "bad.toml"
    spec.write_text('name = "bad"\nmodel = "openai/gpt-4.1-2025-04-14"\n'
                    f'prompt = "tool_choice.md"\n{body}\n')
    return spec


SPEC_MISTAKES = [
    ('api_key_env = ""', "api_key_env"),
    (f'api_key_env = "{SECRET}"', "api_key_env"),
    (f'api_key_env = "K"\n[parameters.extra]\napi_key = "{SECRET}"', "parameters.extra.api_key"),
    (f'api_key_env = "K"\n[parameters.extra]\nextra_headers = {{ Authorization = "{SECRET}" }}',
     "parameters.extra.extra_headers"),
    (f'api_key_env = "K"\napi_base = "https://me:{SECRET}@example.com/v1"', "api_base"),
    (f'api_key_env = "K"\napi_base = "https://example.com/v1?key={SECRET}"', "api_base"),
    (f'api_key = "{SECRET}"', "api_key"),
    ('api_key_env = "K"\n[parameters.extra]\nmax_output_tokens = 100',
     "parameters.extra.max_output_tokens"),
    ("max_tokens = 100", "max_tokens"),
    ("[parameters]\nmax_completion_tokens = 100", "parameters.max_completion_tokens"),
    (f'[parameters]\nreasoning_effort = "{SECRET}"', "parameters.reasoning_effort"),
]


@pytest.mark.parametrize(("body", "field"), SPEC_MISTAKES)
def test_a_spec_mistake_is_an_input_error_that_never_echoes_the_value(
    tmp_path: Path, callgate_exe: str, cli_env: dict, body: str, field: str
) -> None:
    spec = write_spec(tmp_path, body)
    with pytest.raises(InputError) as info:
        load_judge(spec)
    assert info.value.field == field
    shown = subprocess.run([callgate_exe, "judge", "show", str(spec), "--db", "c.db"],
                           cwd=tmp_path, env=cli_env, capture_output=True, text=True, timeout=60)
    assert shown.returncode == 2, shown.stdout + shown.stderr
    assert f"bad.toml: {field}: " in shown.stderr
    assert "Traceback" not in shown.stderr and "internal error" not in shown.stderr
    assert SECRET not in shown.stdout + shown.stderr and "Zq7Zq7" not in shown.stderr


@pytest.mark.parametrize("key", sorted(MAX_TOKENS_KEYS))
def test_one_max_tokens_rule_for_candidates_and_judges(tmp_path: Path, key: str) -> None:
    with pytest.raises(ValueError, match="is refused"):
        Candidate(model="openai/m", extra={key: 10})
    with pytest.raises(InputError, match="is refused") as info:
        load_judge(write_spec(tmp_path, f"[parameters.extra]\n{key} = 10"))
    assert info.value.field == f"parameters.extra.{key}"
