"""The two ways callgate reaches a model, behind one interface: `Client` sends one request and
returns a `Reply` or a classified `ProviderFailure` (retrying is the run stage's job), and
`make_client` picks the lean client (`lean`) where it can serve the route, else the litellm
client (`litellm_client`, imported only then). Importing this module loads neither aiohttp nor
litellm: aiohttp loads when the lean client sends, litellm when a litellm client is made.
"""

from __future__ import annotations

from typing import Any, Protocol

from callgate.models.lean import LeanClient
from callgate.models.replies import ProviderFailure, Reply
from callgate.models.routes import ModelRoute


class Client(Protocol):
    """Sends one request; never retries (the run stage does)."""

    name: str

    async def send(self, body: dict[str, Any], timeout: float) -> Reply | ProviderFailure: ...

    async def aclose(self) -> None: ...


def make_client(route: ModelRoute, choice: str, key: str | None, concurrency: int) -> Client:
    """The lean client where it can serve the route (unless litellm is asked for), else litellm."""
    if choice == "lean" or (choice == "auto" and route.lean_url is not None):
        return LeanClient(route, key, concurrency)
    # Imported here so a lean run loads nothing of the litellm path (tests/test_startup.py).
    from callgate.models.litellm_client import LitellmClient

    return LitellmClient(route, key)
