"""The two ways callgate reaches a model, behind one interface.

- `LitellmClient`: litellm, for every provider litellm knows (Anthropic, Gemini, Bedrock, ...).
- `LeanClient`: a plain aiohttp POST to an OpenAI-compatible chat-completions endpoint
  (`openrouter/...`, `openai/...`, and any `openai/...` model with an api_base such as vLLM or
  Ollama). It sends the same body litellm sends for these routes and reads the replies the
  same way, at a fraction of the CPU; tests run both against one server and compare.

Both take the request body built by `Target.body` and return a `Reply` (the completion JSON) or
a classified `ProviderFailure`; retrying is the run stage's job. litellm is imported only here,
only when a model is called or priced, with its offline switches set first.
"""

from __future__ import annotations

import asyncio
import email.utils
import hashlib
import importlib.util
import json
import math
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit

from callgate.errors import InputError
from callgate.models.config import FLAGS, Candidate
from callgate.reading import canonical_json, loads
from callgate.suites.responses import INT64_MAX, TOKEN_FIELDS

if TYPE_CHECKING:  # imported where a request is sent: scoring recorded answers never needs it
    import aiohttp

# Routes the lean client serves, with their default endpoints. litellm sends these the request
# unchanged (tools included); it rewrites tools for some other routes, e.g. hosted_vllm.
LEAN_BASES = {
    "openrouter": "https://openrouter.ai/api/v1",
    "openai": "https://api.openai.com/v1",
}
DEFAULT_KEY_ENV = {"openrouter": "OPENROUTER_API_KEY", "openai": "OPENAI_API_KEY"}
RETRYABLE = frozenset({"rate_limit", "server_error", "timeout", "connection", "bad_response"})
# Failures that every further attempt would repeat: the run stops at the first one.
FATAL = frozenset({"auth", "payment", "not_found"})
MESSAGE_LIMIT = 500
REDACTED = "[redacted]"

# litellm's finish_reason normalisation (litellm_core_utils.core_helpers.map_finish_reason) for
# the values OpenAI-compatible servers send; anything else becomes "stop", as in litellm.
FINISH_REASONS = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool_calls",
    "content_filter": "content_filter",
    "function_call": "function_call",
    "stop_sequence": "stop",
    "end_turn": "stop",
    "eos": "stop",
    "eos_token": "stop",
    "max_tokens": "length",
    "tool_use": "tool_calls",
    "refusal": "content_filter",
}


def import_litellm() -> Any:
    """Import litellm with its network-at-import switched off (seconds, so only when needed)."""
    os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.suppress_debug_info = True  # else it prints help banners on stdout with each error
    return litellm


# --------------------------------------------------------------------------- the request


@dataclass(frozen=True)
class Target:
    """Where a candidate's requests go and the parameters they carry. Holds no key."""

    model: str
    route: str
    api_base: str | None
    wire_model: str
    params: dict[str, Any]
    key_env: str | None
    lean_url: str | None  # None: only litellm can reach this model

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


def target_for(candidate: Candidate) -> Target:
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
    return Target(
        model=candidate.model,
        route=route,
        api_base=candidate.api_base,
        wire_model=wire_model,
        params=params,
        key_env=key_env,
        lean_url=lean_url,
    )


def api_key(target: Target, environ: Mapping[str, str]) -> str | None:
    """The key from the variable the candidate names; an unset variable is a usage error."""
    if target.key_env is None:
        return None
    value = environ.get(target.key_env)
    if not value:
        raise InputError(
            FLAGS,
            f"environment variable {target.key_env} is not set; it should hold the API key "
            f"for {target.model} (set api_key_env to name another variable)",
        )
    return value


# --------------------------------------------------------------------------- replies


@dataclass(frozen=True)
class Reply:
    """A completion as the provider returned it."""

    body: dict[str, Any]
    latency_ms: float
    finish_reason: str | None = None  # set when the client normalised the body's value


@dataclass(frozen=True)
class ProviderFailure:
    """A request that produced no usable completion, classified."""

    kind: str
    message: str
    status: int | None = None
    retry_after: float | None = None
    latency_ms: float | None = None

    @property
    def retryable(self) -> bool:
        return self.kind in RETRYABLE


def classify_status(status: int) -> str:
    if status == 429:
        return "rate_limit"
    if status == 408:
        return "timeout"
    if status >= 500:
        return "server_error"
    if status == 401:
        return "auth"
    if status == 402:
        return "payment"
    if status == 403:
        return "refused"
    if status == 404:
        return "not_found"
    if 400 <= status < 500:
        return "bad_request"
    return "bad_response"


