"""A model that plays the user of a case's scenario (docs/simulated-user.md): a spec pinned as a
judge's is (a prompt file, a dated model, its parameters, the stop token; `users/`), whose
fingerprint names all of them, and what it is sent for each user turn: the prompt with the
scenario filled in as its system message, then the conversation so far seen from the user's
side (the agent's replies as the user's inbox, the user's own messages as its answers; tool
calls and results are the agent's business and not shown), as tau2-bench's user simulator
is asked."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from callgate.errors import InputError, from_validation_error
from callgate.models.config import Candidate
from callgate.reading import read_text, reading_toml
from callgate.suites.cases import Scenario

STOP = "###STOP###"
_DATED = re.compile(r"(\d{4}-\d{2}-\d{2}|\d{8}|-\d{4}$)")
_PLACEHOLDERS = ("{{scenario}}", "{{stop}}")


class UserParameters(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    temperature: float = Field(0.0, allow_inf_nan=False)
    extra: dict[str, Any] = Field(default_factory=dict)


class UserSpec(BaseModel):
    """A frozen simulated user: prompt + dated model + parameters + stop token."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str = Field(min_length=1)
    model: str
    prompt: str  # the Markdown template's path, relative to the spec file
    api_base: str | None = None
    api_key_env: str | None = Field(None, min_length=1)
    stop: str = Field(STOP, min_length=3)
    parameters: UserParameters = Field(default_factory=UserParameters)

    @field_validator("model")
    @classmethod
    def _dated(cls, value: str) -> str:
        if not _DATED.search(value):
            raise ValueError("looks like a floating alias (the value is not shown: it may be a "
                             "pasted key); name a dated snapshot (e.g. "
                             "openai/gpt-4.1-2025-04-14) so the simulated user cannot change "
                             "under you")
        return value


class SimulatedUser(BaseModel):
    """A loaded spec with its prompt text, fingerprint and the candidate it is called as."""

    model_config = ConfigDict(frozen=True)
    spec: UserSpec
    template: str
    fingerprint: str
    candidate: Candidate

    def record(self) -> dict[str, str]:
        """What a run keeps of it (runs.user_simulator): enough to name a change."""
        return {"name": self.spec.name, "model": self.spec.model,
                "fingerprint": self.fingerprint}

    def system_prompt(self, scenario: Scenario) -> str:
        return (self.template.replace("{{scenario}}", scenario_text(scenario))
                .replace("{{stop}}", self.spec.stop))

    def messages(self, scenario: Scenario, conversation: list[dict[str, Any]]
                 ) -> list[dict[str, Any]]:
        """What the user model is sent: the system prompt, then the conversation flipped."""
        flipped: list[dict[str, Any]] = [{"role": "system",
                                          "content": self.system_prompt(scenario)}]
        for message in conversation:
            role, content = message.get("role"), message.get("content")
            if role not in ("user", "assistant") or not isinstance(content, str):
                continue  # system prompts, tool results, calls without text
            if role == "assistant" and message.get("tool_calls"):
                continue  # the agent at work, not talking to the user
            flipped.append({"role": "assistant" if role == "user" else "user",
                            "content": content})
        return flipped


def scenario_text(scenario: Scenario) -> str:
    """The scenario as the prompt shows it (its secrets never: they are what must not be
    said, and what the user model is not told cannot leak)."""
    parts = [f"Instructions: {scenario.instructions}"]
    if scenario.known:
        parts.append("What you know (tell it when asked):\n" + "\n".join(
            f"- {key}: {value}" for key, value in scenario.known.items()))
    if scenario.done_when:
        parts.append(f"You are done when: {scenario.done_when}")
    return "\n\n".join(parts)


def user_fingerprint(spec: UserSpec, template: str) -> str:
    """SHA-256 over the canonical prompt text, model, endpoint, parameters and stop token."""
    payload = {
        "prompt": template.replace("\r\n", "\n").strip() + "\n",
        "model": spec.model,
        "api_base": spec.api_base,
        "parameters": spec.parameters.model_dump(mode="json"),
        "stop": spec.stop,
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()
                          ).hexdigest()


_PACKAGE = Path(__file__).resolve().parent.parent  # the callgate package


def user_spec_path(value: Path | str) -> Path:
    """A simulated user's spec by path (users/default.toml), or by name (default): a bare NAME
    that is not a file is looked up as `./users/NAME.toml`, then in the copy the wheel carries
    (`callgate/defaults/users/`, hatch force-include) or, in a source checkout, the top-level
    `users/` folder. A path found nowhere is returned as given, to be reported not found."""
    given = Path(value)
    text = str(value)
    if given.exists() or "/" in text or "\\" in text or text.startswith("."):
        return given
    stem = given.name.removesuffix(".toml")
    folders = (Path("users"), _PACKAGE / "defaults" / "users", _PACKAGE.parent.parent / "users")
    for folder in folders:
        if (folder / f"{stem}.toml").is_file():
            return folder / f"{stem}.toml"
    return given


def load_user(path: Path | str) -> SimulatedUser:
    """Load a simulated user's spec (TOML, its prompt file beside it; a bare name is looked up
    by `user_spec_path`); InputError names file, line and field."""
    source = user_spec_path(path)
    with reading_toml(source, missing="simulated user spec not found") as raw:
        spec = _checked(source, raw)
    prompt_path = source.parent / spec.prompt
    if not prompt_path.is_file():
        raise InputError(source, f"prompt file {prompt_path} not found", field="prompt")
    template = read_text(prompt_path)
    missing = [p for p in _PLACEHOLDERS if p not in template]
    if missing:
        raise InputError(prompt_path, f"missing placeholder(s): {', '.join(missing)}")
    params = spec.parameters
    candidate = Candidate(
        name=f"user:{spec.name}", model=spec.model, api_base=spec.api_base,
        api_key_env=spec.api_key_env, reasoning_effort="omit",
        extra={"temperature": params.temperature, **params.extra})
    return SimulatedUser(spec=spec, template=template,
                         fingerprint=user_fingerprint(spec, template), candidate=candidate)


def _checked(source: Path, raw: Mapping[str, Any]) -> UserSpec:
    if "api_key" in raw:
        raise InputError(source, "a key is never written in the spec: put it in an "
                                 "environment variable and name it in api_key_env",
                         field="api_key")
    try:
        return UserSpec.model_validate(raw)
    except ValidationError as exc:
        raise from_validation_error(source, None, exc) from None
