"""The shapes one recorded answer may come in, each read into the same fields: the assistant
message (its text and its tool calls, arguments as the raw JSON text), the finish reason in the
OpenAI chat-completion words (truncation is always `length`), usage and cost.

Read (docs/formats.md shows a line of each): an OpenAI chat completion (`choices`), an OpenAI
Responses API response (`output`), an Anthropic Messages response (`stop_reason`, `content`
blocks), a Gemini generateContent response (`candidates`) or its bare `Content` (`parts`), and a
bare assistant message (OpenAI `tool_calls` or Anthropic `tool_use` blocks).

Anything else is refused (a ValueError "field: what is wrong"), never read as "no call": a shape
of none of these, two shapes in one object, a key that holds tool calls where the reader does
not read it, or a block, item or status a reader does not know. The chat completion comes
first and pays only a few dictionary look-ups for the others.
"""

from __future__ import annotations

import json
from typing import Any

# Keys that hold tool calls in some format (or a misspelling of one). Met with a value where a
# reader does not read them, they mean calls callgate would otherwise score as "no call".
_CALL_KEYS = frozenset(("tool_calls", "function_call", "functionCall", "function_calls",
                        "tool_use", "toolCalls", "tool_call"))
_BESIDE_TOOL_CALLS = _CALL_KEYS - {"tool_calls"}  # in a message, which reads tool_calls
_BESIDE_FUNCTION_CALL = _CALL_KEYS - {"functionCall"}  # in a Gemini part
# The key that tells each whole-response shape apart.
_SHAPE_KEYS = frozenset(("choices", "output", "candidates", "parts"))
_MESSAGE_KEYS = frozenset(("role", "content", "tool_calls"))
_DOCS = "docs/formats.md lists the shapes callgate reads"


def one_response(response: Any, field: str) -> dict[str, Any]:
    """The message, finish reason, usage, cost and provider of one recorded answer."""
    if not isinstance(response, dict):
        raise ValueError(f"{field}: must be an object")
    if "choices" in response and not (
            "output" in response or "candidates" in response or "parts" in response):
        return _chat_completion(response, field)
    if not _SHAPE_KEYS.isdisjoint(response):
        shapes = _SHAPE_KEYS.intersection(response)
        if len(shapes) > 1:
            raise ValueError(f"{field}: holds {' and '.join(sorted(shapes))}, the keys of two "
                             f"different shapes of answer; {_DOCS}")
        if "output" in response:
            return _responses_api(response, field)
        if "candidates" in response:
            return _gemini(response, field)
        return {"message": _gemini_content(response, field)}
    if "stop_reason" in response or response.get("type") == "message":
        return _anthropic(response, field)
    return {"message": message_fields(response, field)}


def _stray_calls(raw: dict[str, Any], field: str, keys: frozenset[str] = _CALL_KEYS) -> None:
    """Refuse a key of `keys` with a value: tool calls where this reader does not read them."""
    if keys.isdisjoint(raw):
        return
    stray = sorted(key for key in keys.intersection(raw) if raw[key] not in (None, [], {}))
    if stray and stray[0] == "function_call" and "tool_calls" not in keys:
        raise ValueError(f"{field}.function_call: the legacy single-function field is not "
                         "read; record the call under tool_calls")
    if stray:
        raise ValueError(f"{field}.{stray[0]}: tool calls where this shape of answer has none; "
                         f"{_DOCS}")


def _string(value: Any, field: str) -> str | None:
    if value is not None and not isinstance(value, str):
        raise ValueError(f"{field}: must be a string")
    return value


def _arguments(value: Any, missing: str = "") -> str:
    """A call's arguments as the raw JSON text: a string as it is, a parsed value (an
    Anthropic `input`, a Gemini `args`, an SDK's parsed arguments) as the JSON it stands for."""
    if isinstance(value, str):
        return value
    if value is None:
        return missing
    return json.dumps(value, ensure_ascii=False)


