"""OTLP JSON trace exports as spans: what the OpenTelemetry Collector's file exporter writes (one
`{"resourceSpans": [...]}` request a line), or one such document for the whole file.

Only JSON is read (no OpenTelemetry package is imported). Attribute values are OTLP's typed
`AnyValue` objects (`stringValue`, `intValue` as a string or a number, `doubleValue`,
`boolValue`, `arrayValue`, `kvlistValue`); trace and span ids are hex, as OTLP/JSON has them,
or base64, as protobuf's own JSON mapping writes bytes.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from callgate.errors import InputError
from callgate.reading import MAX_DEPTH, parse_json, read_text

_HEX = re.compile(r"^[0-9a-fA-F]+$")
STATUS_ERROR = 2


@dataclass(frozen=True)
class Span:
    trace_id: str
    span_id: str
    parent_id: str | None
    name: str
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    status_code: int
    line: int | None  # the line of the file that holds it (None: a single JSON document)
    # The resource's `service.version` (the application's release, as OpenTelemetry's SDK
    # writes its Resource), when it has one; the only resource attribute read.
    service_version: str | None = None


class SpanShapeError(ValueError):
    """What is wrong with one span; the reader adds the file, line and span id."""


def _hex_id(raw: Any, size: int) -> str:
    if not isinstance(raw, str) or not raw:
        raise SpanShapeError("no id")
    if len(raw) == 2 * size and _HEX.match(raw):
        return raw.lower()
    try:
        decoded = base64.b64decode(raw, validate=True)
    except (binascii.Error, ValueError):
        decoded = b""
    if len(decoded) != size:
        raise SpanShapeError(f"an id that is neither {2 * size} hex digits nor base64")
    return decoded.hex()


def any_value(value: Any, depth: int = 0) -> Any:
    """An OTLP AnyValue as a plain Python value."""
    if depth > MAX_DEPTH:
        raise SpanShapeError(f"an attribute value nested more than {MAX_DEPTH} levels deep")
    if not isinstance(value, dict):
        raise SpanShapeError("an attribute value that is not an OTLP AnyValue object")
    if not value:
        return None
    if len(value) != 1:
        raise SpanShapeError(f"an AnyValue with {len(value)} types ({', '.join(sorted(value))})")
    ((kind, raw),) = value.items()
    if kind == "stringValue" and isinstance(raw, str):
        return raw
    if kind == "boolValue" and isinstance(raw, bool):
        return raw
    if kind == "intValue" and isinstance(raw, str | int) and not isinstance(raw, bool):
        try:
            return int(raw)
        except ValueError:
            raise SpanShapeError(f"intValue {str(raw)[:40]!r} is not an integer") from None
    if kind == "doubleValue" and isinstance(raw, int | float | str) and not isinstance(raw, bool):
        return float(raw)
    if kind == "arrayValue" and isinstance(raw, dict):
        return [any_value(item, depth + 1) for item in raw.get("values") or []]
    if kind == "kvlistValue" and isinstance(raw, dict):
        return attributes(raw.get("values") or [], depth + 1)
    if kind == "bytesValue" and isinstance(raw, str):
        return raw
    raise SpanShapeError(f"an attribute value of type {kind!r} callgate does not read")


def attributes(items: Any, depth: int = 0) -> dict[str, Any]:
    if not isinstance(items, list):
        raise SpanShapeError("attributes that are not a list of key/value objects")
    out: dict[str, Any] = {}
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("key"), str):
            raise SpanShapeError("an attribute without a key")
        out[item["key"]] = any_value(item.get("value", {}), depth)
    return out


def _service_version(resource: dict[str, Any]) -> str | None:
    described = resource.get("resource")
    items = described.get("attributes") if isinstance(described, dict) else None
    for item in items if isinstance(items, list) else ():
        if isinstance(item, dict) and item.get("key") == "service.version":
            value = any_value(item.get("value", {}))
            return str(value) if value not in (None, "") else None
    return None


def _span(raw: Any, line: int | None, service_version: str | None = None) -> Span:
    if not isinstance(raw, dict):
        raise SpanShapeError("a span that is not a JSON object")
    span_id = _hex_id(raw.get("spanId"), 8)
    try:
        parent = raw.get("parentSpanId")
        status = raw.get("status") or {}
        code = status.get("code", 0) if isinstance(status, dict) else 0
        return Span(
            trace_id=_hex_id(raw.get("traceId"), 16),
            span_id=span_id,
            parent_id=_hex_id(parent, 8) if parent else None,
            name=str(raw.get("name", "")),
            start_ns=int(raw.get("startTimeUnixNano", 0)),
            end_ns=int(raw.get("endTimeUnixNano", 0)),
            attributes=attributes(raw.get("attributes") or []),
            status_code=_status_code(code),
            line=line,
            service_version=service_version,
        )
    except SpanShapeError as exc:
        raise SpanShapeError(f"span {span_id}: {exc}") from None
    except (TypeError, ValueError):
        raise SpanShapeError(f"span {span_id}: a start or end time that is not an integer of "
                             "nanoseconds") from None


def _status_code(code: Any) -> int:
    names = {"STATUS_CODE_UNSET": 0, "STATUS_CODE_OK": 1, "STATUS_CODE_ERROR": 2}
    if isinstance(code, str):
        return names.get(code, STATUS_ERROR if "ERROR" in code else 0)
    return int(code) if isinstance(code, int) else 0


def _parse(path: Path, text: str, line: int | None) -> Any:
    """orjson for speed (an export's 19-digit timestamps would send every line down the slow
    path of `reading.loads`); what it refuses goes to `parse_json`, which reads it or names
    what is wrong. Nesting is bounded where the reader descends (`any_value`)."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return parse_json(path, text, line=line)


def _documents(path: Path) -> Iterator[tuple[int | None, Any]]:
    """The export requests of the file: JSON Lines when its first line is JSON on its own,
    else one (pretty-printed) document."""
    text = read_text(path)
    lines = text.splitlines()
    first = next((line for line in lines if line.strip()), "")
    try:
        orjson.loads(first)
    except orjson.JSONDecodeError:
        yield None, parse_json(path, text)
        return
    for number, line in enumerate(lines, 1):
        if line.strip():
            yield number, _parse(path, line, number)


def read_spans(path: Path | str) -> list[Span]:
    """Every span of an OTLP JSON export, in file order. Raises InputError naming the file,
    the line and the span on anything that is not an OTLP trace export."""
    source = Path(path)
    spans: list[Span] = []
    for line, document in _documents(source):
        if not isinstance(document, dict) or "resourceSpans" not in document:
            found = sorted(document)[:3] if isinstance(document, dict) else type(document).__name__
            raise InputError(source, f"not an OTLP trace export (no resourceSpans; found "
                             f"{found})", line=line)
        try:
            for resource in _list(document["resourceSpans"], "resourceSpans"):
                version = _service_version(resource)
                for scope in _list(resource.get("scopeSpans"), "scopeSpans"):
                    spans.extend(_span(raw, line, version)
                                 for raw in _list(scope.get("spans"), "spans"))
        except SpanShapeError as exc:
            raise InputError(source, str(exc), line=line) from None
    if not spans:
        raise InputError(source, "no spans (an empty trace export)")
    return spans


def _list(value: Any, name: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
        raise SpanShapeError(f"{name} is not a list of objects")
    return value
