"""What a reply cost in USD: OpenRouter's own `usage.cost` where it reports one, else litellm's
bundled cost map; a reply that cannot be priced is unknown (None), never 0. `cost_map_names`
reads the map's file without importing litellm, so a model that is not in it (a local model)
never pays for the import.
"""

from __future__ import annotations

import importlib.util
import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from callgate.models.routes import ModelRoute


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

    def __init__(self, route: ModelRoute) -> None:
        self._model = route.model
        # OpenRouter prices every call itself, and its model ids are not in litellm's map.
        self._use_map = not route.is_openrouter
        self._names = {route.model, route.wire_model, route.wire_model.rpartition("/")[2]}
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
        # Imported here: a run that needs no map loads nothing of the litellm path.
        from callgate.models.litellm_client import import_litellm

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
