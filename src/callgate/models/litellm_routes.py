"""Which litellm routes callgate bounds, and the client it hands litellm for each: a client on
models.bounded_transport.BoundedTransport (every reply read up to models.bounded.REPLY_LIMIT
bytes, after decompression) that follows no redirect at all. httpx drops only `Authorization`
on a redirect to another origin, so a followed redirect would carry x-api-key (Anthropic),
x-goog-api-key (Gemini) or api-key (Azure) to a host the user did not name.

litellm takes the client through its own `client` argument, in one of two shapes, per route
(read off litellm's dispatch in litellm/main.py, each route here checked by
tests/models/test_reply_caps_routes.py to reach the transport):

- `HANDLER_ROUTES` go through litellm's HTTP handler, which takes an `AsyncHTTPHandler`;
- `OPENAI_SDK_ROUTES` go through the openai SDK, which takes an `openai.AsyncOpenAI` (built
  here on an httpx.AsyncClient over the transport, with the base URL and key litellm would
  give its own), and `azure/...` an `openai.AsyncAzureOpenAI` (a key from callgate or
  AZURE_OPENAI_API_KEY / AZURE_API_KEY, and an api_base, are needed for it: Azure AD tokens
  are left to litellm).

Every other route (cohere, vertex_ai, watsonx, ...; litellm does not hand cohere's a
client at all) is read as litellm reads it: `unbounded_warning` says so in one line when its
client is made, at the start of a run. So is a request litellm `bridged` to the Responses API
(litellm's async bridge drops `client`), warned at its first send. litellm and openai are
imported only inside the functions the litellm client calls (callgate --help loads neither).
"""

from __future__ import annotations

import os
import sys
from typing import Any

import httpx

from callgate.models import bounded
from callgate.models.bounded_transport import BoundedTransport
from callgate.models.routes import ModelRoute

# litellm's HTTP handler (base_llm_http_handler, and anthropic's and gemini's own), which sends
# through the AsyncHTTPHandler given as `client`.
HANDLER_ROUTES = frozenset({
    "anthropic", "openrouter", "gemini", "deepseek", "fireworks_ai", "together_ai", "xai",
    "groq", "mistral", "hosted_vllm", "ollama", "ollama_chat", "databricks", "huggingface",
    "azure_ai", "bedrock",
})
# litellm's OpenAI handler (_complete_custom_openai), which sends through the openai SDK client
# given as `client`, at that client's base URL with that client's key.
OPENAI_SDK_ROUTES = frozenset({
    "openai", "custom_openai", "perplexity", "deepinfra", "cerebras", "nvidia_nim", "sambanova",
    "nebius", "lm_studio", "vercel_ai_gateway",
})
AZURE = "azure"
BOUNDED_ROUTES = HANDLER_ROUTES | OPENAI_SDK_ROUTES | {AZURE}
# litellm sends the OpenAI handler's routes through its HTTP handler instead when this is set.
_OPENAI_HANDLER_SWITCH = "EXPERIMENTAL_OPENAI_BASE_LLM_HTTP_HANDLER"
_warned: set[str] = set()


def provider_of(litellm: Any, route: ModelRoute) -> str:
    """litellm's provider for the route: its prefix, else what litellm makes of the model id
    (`gpt-4o` is openai's); '' when litellm cannot tell."""
    if route.route:
        return route.route
    try:
        return str(litellm.get_llm_provider(model=route.model, api_base=route.api_base)[1])
    except Exception:  # litellm raises its BadRequestError for an id it cannot place
        return ""


def bounded_client(litellm: Any, route: ModelRoute, provider: str, key: str | None) -> Any:
    """The `client` litellm sends the route's requests through, on BoundedTransport and
    following no redirect; None for a route callgate cannot bound (litellm's own is used)."""
    if provider in OPENAI_SDK_ROUTES and _switched(litellm):
        provider = "anthropic"  # litellm sends it through its HTTP handler then
    if provider in HANDLER_ROUTES:
        from litellm.llms.custom_httpx.http_handler import AsyncHTTPHandler

        return AsyncHTTPHandler(transport=BoundedTransport(), follow_redirects=False)
    if provider in OPENAI_SDK_ROUTES:
        return _openai_client(litellm, route, key)
    if provider == AZURE:
        return _azure_client(litellm, route, key)
    return None