def _header(headers: Any, name: str) -> str | None:
    if not headers:
        return None
    value = headers.get(name)
    if value is None and isinstance(headers, Mapping):
        value = next((v for k, v in headers.items() if str(k).lower() == name), None)
    return None if value is None else str(value)


def parse_retry_after(headers: Any) -> float | None:
    """Seconds to wait from `retry-after-ms` or `Retry-After` (seconds or an HTTP date)."""
    millis = _header(headers, "retry-after-ms")
    if millis is not None:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = _header(headers, "retry-after")
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = (when - datetime.now(UTC)).total_seconds()
    return max(0.0, seconds) if math.isfinite(seconds) else None


def error_message(data: Any) -> str | None:
    """The message of an OpenAI-style error body: {"error": {"message": ...}}."""
    if isinstance(data, Mapping):
        inner = data.get("error", data)
        if isinstance(inner, Mapping) and isinstance(inner.get("message"), str):
            return inner["message"]
        if isinstance(inner, str):
            return inner
    return None


def _redact(text: str, secret: str | None) -> str:
    return text.replace(secret, REDACTED) if secret and secret in text else text


def _short(text: str) -> str:
    return text if len(text) <= MESSAGE_LIMIT else text[:MESSAGE_LIMIT] + "…"


def _timeout_message(timeout: float) -> str:
    return f"no response within {timeout:g} s"


class Client(Protocol):
    """Sends one request; never retries (the run stage does)."""

    name: str

    async def send(self, body: dict[str, Any], timeout: float) -> Reply | ProviderFailure: ...

    async def aclose(self) -> None: ...


# --------------------------------------------------------------------------- lean client


class LeanClient:
    """aiohttp straight to an OpenAI-compatible /chat/completions endpoint."""

    name = "lean"

    def __init__(self, target: Target, key: str | None, concurrency: int) -> None:
        if target.lean_url is None:
            raise InputError(
                FLAGS,
                f"client lean: {target.model} is not an OpenAI-compatible route callgate calls "
                f"directly ({', '.join(f'{r}/...' for r in LEAN_BASES)}); use client litellm",
            )
        self._url = target.lean_url
        self._key = key
        self._limit = concurrency
        self._headers = {"Content-Type": "application/json"}
        if key:
            self._headers["Authorization"] = f"Bearer {key}"
        self._session: aiohttp.ClientSession | None = None

    def _open(self) -> aiohttp.ClientSession:
        import aiohttp

        if self._session is None:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=self._limit, ttl_dns_cache=300),
                raise_for_status=False,
            )
        return self._session

    async def send(self, body: dict[str, Any], timeout: float) -> Reply | ProviderFailure:
        import aiohttp

        session = self._open()
        data = json.dumps(body, ensure_ascii=False).encode()
        started = time.perf_counter()
        try:
            async with session.post(
                self._url,
                data=data,
                headers=self._headers,
                timeout=aiohttp.ClientTimeout(total=timeout),
            ) as response:
                raw = await response.read()
                status = response.status
                headers = response.headers
        except TimeoutError:
            return ProviderFailure("timeout", _timeout_message(timeout), latency_ms=_ms(started))
        except aiohttp.ClientError as exc:
            message = _redact(f"{type(exc).__name__}: {exc}", self._key)
            return ProviderFailure("connection", _short(message), latency_ms=_ms(started))
        latency = _ms(started)
        text = raw.decode("utf-8", errors="replace")
        if self._key and self._key in text:
            text = _redact(text, self._key)
        try:
            payload = loads(text, constants=True)  # NaN costs are cleaned in reply_line
        except ValueError as exc:  # not JSON, or nested too deep to read
            if status >= 400:
                return self._status_failure(status, text, headers, latency)
            return ProviderFailure(
                "bad_response",
                _short(f"the body is not valid JSON ({exc}): {text}"),
                status=status,
                latency_ms=latency,
            )
        if status >= 400:
            return self._status_failure(status, payload, headers, latency)
        if not isinstance(payload, dict):
            return ProviderFailure(
                "bad_response", _short(f"not a JSON object: {text}"), status, latency_ms=latency
            )
        if "error" in payload and not payload.get("choices"):
            # OpenRouter can answer 200 with an error object (its `code` is an HTTP status).
            code = payload["error"].get("code") if isinstance(payload["error"], dict) else None
            kind = classify_status(code) if isinstance(code, int) else "bad_response"
            return ProviderFailure(
                kind,
                _short(error_message(payload) or text),
                status=code if isinstance(code, int) else status,
                retry_after=parse_retry_after(headers),
                latency_ms=latency,
            )
        return Reply(payload, latency, _normalised_finish_reason(payload))

    @staticmethod
    def _status_failure(status: int, payload: Any, headers: Any, latency: float) -> ProviderFailure:
        message = error_message(payload) if not isinstance(payload, str) else None
        if message is None:
            message = payload if isinstance(payload, str) else json.dumps(payload)
        return ProviderFailure(
            classify_status(status),
            _short(message),
            status=status,
            retry_after=parse_retry_after(headers),
            latency_ms=latency,
        )

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