def message_fields(raw: Any, field: str) -> dict[str, Any]:
    """An assistant message: OpenAI (`tool_calls`, text or text parts) or Anthropic (`content`
    blocks: text, thinking, tool_use)."""
    # Runs for every line: the field paths of errors are written only when one is raised.
    if not isinstance(raw, dict):
        raise ValueError(f"{field}: must be an object")
    if "role" not in raw and _MESSAGE_KEYS.isdisjoint(raw):
        found = ", ".join(sorted(raw)[:5]) or "nothing"
        raise ValueError(f"{field}: not an answer callgate reads (its keys: {found}); {_DOCS}")
    role = raw.get("role")
    if role is not None and role != "assistant":
        raise ValueError(f"{field}.role: {_quoted(role)} is not the assistant's answer")
    if not _BESIDE_TOOL_CALLS.isdisjoint(raw):
        _stray_calls(raw, field, _BESIDE_TOOL_CALLS)
    tool_calls = raw.get("tool_calls")
    calls = []
    if tool_calls:
        if not isinstance(tool_calls, list):
            raise ValueError(f"{field}.tool_calls: must be a list of tool calls")
        for index, call in enumerate(tool_calls):
            if not isinstance(call, dict):
                raise ValueError(f"{field}.tool_calls[{index}]: must be an object")
            function = call.get("function")
            if not isinstance(function, dict) or not isinstance(function.get("name"), str):
                raise ValueError(f"{field}.tool_calls[{index}].function.name: missing")
            call_id = call.get("id")
            if call_id is not None and not isinstance(call_id, str):
                raise ValueError(f"{field}.tool_calls[{index}].id: must be a string")
            arguments = function.get("arguments")
            if not isinstance(arguments, str):
                arguments = _arguments(arguments)
            calls.append({"id": call_id, "name": function["name"], "arguments": arguments})
    elif tool_calls is not None and not isinstance(tool_calls, list):
        raise ValueError(f"{field}.tool_calls: must be a list of tool calls")
    content = raw.get("content")
    if isinstance(content, list):
        content = _content_blocks(content, f"{field}.content", calls)
    elif content is not None and not isinstance(content, str):
        raise ValueError(f"{field}.content: must be a string")
    return {"content": content, "tool_calls": calls}


def _content_blocks(blocks: list[Any], field: str, calls: list[dict[str, Any]]) -> str:
    """The text of OpenAI content parts or Anthropic content blocks; `tool_use` blocks are
    appended to `calls` (which holds the message's `tool_calls`)."""
    has_tool_calls, texts = bool(calls), []
    for index, block in enumerate(blocks):
        if not isinstance(block, dict):
            continue
        kind, where = block.get("type"), f"{field}[{index}]"
        if kind == "tool_use":
            if has_tool_calls:
                raise ValueError(f"{where}: a tool_use block beside tool_calls: two lists of "
                                 "calls in one message")
            if not isinstance(block.get("name"), str):
                raise ValueError(f"{where}.name: missing")
            calls.append({"id": _string(block.get("id"), f"{where}.id"), "name": block["name"],
                          "arguments": _arguments(block.get("input"))})
        elif kind is None or kind in ("text", "refusal"):
            texts.append(_string(block.get("text"), f"{where}.text"))
        elif kind not in ("thinking", "redacted_thinking"):  # (reasoning, not the answer)
            raise ValueError(f"{where}.type: {_quoted(kind)} is not a content block callgate "
                             "reads (text, refusal, thinking, redacted_thinking, tool_use)")
    return "".join(text for text in texts if text)


def _quoted(value: Any) -> str:
    return repr(value) if isinstance(value, str) and len(value) <= 40 else "this value"


def _chat_completion(response: dict[str, Any], field: str) -> dict[str, Any]:
    choices = response["choices"]
    if not isinstance(choices, list) or not choices:
        raise ValueError(f"{field}.choices: must be a non-empty list")
    choice = choices[0]
    if not isinstance(choice, dict):
        raise ValueError(f"{field}.choices[0]: must be an object")
    if not (_CALL_KEYS.isdisjoint(response) and _CALL_KEYS.isdisjoint(choice)):
        _stray_calls(response, field)
        _stray_calls(choice, f"{field}.choices[0]")
    message = message_fields(choice.get("message"), f"{field}.choices[0].message")
    finish_reason, provider = choice.get("finish_reason"), response.get("provider")
    if finish_reason is not None and not isinstance(finish_reason, str):
        raise ValueError(f"{field}.choices[0].finish_reason: must be a string")
    if provider is not None and not isinstance(provider, str):
        raise ValueError(f"{field}.provider: must be a string")
    found: dict[str, Any] = {
        "message": message, "finish_reason": finish_reason, "provider": provider}
    usage = response.get("usage")
    if isinstance(usage, dict):
        found["usage"] = usage
        found["cost"] = usage.get("cost")
    return found


