"""Candidates: the models a live run calls, read from `callgate.toml` or built from flags.

```toml
[[candidates]]
name = "mini"                                  # what runs are filed under (default: model)
model = "openrouter/openai/gpt-4o-mini"        # litellm model id
api_key_env = "OPENROUTER_API_KEY"             # the NAME of the variable holding the key
reasoning_effort = "low"                       # the default for every candidate; "omit": unsent
provider = { order = ["openai"], allow_fallbacks = false }   # OpenRouter only
extra = { temperature = 0 }                    # further request parameters

[[candidates]]
name = "support-agent"                         # the agent under test itself (docs/targets.md)
target = "python:my_agent.entry:answer"        # or http://host/path, or cmd:"command args"
target_version = "2026.11.3"                   # optional: else the version the target reports
```

A key is never written in the file; a configured max_tokens is refused (see MAX_TOKENS_WHY).
"""

from __future__ import annotations

import datetime
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from callgate.errors import InputError
from callgate.models.targets import parse_target
from callgate.reading import JSONLimitError, loads, reading_toml, validate
from callgate.redaction import looks_secret

DEFAULT_CONFIG = Path("callgate.toml")
FLAGS = "command line"

# "omit" sends no reasoning_effort at all, for models that reject the parameter.
ReasoningEffort = Literal["none", "minimal", "low", "medium", "high", "xhigh", "max", "omit"]
ClientChoice = Literal["auto", "lean", "litellm"]

MAX_TOKENS_KEYS = frozenset({"max_tokens", "max_completion_tokens", "max_output_tokens"})
MAX_TOKENS_WHY = (
    "is refused: a response cut off at a token limit truncates the tool-call JSON, which then "
    "looks like invalid JSON, an argument error the model did not make; leave it unset"
)


def refuse_max_tokens(keys: Iterable[str]) -> None:
    """The one max-tokens rule, for candidates and judges alike: raise on the first key that
    sets a token limit (a cut-off reply is unreadable JSON, never the model's mistake)."""
    for key in keys:
        if key in MAX_TOKENS_KEYS:
            raise _FieldError(key, MAX_TOKENS_WHY)
# Parameters callgate sets itself; `extra` may not override them.
RESERVED = {
    "model": "set the candidate's `model`",
    "messages": "messages come from the suite",
    "tools": "tools come from the suite's tools.json",
    "stream": "callgate reads whole responses",
    "n": "use repeats (--repeats) for several answers",
    "api_key": "name the environment variable in `api_key_env`",
    "api_base": "set the candidate's `api_base`",
    "base_url": "set the candidate's `api_base`",
    "reasoning_effort": "set the candidate's `reasoning_effort`",
    "reasoning": "set the candidate's `reasoning_effort`",
    "provider": "set the candidate's `provider` table",
    "extra_body": "put the parameters in `extra` directly",
}
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

# `extra` goes into every request record stored: parameters (and headers) whose names read as
# credentials are refused (callgate.redaction.looks_secret, the one rule).
HEADER_PARAMS = ("extra_headers", "headers")
USE_KEY_ENV = (
    "would be stored with every request; put the key in an environment variable and give "
    "that variable's name in api_key_env"
)


def refuse_non_json(params: Mapping[str, Any]) -> None:
    """Request parameters are sent as JSON: a TOML date or time, or a float JSON has no number
    for (inf, nan), is refused naming its place instead of failing (or being sent as invalid
    JSON) at the first request."""
    stack: list[tuple[Any, str]] = [(v, str(k)) for k, v in params.items()]
    while stack:
        node, where = stack.pop()
        if isinstance(node, datetime.date | datetime.time):
            raise _FieldError(where, "a TOML date or time is not a request parameter (JSON has "
                                     "none): write it as a string")
        if isinstance(node, float) and not math.isfinite(node):
            raise _FieldError(where, f"{node} is not a JSON number")
        if isinstance(node, Mapping):
            stack.extend((v, f"{where}.{k}") for k, v in node.items())
        elif isinstance(node, list):
            stack.extend((v, f"{where}[{i}]") for i, v in enumerate(node))


