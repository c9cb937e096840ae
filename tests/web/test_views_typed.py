"""The web's typed JSON (web.views' TypedDicts) names the fields of the models it is dumped
from: a field renamed in a model and not in its TypedDict fails here, not on a page."""

from __future__ import annotations

from typing import Any, get_type_hints

import pytest

from callgate.gating.decision import CaseChange, FigureCheck
from callgate.scoring.scores import Figures, Share
from callgate.web.views import CheckJSON, FiguresJSON, FlipJSON, ShareJSON


@pytest.mark.parametrize(("typed", "fields"), [
    (ShareJSON, list(Share.model_fields)),
    (FiguresJSON, list(Figures.model_fields)),
    (CheckJSON, list(FigureCheck.model_fields)),
    (FlipJSON, list(CaseChange._fields)),
])
def test_each_typed_document_has_its_models_fields(typed: Any, fields: list[str]) -> None:
    assert list(get_type_hints(typed)) == fields