def _usage(usage: Any, prompt: str, completion: str, total: str | None) -> dict[str, Any] | None:
    """Another format's token counts under the chat-completion names."""
    if not isinstance(usage, dict):
        return None
    out: dict[str, Any] = {"prompt_tokens": usage.get(prompt),
                           "completion_tokens": usage.get(completion),
                           "total_tokens": usage.get(total) if total else None}
    counts = (out["prompt_tokens"], out["completion_tokens"])
    if total is None and all(isinstance(n, int) and not isinstance(n, bool) for n in counts):
        out["total_tokens"] = sum(counts)
    return out


def _called(calls: list[dict[str, Any]]) -> str:
    return "tool_calls" if calls else "stop"


def _message_texts(item: dict[str, Any], where: str) -> list[str]:
    """The output_text parts of a Responses API `message` item (refusals are skipped)."""
    _stray_calls(item, where)
    content = item.get("content")
    if content is not None and not isinstance(content, list):
        raise ValueError(f"{where}.content: must be a list of content parts")
    texts: list[str] = []
    for number, part in enumerate(content or ()):
        part_type = part.get("type") if isinstance(part, dict) else None
        if part_type == "output_text":
            texts.append(_string(part.get("text"), f"{where}.content[{number}].text") or "")
        elif part_type != "refusal":
            raise ValueError(f"{where}.content[{number}].type: {_quoted(part_type)} is "
                             "not a message part callgate reads (output_text, refusal)")
    return texts


def _responses_finish(response: dict[str, Any], calls: list[dict[str, Any]], field: str) -> str:
    """A Responses API status as a chat-completion finish_reason."""
    status = response.get("status")
    if status in (None, "completed"):
        return _called(calls)
    if status != "incomplete":
        raise ValueError(f"{field}.status: {_quoted(status)} is not a finished answer (completed "
                         "or incomplete); record a failed request under the line's error")
    details = response.get("incomplete_details")
    reason = details.get("reason") if isinstance(details, dict) else None
    finish = None
    if isinstance(reason, str):
        finish = {"max_output_tokens": "length", "content_filter": "content_filter"}.get(reason)
    if finish is None:
        raise ValueError(f"{field}.incomplete_details.reason: an incomplete response needs "
                         "max_output_tokens or content_filter here")
    return finish


def _responses_api(response: dict[str, Any], field: str) -> dict[str, Any]:
    """An OpenAI Responses API response: `function_call` items; `incomplete` with
    `max_output_tokens` is truncation."""
    output = response["output"]
    if not isinstance(output, list):
        raise ValueError(f"{field}.output: must be a list of output items")
    _stray_calls(response, field)
    calls: list[dict[str, Any]] = []
    texts: list[str] = []
    for index, item in enumerate(output):
        where = f"{field}.output[{index}]"
        if not isinstance(item, dict):
            raise ValueError(f"{where}: must be an object")
        kind = item.get("type")
        if kind == "function_call":
            if not isinstance(item.get("name"), str):
                raise ValueError(f"{where}.name: missing")
            call_id = _string(item.get("call_id"), f"{where}.call_id")
            calls.append({"id": call_id, "name": item["name"],
                          "arguments": _arguments(item.get("arguments"))})
        elif kind == "message":
            texts.extend(_message_texts(item, where))
        elif kind != "reasoning":
            raise ValueError(f"{where}.type: {_quoted(kind)} is not an output item callgate "
                             "reads (function_call, message, reasoning)")
    found: dict[str, Any] = {"message": {"content": "".join(texts) or None, "tool_calls": calls},
                             "finish_reason": _responses_finish(response, calls, field)}
    usage = _usage(response.get("usage"), "input_tokens", "output_tokens", "total_tokens")
    if usage is not None:
        found["usage"] = usage
    return found


# Anthropic's stop_reason in the chat-completion words; another value is kept as it is.
_ANTHROPIC_STOPS = {"end_turn": "stop", "stop_sequence": "stop", "tool_use": "tool_calls",
                    "max_tokens": "length", "model_context_window_exceeded": "length",
                    "refusal": "content_filter"}


def _anthropic(response: dict[str, Any], field: str) -> dict[str, Any]:
    """An Anthropic Messages response: `tool_use` blocks; `stop_reason: max_tokens` is
    truncation."""
    message = message_fields(response, field)
    stop = _string(response.get("stop_reason"), f"{field}.stop_reason")
    found: dict[str, Any] = {"message": message,
                             "finish_reason": _ANTHROPIC_STOPS.get(stop, stop) if stop else None}
    usage = _usage(response.get("usage"), "input_tokens", "output_tokens", None)
    if usage is not None:
        found["usage"] = usage
    return found


