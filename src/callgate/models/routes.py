"""Where a candidate's requests go: the route a model id names, the endpoint it maps to and the
environment variable that holds its key. `route_for` turns a configured `Candidate` into a
`ModelRoute` (model, wire model, parameters, key variable, and the URL the lean client posts to
when the route is OpenAI-compatible); `ModelRoute.body` builds the chat-completions body both
clients send and `api_key` reads the key from the environment at the moment a run needs it. A
`ModelRoute` holds no key, so it can be recorded with the request.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from callgate.errors import InputError
from callgate.models.config import FLAGS, Candidate
from callgate.reading import canonical_json

# Routes the lean client serves, with their default endpoints. litellm sends these the request
# unchanged (tools included); it rewrites tools for some other routes, e.g. hosted_vllm.
LEAN_BASES = {
    "openrouter": "https://openrouter.ai/api/v1",
    "openai": "https://api.openai.com/v1",
}
DEFAULT_KEY_ENV = {"openrouter": "OPENROUTER_API_KEY", "openai": "OPENAI_API_KEY"}


@dataclass(frozen=True)
class ModelRoute:
    """Where a candidate's requests go and the parameters they carry. Holds no key."""

    model: str
    route: str
    api_base: str | None
    wire_model: str
    params: dict[str, Any]
    key_env: str | None
    lean_url: str | None  # None: only litellm can reach this model
    # Set for a run with the tool surface worded another way (run --perturb): its answers are
    # cached apart, even where canonical JSON cannot tell the request from the clean one
    # (parameters in another order).
    salt: str | None = None

    @property
    def is_openrouter(self) -> bool:
        return self.route == "openrouter"

    def body(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
        """The chat-completions body, exactly as the lean client posts it."""
        body: dict[str, Any] = {"model": self.wire_model, "messages": messages}
        if tools:
            body["tools"] = tools
        body.update(self.params)
        return body

    def cache_key(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], repeat: int
    ) -> str:
        """SHA-256 of (model id, api base, parameters, messages, tools, repeat index)."""
        material = {
            "model": self.model,
            "api_base": self.api_base,
            "params": self.params,
            "messages": messages,
            "tools": tools,
            "repeat": repeat,
        }
        if self.salt is not None:
            material["perturbation"] = self.salt
        return hashlib.sha256(canonical_json(material).encode()).hexdigest()

    def served_by(self) -> str | None:
        """Who serves replies that do not name a provider: the route, or the api_base host."""
        if self.is_openrouter:
            return None
        if self.api_base:
            return urlsplit(self.api_base).netloc or self.api_base
        return self.route or None

    def request_record(self, client: str, body: dict[str, Any]) -> dict[str, Any]:
        """The request as sent, for the store: no key, only the name of its variable."""
        return {
            "client": client,
            "model": self.model,
            "url": self.lean_url if client == "lean" else self.api_base,
            "api_key_env": self.key_env,
            "body": body,
        }


def route_for(candidate: Candidate) -> ModelRoute:
    route = candidate.route
    params: dict[str, Any] = {}
    if candidate.reasoning_effort != "omit":
        params["reasoning_effort"] = candidate.reasoning_effort
    block = candidate.provider_block()
    if block is not None:
        params["provider"] = block
        params["usage"] = {"include": True}  # OpenRouter reports usage.cost with this
    params.update(candidate.extra)
    key_env = candidate.api_key_env
    # An openai/ model with its own api_base (vLLM, Ollama, ...) must not get OPENAI_API_KEY.
    own_server = route == "openai" and candidate.api_base is not None
    if key_env is None and not own_server:
        key_env = DEFAULT_KEY_ENV.get(route)
    lean_url = None
    if route in LEAN_BASES:
        lean_url = (candidate.api_base or LEAN_BASES[route]).rstrip("/") + "/chat/completions"
    wire_model = candidate.model.partition("/")[2] if route else candidate.model
    return ModelRoute(
        model=candidate.model,
        route=route,
        api_base=candidate.api_base,
        wire_model=wire_model,
        params=params,
        key_env=key_env,
        lean_url=lean_url,
    )


def api_key(route: ModelRoute, environ: Mapping[str, str]) -> str | None:
    """The key from the variable the candidate names; an unset variable is a usage error."""
    if route.key_env is None:
        return None
    value = environ.get(route.key_env)
    if not value:
        raise InputError(
            FLAGS,
            f"environment variable {route.key_env} is not set; it should hold the API key "
            f"for {route.model} (set api_key_env to name another variable)",
        )
    return value
