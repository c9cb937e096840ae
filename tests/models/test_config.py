"""Candidates from callgate.toml and from flags: defaults, refusals, and errors that name the
file and the field."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from callgate.cli.main import app
from callgate.errors import InputError
from callgate.models.config import (
    Candidate,
    load_config,
    parse_params,
    resolve_candidate,
)
from callgate.models.routes import route_for

GOOD = """
[[candidates]]
name = "mini"
model = "openrouter/openai/gpt-4o-mini"
api_key_env = "OPENROUTER_API_KEY"
provider = { order = ["openai"], allow_fallbacks = false }
extra = { temperature = 0 }

[[candidates]]
model = "anthropic/claude-sonnet-4-5"
reasoning_effort = "medium"
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "callgate.toml"
    path.write_text(text)
    return path


def error_of(tmp_path: Path, text: str) -> InputError:
    path = write(tmp_path, text)
    with pytest.raises(InputError) as info:
        load_config(path)
    assert info.value.path == str(path)
    return info.value


def test_candidates_load_with_defaults(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, GOOD))
    mini, sonnet = config.candidates
    assert mini.name == "mini" and mini.reasoning_effort == "low"
    assert sonnet.name == "anthropic/claude-sonnet-4-5"  # the model id when no name is given
    assert sonnet.reasoning_effort == "medium"
    assert mini.provider_block() == {
        "order": ["openai"],
        "allow_fallbacks": False,
        "require_parameters": True,
    }
    assert sonnet.provider_block() is None


def test_require_parameters_defaults_to_true_on_openrouter_only() -> None:
    router = Candidate(model="openrouter/x/y")
    assert router.provider_block() == {"require_parameters": True}
    assert route_for(router).params["provider"] == {"require_parameters": True}
    assert "provider" not in route_for(Candidate(model="openai/gpt-4o")).params
    off = Candidate(model="openrouter/x/y", provider={"require_parameters": False})
    assert off.provider_block() == {"require_parameters": False}


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ('max_tokens = 512\nmodel = "openai/gpt-4o"', "candidates[0].max_tokens"),
        ('model = "openai/gpt-4o"\nextra = { max_tokens = 512 }', "candidates[0].extra.max_tokens"),
        (
            'model = "openai/gpt-4o"\nextra = { max_completion_tokens = 9 }',
            "candidates[0].extra.max_completion_tokens",
        ),
    ],
)
def test_max_tokens_is_refused_with_the_reason(tmp_path: Path, text: str, field: str) -> None:
    err = error_of(tmp_path, "[[candidates]]\n" + text)
    assert err.field == field
    assert "truncates the tool-call JSON" in err.message
    assert "invalid JSON" in err.message


def test_a_key_in_the_config_is_refused(tmp_path: Path) -> None:
    err = error_of(tmp_path, '[[candidates]]\nmodel = "openai/gpt-4o"\napi_key = "sk-abc"')
    assert err.field == "candidates[0].api_key"
    assert "environment variable" in err.message
    err = error_of(tmp_path, '[[candidates]]\nmodel = "openai/gpt-4o"\napi_key_env = "sk-abc-123"')
    assert err.field == "candidates[0].api_key_env"
    assert "NAME" in err.message


@pytest.mark.parametrize(
    ("text", "field", "words"),
    [
        ('[[candidates]]\nmodel = "x/y"\ncolour = 1', "candidates[0].colour", "Extra inputs"),
        ('[[candidates]]\nname = "a"', "candidates[0].model", "Field required"),
        ('[[candidates]]\nmodel = "x/y"\nreasoning_effort = "huge"', "reasoning_effort", "low"),
        (
            '[[candidates]]\nmodel = "openai/gpt-4o"\nprovider = { order = ["a"] }',
            "candidates[0].provider",
            "OpenRouter",
        ),
        (
            '[[candidates]]\nmodel = "x/y"\nextra = { messages = [] }',
            "candidates[0].extra.messages",
            "suite",
        ),
        (
            '[[candidates]]\nmodel = "openrouter/a/b"\nprovider = { orderr = ["a"] }',
            "candidates[0].provider.orderr",
            "Extra inputs",
        ),
        (
            '[[candidates]]\nmodel = "a/b"\n[[candidates]]\nmodel = "a/b"',
            "candidates[1].name",
            "duplicate",
        ),
        ("candidates = []", "candidates", "at least 1"),
    ],
)
def test_bad_config_names_the_field(tmp_path: Path, text: str, field: str, words: str) -> None:
    err = error_of(tmp_path, text)
    assert field in (err.field or ""), err
    assert words in err.message, err


def test_bad_toml_and_missing_file(tmp_path: Path) -> None:
    err = error_of(tmp_path, "[[candidates]\nmodel=")
    assert "invalid TOML" in err.message
    with pytest.raises(InputError, match="file not found"):
        load_config(tmp_path / "nope.toml")