# Gemini's finishReason in the chat-completion words; another value is kept as it is.
_GEMINI_FINISHES = {"MAX_TOKENS": "length", "SAFETY": "content_filter",
                    "RECITATION": "content_filter", "BLOCKLIST": "content_filter",
                    "PROHIBITED_CONTENT": "content_filter", "SPII": "content_filter",
                    "IMAGE_SAFETY": "content_filter"}


def _gemini(response: dict[str, Any], field: str) -> dict[str, Any]:
    """A Gemini generateContent response: `functionCall` parts of the first candidate;
    `finishReason: MAX_TOKENS` is truncation."""
    candidates = response["candidates"]
    if not isinstance(candidates, list) or not candidates:
        raise ValueError(f"{field}.candidates: must be a non-empty list")
    candidate = candidates[0]
    where = f"{field}.candidates[0]"
    if not isinstance(candidate, dict):
        raise ValueError(f"{where}: must be an object")
    _stray_calls(response, field)
    _stray_calls(candidate, where)
    content = candidate.get("content")
    message = (_gemini_content(content, f"{where}.content") if content is not None
               else {"content": None, "tool_calls": []})
    reason = _string(candidate.get("finishReason"), f"{where}.finishReason")
    if reason == "MALFORMED_FUNCTION_CALL":
        raise ValueError(f"{where}.finishReason: MALFORMED_FUNCTION_CALL: Gemini kept no call "
                         "to score; leave the attempt out or record it as a bare message")
    finish: str | None
    if reason == "STOP":
        finish = _called(message["tool_calls"])
    else:
        finish = _GEMINI_FINISHES.get(reason, reason) if reason else None
    found: dict[str, Any] = {"message": message, "finish_reason": finish}
    usage = _usage(response.get("usageMetadata"), "promptTokenCount", "candidatesTokenCount",
                   "totalTokenCount")
    if usage is not None:
        found["usage"] = usage
    return found


# A Gemini Part's keys (generateContent's camelCase, and the Python SDK's snake_case dump for
# those that hold no call): its data is one kind, the rest metadata.
_GEMINI_PART_KEYS = frozenset((
    "text", "functionCall", "thought", "thoughtSignature", "thought_signature", "inlineData",
    "inline_data", "fileData", "file_data", "executableCode", "executable_code",
    "codeExecutionResult", "code_execution_result", "videoMetadata", "video_metadata",
    "partMetadata", "part_metadata", "mediaResolution", "media_resolution"))


def _gemini_content(content: Any, field: str) -> dict[str, Any]:
    """A Gemini `Content` (role `model`, `parts`): `functionCall` parts are the calls, text
    parts (not thoughts) the text."""
    if not isinstance(content, dict):
        raise ValueError(f"{field}: must be an object")
    role = content.get("role")
    if role is not None and role != "model":
        raise ValueError(f"{field}.role: {_quoted(role)} is not the model's answer")
    _stray_calls(content, field)
    parts = content.get("parts")
    if parts is None:
        parts = []
    if not isinstance(parts, list):
        raise ValueError(f"{field}.parts: must be a list of parts")
    calls: list[dict[str, Any]] = []
    texts: list[str] = []
    for index, part in enumerate(parts):
        where = f"{field}.parts[{index}]"
        if not isinstance(part, dict):
            raise ValueError(f"{where}: must be an object")
        _stray_calls(part, where, _BESIDE_FUNCTION_CALL)
        unknown = part.keys() - _GEMINI_PART_KEYS
        if unknown:  # a kind of part not known here may hold calls: never read as no call
            raise ValueError(f"{where}.{sorted(unknown)[0]}: not a kind of Gemini part "
                             "callgate reads (text, functionCall, thought, inlineData, fileData, "
                             f"executableCode, codeExecutionResult); {_DOCS}")
        call = part.get("functionCall")
        if call is not None:
            if not isinstance(call, dict) or not isinstance(call.get("name"), str):
                raise ValueError(f"{where}.functionCall.name: missing")
            # Gemini leaves `args` out of a call without arguments.
            calls.append({"id": _string(call.get("id"), f"{where}.functionCall.id"),
                          "name": call["name"], "arguments": _arguments(call.get("args"), "{}")})
        elif not part.get("thought"):
            texts.append(_string(part.get("text"), f"{where}.text") or "")
    return {"content": "".join(texts) or None, "tool_calls": calls}