def _http() -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=BoundedTransport(), follow_redirects=False)


def _switched(litellm: Any) -> bool:
    from litellm.secret_managers.main import get_secret_bool

    return bool(get_secret_bool(_OPENAI_HANDLER_SWITCH))


def _openai_client(litellm: Any, route: ModelRoute, key: str | None) -> Any:
    """An AsyncOpenAI at the base URL and with the key litellm would build its own with."""
    import openai

    sdk: Any = openai  # its http_client is typed httpx2's; it takes httpx's too (openai._httpx2)
    _, provider, found_key, base = litellm.get_llm_provider(
        model=route.model, api_base=route.api_base, api_key=key)
    if provider == "openai" or not base:
        from litellm.responses.bridge_check import _resolve_openai_api_base

        base = _resolve_openai_api_base(base)
    try:
        return sdk.AsyncOpenAI(api_key=key or found_key, base_url=base, http_client=_http(),
                               max_retries=0)
    except openai.OpenAIError:  # no key anywhere: litellm reports that itself
        return None


def _azure_client(litellm: Any, route: ModelRoute, key: str | None) -> Any:
    """An AsyncAzureOpenAI with litellm's endpoint, API version and key; None without a key or
    an endpoint (Azure AD tokens, litellm's own errors)."""
    import openai

    sdk: Any = openai
    env = os.environ
    key = key or env.get("AZURE_OPENAI_API_KEY") or env.get("AZURE_API_KEY")
    base = route.api_base or litellm.api_base or env.get("AZURE_API_BASE")
    if not key or not base:
        return None
    version = (route.params.get("api_version") or litellm.api_version
               or env.get("AZURE_API_VERSION") or litellm.AZURE_DEFAULT_API_VERSION)
    return sdk.AsyncAzureOpenAI(api_key=key, azure_endpoint=base, api_version=version,
                                http_client=_http(), max_retries=0)


def bridged(route: ModelRoute, provider: str, tools: Any, effort: Any) -> bool:
    """Whether litellm sends this request to the Responses API instead (a model whose cost-map
    mode is `responses`, some GPT-5 requests with tools): its async bridge drops `client`, so
    no client callgate hands it is used. litellm's own check, asked as litellm asks it."""
    from litellm.responses.bridge_check import responses_api_bridge_check

    try:
        info, _ = responses_api_bridge_check(model=route.wire_model, custom_llm_provider=provider,
                                             tools=tools, reasoning_effort=effort,
                                             api_base=route.api_base)
    except Exception:  # litellm raises the same when it sends, and says why
        return False
    return bool(info.get("mode") == "responses")


def unbounded_warning(route: ModelRoute, provider: str, made: bool = True) -> str | None:
    """The one line that says a route's replies are read as litellm reads them; None for a
    bounded route (`made`: its client was made, or is still to be)."""
    if provider in BOUNDED_ROUTES and made:
        return None
    name = provider or "(no provider prefix)"
    return (f"warning: {route.model}: litellm's {name} route is not bounded by callgate: its "
            f"replies are not capped at {bounded.REPLY_LIMIT >> 20} MiB and redirects follow "
            "litellm's defaults (docs/targets.md)")


def warn_unbounded(route: ModelRoute, provider: str, made: bool = True,
                   bridge: bool = False) -> None:
    """Write the warning on stderr, once per model in a process, for a route sent unbounded
    (`bridge`: a request litellm sends to the Responses API)."""
    message = unbounded_warning(route, provider, made)
    if bridge:
        message = (f"warning: {route.model}: litellm sends this model's requests to the "
                   "Responses API, which callgate does not bound: its replies are not capped "
                   f"at {bounded.REPLY_LIMIT >> 20} MiB and redirects follow litellm's "
                   "defaults (docs/targets.md)")
    if message is not None and route.model not in _warned:
        _warned.add(route.model)
        print(message, file=sys.stderr, flush=True)