def test_flags_build_or_override_a_candidate(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, GOOD))
    mini = resolve_candidate(
        "mini",
        config,
        tmp_path / "callgate.toml",
        overrides={"provider": {"allow_fallbacks": True}, "extra": {"seed": 7}},
    )
    assert mini.provider is not None and mini.provider.order == ["openai"]
    assert mini.provider.allow_fallbacks is True
    assert mini.extra == {"temperature": 0, "seed": 7}
    adhoc = resolve_candidate("openai/gpt-4o", config, overrides={"api_base": "http://h/v1"})
    assert adhoc.model == "openai/gpt-4o" and adhoc.api_base == "http://h/v1"
    with pytest.raises(InputError, match="no candidate named 'mimi'"):
        resolve_candidate("mimi", config, "callgate.toml", explicit_config=True)
    with pytest.raises(InputError) as info:
        resolve_candidate("openai/gpt-4o", overrides={"extra": parse_params(["max_tokens=5"])})
    assert info.value.field == "extra.max_tokens"
    assert "truncates" in info.value.message


def test_param_values_are_json_when_they_parse() -> None:
    assert parse_params(["temperature=0", "tool_choice=auto", 'stop=["x"]']) == {
        "temperature": 0,
        "tool_choice": "auto",
        "stop": ["x"],
    }
    with pytest.raises(InputError, match="KEY=VALUE"):
        parse_params(["oops"])


def test_cli_exits_2_naming_file_and_field(tmp_path: Path) -> None:
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "tools.json").write_text("[]")
    (suite / "cases.jsonl").write_text(
        '{"id": "a", "messages": [{"role": "user", "content": "hi"}], '
        '"expect": {"type": "no_call"}}\n'
    )
    config = write(tmp_path, '[[candidates]]\nname = "m"\nmodel = "openai/x"\nmax_tokens = 10\n')
    result = CliRunner().invoke(
        app,
        [
            "run",
            str(suite),
            "--model",
            "m",
            "--config",
            str(config),
            "--db",
            str(tmp_path / "x.db"),
        ],
    )
    assert result.exit_code == 2, result.output
    assert f"{config}:4: candidates[0].max_tokens:" in result.output
    result = CliRunner().invoke(
        app,
        [
            "run",
            str(suite),
            "-m",
            "openai/x",
            "--param",
            "max_tokens=5",
            "--db",
            str(tmp_path / "x.db"),
        ],
    )
    assert result.exit_code == 2
    assert "max_tokens" in result.output and "truncates" in result.output


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"aws_secret_access_key": "abc"}, "extra.aws_secret_access_key"),
        ({"openai_api_key": "sk-1"}, "extra.openai_api_key"),
        ({"apiKey": "sk-1"}, "extra.apiKey"),
        ({"access_token": "t"}, "extra.access_token"),
        ({"password": "p"}, "extra.password"),
        ({"Authorization": "Bearer sk-1"}, "extra.Authorization"),
        ({"extra_headers": {"Authorization": "Bearer sk-1"}}, "extra.extra_headers"),
        ({"extra_headers": {"X-Api-Key": "sk-1"}}, "extra.extra_headers"),
        ({"api_key": "sk-1"}, "extra.api_key"),
    ],
)
def test_credentials_in_extra_are_refused(extra: dict, field: str) -> None:
    with pytest.raises(InputError) as info:
        resolve_candidate("openai/gpt-4o", overrides={"extra": extra})
    assert info.value.field == field, info.value
    assert "api_key_env" in info.value.message
    assert "sk-1" not in str(info.value) and "Bearer" not in str(info.value)


def test_credentials_given_as_params_are_refused() -> None:
    with pytest.raises(InputError) as info:
        resolve_candidate("openai/gpt-4o", overrides={"extra": parse_params(["api-key=sk-1"])})
    assert "api_key_env" in info.value.message and "sk-1" not in str(info.value)
    # Token counts and such are not credentials.
    fine = {"min_tokens": 1, "prompt_cache_key": "c", "temperature": 0, "top_k": 5,
            "thinking": {"budget_tokens": 1024}, "extra_headers": {"X-Title": "callgate"}}
    assert resolve_candidate("openai/gpt-4o", overrides={"extra": fine}).extra == fine


@pytest.mark.parametrize(
    "api_base",
    ["https://user:s3cret@host.example/v1", "https://host.example/v1?api-key=s3cret",
     "https://s3cret@host.example/v1"],
)
def test_credentials_in_api_base_are_refused(tmp_path: Path, api_base: str) -> None:
    with pytest.raises(InputError) as info:
        resolve_candidate("openai/gpt-4o", overrides={"api_base": api_base})
    assert info.value.field == "api_base" and "api_key_env" in info.value.message
    assert "s3cret" not in str(info.value)
    err = error_of(tmp_path, f'[[candidates]]\nmodel = "openai/x"\napi_base = "{api_base}"')
    assert err.field == "candidates[0].api_base" and "s3cret" not in str(err)
    plain = resolve_candidate("openai/gpt-4o", overrides={"api_base": "http://localhost:8000/v1"})
    assert plain.api_base == "http://localhost:8000/v1"


def test_a_config_that_is_not_utf8_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "callgate.toml"
    path.write_bytes(b'[[candidates]]\nmodel = "openai/x"\nname = "caf\xe9"\n')
    with pytest.raises(InputError) as info:
        load_config(path)
    assert info.value.path == str(path) and info.value.line == 3 and "UTF-8" in info.value.message