class _FieldError(ValueError):
    """A validation error about one named field of the model being validated."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")


class ProviderRouting(BaseModel):
    """OpenRouter's `provider` request object (https://openrouter.ai/docs/features/provider-routing)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    order: list[str] | None = None
    allow_fallbacks: bool | None = None
    require_parameters: bool | None = None
    only: list[str] | None = None
    ignore: list[str] | None = None


class Candidate(BaseModel):
    """One model under test and the exact conditions it is called under."""

    # A refused value may be the key itself (a target spec, extra): never echoed in an error.
    model_config = ConfigDict(extra="forbid", frozen=True, hide_input_in_errors=True)
    # The agent: the stable name releases are filed under and gated along (a model change
    # keeps it); `run --agent` overrides it.
    name: str = Field(min_length=1, description="the agent runs are filed under; default: model")
    model: str = Field(min_length=1, description="litellm model id, e.g. openrouter/openai/gpt-4o")
    api_base: str | None = None
    api_key_env: str | None = None
    reasoning_effort: ReasoningEffort = "low"
    provider: ProviderRouting | None = None
    extra: dict[str, Any] = Field(default_factory=dict)
    client: ClientChoice = "auto"
    # The agent under test, called instead of the model (docs/targets.md); `model` then only
    # names what the agent runs on (default: the target spec).
    target: str | None = None
    target_version: str | None = Field(None, min_length=1)

    @model_validator(mode="before")
    @classmethod
    def _refused_fields(cls, raw: Any) -> Any:
        if isinstance(raw, Mapping):
            refuse_max_tokens(raw)
            for key in raw:
                if key == "api_key":
                    raise _FieldError(
                        key,
                        "a key is never written in the config: put it in an environment "
                        "variable and give that variable's name in api_key_env",
                    )
            if isinstance(raw.get("target"), str):  # the agent is the target, not its model
                raw = {**raw, "name": raw.get("name") or raw["target"],
                       "model": raw.get("model") or raw["target"]}
            if not raw.get("name") and isinstance(raw.get("model"), str):
                raw = {**raw, "name": raw["model"]}
        return raw

    @field_validator("api_key_env")
    @classmethod
    def _env_name(cls, value: str | None) -> str | None:
        if value is not None and not _ENV_NAME.match(value):
            raise ValueError(
                "must be the NAME of an environment variable (e.g. OPENROUTER_API_KEY), "
                "never the key itself"
            )
        return value

    @field_validator("extra")
    @classmethod
    def _extra(cls, value: dict[str, Any]) -> dict[str, Any]:
        refuse_max_tokens(value)
        refuse_non_json(value)
        for key in value:
            if key in RESERVED:
                raise _FieldError(key, f"cannot be set here: {RESERVED[key]}")
            if looks_secret(key):
                raise _FieldError(key, f"looks like a credential, which {USE_KEY_ENV}")
            headers = value[key] if key in HEADER_PARAMS else None
            for header in headers if isinstance(headers, Mapping) else ():
                if looks_secret(str(header)):
                    raise _FieldError(
                        key, f"the header {header!r} carries a credential, which {USE_KEY_ENV}"
                    )
        return value

    @field_validator("target")
    @classmethod
    def _target_spec(cls, value: str | None) -> str | None:
        if value is None:
            return None
        spec = parse_target(value)  # refuses a spec that carries a credential
        return spec.text

    @field_validator("api_base")
    @classmethod
    def _plain_url(cls, value: str | None) -> str | None:
        if value is None:
            return value
        parts = urlsplit(value)
        if "@" in parts.netloc or parts.query:
            # Never echo the value: it may hold the secret.
            raise ValueError(
                "must not carry credentials (user:password@host) or a query string (?...): the "
                "api_base is recorded with every run and request; put the key in an environment "
                "variable and give that variable's name in api_key_env"
            )
        return value

    @model_validator(mode="after")
    def _consistent(self) -> Candidate:
        if self.target is not None:
            for name in ("api_base", "api_key_env", "provider"):
                if name == "api_key_env" and self.target.startswith(("http://", "https://")):
                    continue  # the variable whose key is sent to the HTTP target
                if getattr(self, name) is not None:
                    raise _FieldError(name, "does not apply to a target, which calls its own "
                                            "model: configure it in the agent")
            if self.extra:
                raise _FieldError("extra", "does not apply to a target, which calls its own "
                                           "model: configure it in the agent")
        elif self.target_version is not None:
            raise _FieldError("target_version", "names the version of a target: set target")
        if self.provider is not None and not self.is_openrouter:
            raise _FieldError(
                "provider", "provider routing applies to OpenRouter models (openrouter/...) only"
            )
        return self

    def parameters(self) -> dict[str, Any]:
        """The parameters the model is called with, as recorded with each run: no name, no
        model id, no key variable."""
        return self.model_dump(mode="json", exclude_none=True,
                               exclude={"name", "model", "api_key_env", "client"})

    @property
    def route(self) -> str:
        """litellm's provider prefix of the model id ('' when the id has none)."""
        prefix, sep, _ = self.model.partition("/")
        return prefix if sep else ""

    @property
    def is_openrouter(self) -> bool:
        return self.route == "openrouter"

    def provider_block(self) -> dict[str, Any] | None:
        """The `provider` object sent to OpenRouter: require_parameters defaults to true."""
        if not self.is_openrouter:
            return None
        block = self.provider.model_dump(exclude_none=True) if self.provider else {}
        block.setdefault("require_parameters", True)
        return block


class ConfigFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    candidates: list[Candidate] = Field(min_length=1)
    # `[gate]`: callgate gate's settings, checked by gating.quarantine.gate_settings (rule,
    # adaptive, quarantine, the slice rule)
    gate: dict[str, Any] | None = None

    @field_validator("candidates")
    @classmethod
    def _unique(cls, value: list[Candidate]) -> list[Candidate]:
        seen: set[str] = set()
        for index, candidate in enumerate(value):
            if candidate.name in seen:
                raise _FieldError(f"[{index}].name", f"duplicate candidate name {candidate.name!r}")
            seen.add(candidate.name)
        return value

    def find(self, name: str) -> Candidate | None:
        return next((c for c in self.candidates if c.name == name), None)


def load_config(path: Path | str) -> ConfigFile:
    """Read and check a callgate.toml. Raises InputError naming the file, line and field."""
    source = Path(path)
    with reading_toml(source) as raw:
        return validate(ConfigFile, raw, source)


def parse_params(items: Sequence[str]) -> dict[str, Any]:
    """`--param KEY=VALUE` flags: VALUE is read as JSON when it parses, else as a string."""
    params: dict[str, Any] = {}
    for item in items:
        key, sep, text = item.partition("=")
        if not sep or not key.strip():
            raise InputError(FLAGS, f"--param {item!r}: expected KEY=VALUE")
        try:
            value = loads(text)
        except json.JSONDecodeError:
            value = text
        except JSONLimitError as exc:
            raise InputError(FLAGS, f"--param {key.strip()}: {exc.message}") from None
        params[key.strip()] = value
    return params


def resolve_candidate(
    model: str,
    config: ConfigFile | None = None,
    config_path: Path | str | None = None,
    *,
    explicit_config: bool = False,
    overrides: Mapping[str, Any] | None = None,
) -> Candidate:
    """The candidate to run: `model` names one in the config, else it is a litellm model id.

    `overrides` (from flags) replace the candidate's fields; `provider` and `extra` merge key by
    key. With an explicitly given config, an unknown name is an error rather than a model id.
    A candidate that fails its checks is the flags' doing (a configured one was checked when
    the config was read), so the error names the command line, not a line of the config.
    """
    overrides = {k: v for k, v in (overrides or {}).items() if v is not None}
    base: dict[str, Any]
    found = config.find(model) if config is not None else None
    if found is not None:
        base = found.model_dump(exclude_none=True)
    elif explicit_config and config is not None:
        names = ", ".join(c.name for c in config.candidates)
        raise InputError(
            config_path or FLAGS, f"no candidate named {model!r} (candidates: {names})"
        )
    else:
        base = {"model": model}
    merged = dict(base)
    for key, value in overrides.items():
        if key in ("provider", "extra") and isinstance(value, Mapping):
            merged[key] = {**(base.get(key) or {}), **value}
        else:
            merged[key] = value
    return validate(Candidate, merged, FLAGS)
