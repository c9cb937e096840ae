"""OrderStore: the environment of the hand-written order_store example suite.

A tiny in-memory web-shop order store. The case's `state` looks like

    {"orders": {"ord_5102": {"customer_email": "ana.silva@example.com",
                             "status": "pending",        # pending | processing | shipped
                                                         # | delivered | cancelled
                             "placed": "2026-11-10",
                             "total": 39.9,
                             "address": {"street": ..., "city": ..., "postal_code": ...,
                                         "country": "GB"},
                             "items": [{"item_id": "itm_1", "name": ..., "quantity": 1,
                                        "price": 39.9}]}}}

Cancelling sets `status` to "cancelled" and records `cancel_reason`, so a cancellation with the
wrong reason ends in a different final state. Domain errors (an unknown order, an order that
can no longer be changed) raise ToolError, which the model receives as the tool's answer.
"""

from __future__ import annotations

import copy
from typing import Any

from callgate import ToolError

CHANGEABLE = ("pending", "processing")  # not shipped yet: can be cancelled or re-addressed
REASONS = ("changed_mind", "duplicate", "too_slow", "other")


class OrderStore:
    def __init__(self, state: dict[str, Any]) -> None:
        self._state: dict[str, Any] = copy.deepcopy(state)
        self._state.setdefault("orders", {})

    def state(self) -> dict[str, Any]:
        return copy.deepcopy(self._state)

    def _order(self, order_id: str) -> dict[str, Any]:
        order = self._state["orders"].get(order_id)
        if order is None:
            raise ToolError(f"no order {order_id}")
        return order

    def lookup_order(self, order_id: str, include_items: bool = False) -> dict[str, Any]:
        order = self._order(order_id)
        found = {"order_id": order_id}
        found.update({key: copy.deepcopy(value) for key, value in order.items() if key != "items"})
        if include_items:
            found["items"] = copy.deepcopy(order.get("items", []))
        return found

    def cancel_order(self, order_id: str, reason: str) -> dict[str, Any]:
        order = self._order(order_id)
        if reason not in REASONS:
            raise ToolError(f"unknown reason {reason!r}; use one of {', '.join(REASONS)}")
        if order["status"] == "cancelled":
            raise ToolError(f"{order_id} is already cancelled")
        if order["status"] not in CHANGEABLE:
            raise ToolError(f"{order_id} is {order['status']} and can no longer be cancelled")
        order["status"] = "cancelled"
        order["cancel_reason"] = reason
        return {"order_id": order_id, "status": "cancelled", "reason": reason}

    def change_shipping_address(self, order_id: str, address: dict[str, Any]) -> dict[str, Any]:
        order = self._order(order_id)
        if order["status"] not in CHANGEABLE:
            raise ToolError(f"{order_id} is {order['status']}; its address can no longer change")
        if not isinstance(address, dict):
            raise ToolError("address must be an object")
        missing = [
            key for key in ("street", "city", "postal_code", "country") if not address.get(key)
        ]
        if missing:
            raise ToolError(f"address is missing {', '.join(missing)}")
        order["address"] = copy.deepcopy(address)
        return {"order_id": order_id, "status": order["status"], "address": copy.deepcopy(address)}

    def search_orders(self, customer_email: str, status: str | None = None) -> list[dict[str, Any]]:
        """The customer's orders, newest first, as short summaries (no items, no address)."""
        email = customer_email.strip().lower()
        found = [
            {
                "order_id": order_id,
                "status": order["status"],
                "placed": order.get("placed"),
                "total": order.get("total"),
            }
            for order_id, order in self._state["orders"].items()
            if order.get("customer_email", "").lower() == email
            and (status is None or order["status"] == status)
        ]
        return sorted(found, key=lambda o: (o["placed"] or "", o["order_id"]), reverse=True)
