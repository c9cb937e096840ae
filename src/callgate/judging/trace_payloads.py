"""What the claim_support judge reads of a production trace (scoring/production_claims.py):
the same two documents `judging.payloads.judge_payloads` builds for a multi-turn suite case,
so the same frozen prompt and cache key format judge it. The case document is the
conversation the trace's first model call was sent, the tools it was offered and an empty
rubric (a production trace has no case notes); the response document is `turns`: each
answer of the model and, before the next one, the messages the agent added (the tool results,
as `{"role": "tool", "name", "content"}` with the JSON text the model was sent, and any later
user message). Pure: no store, no network."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from callgate.importers.traces.calls import ModelCall

# Why a trace is not judged for its claims (counted apart, never in the share).
Unjudged = Literal["no_text_answer", "no_tool_result"]


def _calls_doc(message: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"name": c["function"]["name"], "arguments": c["function"]["arguments"]}
            for c in message.get("tool_calls") or ()]


def _assistant(message: dict[str, Any]) -> dict[str, Any]:
    """An answer as judge_payloads' `_message_doc` writes one turn."""
    return {"role": "assistant", "content": message.get("content"),
            "tool_calls": _calls_doc(message)}


def _messages(sent: Sequence[dict[str, Any]], names: dict[str, str],
              asked: list[str]) -> list[dict[str, Any]]:
    """Sent messages as the judge reads them: a tool result named after the call it answers
    (by tool_call_id, else the calls of the answer before it in order)."""
    out: list[dict[str, Any]] = []
    for message in sent:
        role = message.get("role")
        if role == "assistant":
            for call in message.get("tool_calls") or ():
                if "id" in call:
                    names[call["id"]] = call["function"]["name"]
            asked[:] = [c["function"]["name"] for c in message.get("tool_calls") or ()]
            out.append(_assistant(message))
        elif role == "tool":
            name = names.get(str(message.get("tool_call_id")))
            if name is None:
                name = asked.pop(0) if asked else None
            out.append({"role": "tool", "name": name, "content": message.get("content")})
        else:
            out.append({"role": role, "content": message.get("content")})
    return out


def _added(sent: Sequence[dict[str, Any]], before: int) -> Sequence[dict[str, Any]]:
    """What the agent added to the conversation since the model's last answer: the messages
    after the last assistant message (an agent that resends no history: after the messages the
    previous call was sent)."""
    last = max((i for i, m in enumerate(sent) if m.get("role") == "assistant"), default=None)
    return sent[last + 1:] if last is not None else sent[before:]


def trace_claim_payloads(calls: Sequence[ModelCall], tools: Sequence[dict[str, Any]]
                         ) -> tuple[dict[str, Any], dict[str, Any]] | Unjudged:
    """The claim judge's (case document, response document) of a trace's answered model calls
    (in order, the last one's answer the final answer the user read), or why it is not judged:
    no text in the final answer, or no tool result anywhere in what the judge would read."""
    final = calls[-1].answer
    assert final is not None
    content = final.get("content")
    if not isinstance(content, str) or not content.strip():
        return "no_text_answer"
    names: dict[str, str] = {}
    asked: list[str] = []
    conversation = _messages(calls[0].sent, names, asked)
    turns: list[dict[str, Any]] = []
    for index, call in enumerate(calls):
        assert call.answer is not None
        turns.append(_assistant(call.answer))
        _messages([call.answer], names, asked)  # its calls' names, for the results after it
        if index + 1 < len(calls):
            turns.extend(_messages(_added(calls[index + 1].sent, len(call.sent)), names, asked))
    if not any(m["role"] == "tool" for m in (*conversation, *turns)):
        return "no_tool_result"
    return ({"messages": conversation, "tools": list(tools), "rubric": ""},
            {"turns": turns})