def _normalised_finish_reason(payload: dict[str, Any]) -> str | None:
    choices = payload.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return None
    raw = choices[0].get("finish_reason")
    mapped = FINISH_REASONS.get(raw, "stop") if isinstance(raw, str) else "stop"
    return None if mapped == raw else mapped


def _ms(started: float) -> float:
    return (time.perf_counter() - started) * 1000


# --------------------------------------------------------------------------- litellm client


class LitellmClient:
    """litellm.acompletion, with its own retries off."""

    name = "litellm"

    def __init__(self, target: Target, key: str | None) -> None:
        self._litellm = import_litellm()
        self._target = target
        self._key = key
        if key is None and target.route == "openai" and target.api_base:
            # litellm's OpenAI route insists on a key; a keyless local server ignores this one.
            self._key_arg: str | None = "no-key"
        else:
            self._key_arg = key

    async def send(self, body: dict[str, Any], timeout: float) -> Reply | ProviderFailure:
        target = self._target
        params = dict(body)
        params.pop("model", None)
        messages = params.pop("messages")
        tools = params.pop("tools", None)
        kwargs: dict[str, Any] = {}
        if "reasoning_effort" in params:
            kwargs["reasoning_effort"] = params.pop("reasoning_effort")
        if target.lean_url is not None:
            # OpenAI-compatible routes: the rest goes in the body verbatim, as the lean client
            # sends it.
            if params:
                kwargs["extra_body"] = params
        else:
            kwargs.update(params)
        if tools:
            kwargs["tools"] = tools
        if target.api_base:
            kwargs["api_base"] = target.api_base
        if self._key_arg is not None:
            kwargs["api_key"] = self._key_arg
        started = time.perf_counter()
        try:
            async with asyncio.timeout(timeout + 5):  # backstop: litellm enforces `timeout` itself
                response = await self._litellm.acompletion(
                    model=target.model,
                    messages=messages,
                    timeout=timeout,
                    num_retries=0,
                    max_retries=0,
                    **kwargs,
                )
        except TimeoutError:
            return ProviderFailure("timeout", _timeout_message(timeout), latency_ms=_ms(started))
        except Exception as exc:  # litellm maps every provider fault onto its exceptions
            return self._failure(exc, timeout, _ms(started))
        latency = _ms(started)
        payload = response.model_dump(mode="json")
        usage = payload.get("usage")
        if isinstance(usage, dict) and not any(usage.get(k) for k in TOKEN_FIELDS):
            # litellm fills in zeros for a reply that reported no usage: unknown is not 0.
            payload["usage"] = None
        if self._key:
            text = json.dumps(payload)
            if self._key in text:
                payload = json.loads(_redact(text, self._key))
        return Reply(payload, latency)

    def _failure(self, exc: Exception, timeout: float, latency: float) -> ProviderFailure:
        lt = self._litellm
        status = getattr(exc, "status_code", None)
        headers = getattr(exc, "litellm_response_headers", None)
        if headers is None:
            headers = getattr(getattr(exc, "response", None), "headers", None)
        if isinstance(exc, lt.Timeout):
            return ProviderFailure("timeout", _timeout_message(timeout), latency_ms=latency)
        if isinstance(exc, lt.APIConnectionError):
            kind, status = "connection", None
        elif not isinstance(status, int) or status < 400:
            kind = "bad_response"
        else:
            kind = classify_status(status)
        if isinstance(exc, lt.ContentPolicyViolationError):
            kind = "refused"
        message = _redact(_litellm_message(exc), self._key)
        return ProviderFailure(
            kind,
            _short(message),
            status=status if isinstance(status, int) else None,
            retry_after=parse_retry_after(headers),
            latency_ms=latency,
        )

    async def aclose(self) -> None:
        return None


def _litellm_message(exc: Exception) -> str:
    """The provider's own message where litellm kept it, else litellm's text."""
    found = error_message(getattr(exc, "body", None))
    if found:
        return found
    text = str(getattr(exc, "message", None) or exc)
    _, sep, tail = text.partition("Exception - ")
    if sep:
        try:
            found = error_message(json.loads(tail))
        except ValueError:
            found = None
        return found or tail
    return text


def make_client(target: Target, choice: str, key: str | None, concurrency: int) -> Client:
    """The lean client where it can serve the route (unless litellm is asked for), else litellm."""
    if choice == "lean" or (choice == "auto" and target.lean_url is not None):
        return LeanClient(target, key, concurrency)
    return LitellmClient(target, key)


