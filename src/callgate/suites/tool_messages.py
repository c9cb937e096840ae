"""What a tool's answer becomes in the tool message the model reads."""

from __future__ import annotations

import json
from typing import Any


class ToolText(str):
    """A tool's answer that is already the text the model reads, sent as it is rather than as
    JSON (BFCL's classes answer so: their results are text, and BFCL sends the text itself)."""


def tool_message_content(result: Any) -> str:
    """A tool's answer as the `content` of the tool message the model gets back."""
    if isinstance(result, ToolText):
        return str(result)
    return json.dumps(result, ensure_ascii=False)
