"""The columns of the store's rows, declared once: the writers insert by these names, in this
order, and `merge` copies rows by them."""

from __future__ import annotations

# The columns of responses and verdicts, declared once: the store writes rows in this order,
# and `merge` copies them by name.
RESPONSE_COLUMNS = (
    "run",
    "case_id",
    "repeat",
    "finish_reason",
    "provider",
    "cost",
    "latency_ms",
    "prompt_tokens",
    "completion_tokens",
    "error_kind",
    "body",
)
VERDICT_COLUMNS = (
    "run",
    "case_id",
    "repeat",
    "status",
    "tool",
    "tool_reason",
    "arguments",
    "schema_kind",
    "arguments_reason",
    "calls",
    "right_tool",
    "right_arguments",
    "first_tool",  # migration m014
    "violations",  # migration m016
)

# The rows the other writers take, in their order: each is built by name in store/rows.py
# and inserted with these names. A calibration item's set_name and a cached judge output's
# created_at are added by the store.
JUDGEMENT_COLUMNS = ("run", "case_id", "repeat", "fingerprint", "tool_choice", "arguments",
                     "reason")
JUDGE_OUTPUT_COLUMNS = ("key", "fingerprint", "output")
CALIBRATION_ITEM_COLUMNS = ("item_id", "split", "label_tool_choice", "label_arguments", "body")
RUN_REQUEST_COLUMNS = ("run", "case_id", "repeat", "cache_key", "cached")
RUN_TURN_COLUMNS = ("run", "case_id", "repeat", "turn", "cache_key", "cached")
LIVE_RESPONSE_COLUMNS = ("key", "model", "case_id", "repeat", "request", "line", "error_kind",
                         "tries", "created_at")


def columns_sql(columns: tuple[str, ...]) -> str:
    """`(a, b, c) VALUES (?,?,?)` for an INSERT of these columns."""
    return f"({', '.join(columns)}) VALUES ({','.join('?' * len(columns))})"