# --------------------------------------------------------------------------- cost and lines


def cost_map_names() -> set[str] | None:
    """Model names in litellm's bundled cost map, read without importing litellm (which takes
    seconds); None when the file is not where litellm keeps it."""
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        path = Path(folder) / "model_prices_and_context_window_backup.json"
        if path.is_file():
            try:
                return set(json.loads(path.read_text(encoding="utf-8")))
            except (OSError, ValueError):
                return None
    return None


class Pricing:
    """USD per reply: OpenRouter's usage.cost, else litellm's cost map; unknown is None."""

    def __init__(self, target: Target) -> None:
        self._model = target.model
        # OpenRouter prices every call itself, and its model ids are not in litellm's map.
        self._use_map = not target.is_openrouter
        self._names = {target.model, target.wire_model, target.wire_model.rpartition("/")[2]}
        self._litellm: Any = None

    def prepare(self) -> None:
        """Before the run starts (an import mid-run would stall requests): import litellm for
        its map, unless the map's own file shows the model is not in it (a local model)."""
        if not self._use_map or self._litellm is not None:
            return
        listed = cost_map_names()
        if listed is not None and not self._names & listed:
            self._use_map = False
            return
        self._litellm = import_litellm()

    def cost(self, body: Mapping[str, Any]) -> float | None:
        usage = body.get("usage")
        if not isinstance(usage, Mapping):
            return None
        reported = usage.get("cost")
        if isinstance(reported, int | float) and not isinstance(reported, bool):
            return float(reported) if math.isfinite(reported) and reported >= 0 else None
        if self._litellm is None or not isinstance(usage.get("prompt_tokens"), int):
            return None
        try:
            value = self._litellm.completion_cost(completion_response=dict(body), model=self._model)
        except Exception:  # not in the map, or not priceable: unknown, not 0
            return None
        return float(value) if isinstance(value, int | float) and math.isfinite(value) else None


def reply_line(
    case_id: str, repeat: int, reply: Reply, *, target: Target, pricing: Pricing
) -> dict[str, Any]:
    """A recorded-response line (docs/formats.md) for a completion: parse it with parse_response."""
    body, notes = _sane_usage(reply.body)
    line: dict[str, Any] = {
        "case_id": case_id,
        "repeat": repeat,
        "response": body,
        "latency_ms": round(reply.latency_ms, 3),
    }
    if notes:
        line["note"] = "; ".join(notes)
    if reply.finish_reason is not None:
        line["finish_reason"] = reply.finish_reason
    if _filtered(body, reply.finish_reason):
        # The provider's filter answered, not the model: a refusal, kept with its body.
        line["error"] = {
            "kind": "refused",
            "message": "the provider's content filter stopped the answer (content_filter)",
        }
    cost = pricing.cost(body)
    if cost is not None:
        line["cost"] = cost
    provider = body.get("provider")
    if not (isinstance(provider, str) and provider):
        provider = target.served_by()
        if provider:
            line["provider"] = provider
    return line


def _sane_usage(body: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The body with token counts SQLite cannot hold and NaN/Infinity costs set to null
    (unknown), and a note on each: a provider's bad bookkeeping never stops a run."""
    usage = body.get("usage")
    if not isinstance(usage, dict):
        return body, []
    clean, notes = dict(usage), []
    for key in TOKEN_FIELDS:
        value = clean.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and not (
            0 <= value <= INT64_MAX
        ):
            clean[key] = None
            notes.append(f"usage.{key} is out of range; kept as unknown (null)")
    cost = clean.get("cost")
    if isinstance(cost, float) and not math.isfinite(cost):
        clean["cost"] = None
        notes.append(f"usage.cost is {cost}; kept as unknown (null)")
    return ({**body, "usage": clean}, notes) if notes else (body, [])


def _filtered(body: Mapping[str, Any], normalised: str | None) -> bool:
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
        return False
    choice = choices[0]
    message = choice.get("message")
    calls = message.get("tool_calls") if isinstance(message, Mapping) else None
    return (normalised or choice.get("finish_reason")) == "content_filter" and not calls


def failure_line(case_id: str, repeat: int, failure: ProviderFailure, note: str = "") -> dict:
    """A recorded-response line for an attempt that got no usable completion."""
    error: dict[str, Any] = {"kind": failure.kind, "message": failure.message + note}
    if failure.status is not None:
        error["status"] = failure.status
    line: dict[str, Any] = {"case_id": case_id, "repeat": repeat, "error": error}
    if failure.latency_ms is not None:
        line["latency_ms"] = round(failure.latency_ms, 3)
    return line
