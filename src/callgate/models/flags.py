"""The candidate a command line names (`callgate run`): a candidate's name in the config, or a
litellm model id (`--model`), or the agent under test (`--target`), with the flags that
override its fields (endpoint, key variable, reasoning effort, OpenRouter routing, extra
request parameters, client, target version)."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict

from callgate.errors import CallgateError
from callgate.models.config import (
    DEFAULT_CONFIG,
    Candidate,
    load_config,
    parse_params,
    resolve_candidate,
)


class CandidateFlags(BaseModel):
    """What the command line says of the candidate, as given (None: not given)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    model: str | None = None
    target: str | None = None
    target_version: str | None = None
    config: Path | None = None  # None: ./callgate.toml if present
    api_base: str | None = None
    api_key_env: str | None = None
    reasoning_effort: str | None = None
    provider_order: str | None = None  # comma-separated
    allow_fallbacks: bool | None = None
    require_parameters: bool | None = None
    params: list[str] = []
    client: str | None = None

    @property
    def config_path(self) -> Path | None:
        """The candidates file read: the one given, else ./callgate.toml when there is one."""
        return self.config or (DEFAULT_CONFIG if DEFAULT_CONFIG.is_file() else None)


def candidate_for(flags: CandidateFlags) -> Candidate:
    """The candidate the flags name, its fields overridden by the flags given; CallgateError
    (an InputError naming the file and line where it is the config's) says what is wrong."""
    config_path = flags.config_path
    candidates = load_config(config_path) if config_path is not None else None
    order = None
    if flags.provider_order is not None:
        order = [name.strip() for name in flags.provider_order.split(",") if name.strip()]
    provider = {
        key: value
        for key, value in (
            ("order", order),
            ("allow_fallbacks", flags.allow_fallbacks),
            ("require_parameters", flags.require_parameters),
        )
        if value is not None
    }
    overrides = {
        "api_base": flags.api_base,
        "api_key_env": flags.api_key_env,
        "reasoning_effort": flags.reasoning_effort,
        "client": flags.client,
        "provider": provider or None,
        "extra": parse_params(flags.params) or None,
        "target": flags.target,
        "target_version": flags.target_version,
    }
    if flags.model is None and flags.target is None:
        raise CallgateError("name what to run: --model (a candidate or a model id) or "
                            "--target (the agent under test)")
    return resolve_candidate(
        flags.model or flags.target or "",
        candidates if flags.model is not None else None,
        config_path,
        explicit_config=flags.config is not None,
        overrides=overrides,
    )
