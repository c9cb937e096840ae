"""The one contract every target kind speaks (docs/targets.md): the request of an attempt (the
case's messages, tools and metadata), the hello that asks a target its version, and how a reply
(one assistant message, or the transcript the agent's own loop produced) becomes a recorded
line, the same shape `callgate score` reads (`response`, or `turns` for several turns).

Pure functions: a reply that breaks the contract raises `MalformedReply`."""

from __future__ import annotations

import math
from typing import Any

from callgate.suites.responses import INT64_MAX, TOKEN_FIELDS
from callgate.suites.suite import Case

PROTOCOL = 1
HELLO: dict[str, Any] = {"hello": "callgate", "protocol": PROTOCOL}
_WRAPPED = frozenset({"message", "messages", "usage", "cost", "provider"})


class MalformedReply(ValueError):
    """A target's reply that is not an answer under the contract."""


def attempt_request(
    case: Case, repeat: int, messages: list[dict[str, Any]], tools: list[dict[str, Any]],
    user_turn: int = 0,
) -> dict[str, Any]:
    """What a target gets for one attempt, or for one user turn of a case with `user_turns`:
    the messages and tools as a model would get them, and the case's metadata (its id, the
    repeat, tags, max_turns and initial state; for a conversation, its id and the user turn)."""
    metadata: dict[str, Any] = {
        "case_id": case.id, "repeat": repeat, "tags": case.tags, "max_turns": case.max_turns,
    }
    if case.state is not None:
        metadata["state"] = case.state
    if case.user_turns is not None:
        metadata.update(conversation_id=f"{case.id}#{repeat}", user_turn=user_turn,
                        user_turns=1 + len(case.user_turns))
    return {"messages": messages, "tools": tools, "metadata": metadata}


def user_turn_of(request: dict[str, Any]) -> int | None:
    """The user turn a request asks (0 is the case's messages); None outside a conversation."""
    turn = request["metadata"].get("user_turn")
    return turn if isinstance(turn, int) else None


def reported_version(reply: Any) -> str | None:
    """The version a target gave in answer to the hello (None: it gave none)."""
    version = reply.get("version") if isinstance(reply, dict) else None
    if version is None:
        return None
    if not isinstance(version, str) or not version.strip():
        raise MalformedReply("the hello reply's version must be a non-empty string")
    return version


def reply_line(
    case_id: str, repeat: int, reply: Any, sent: list[dict[str, Any]], latency_ms: float
) -> dict[str, Any]:
    """The recorded line of a target's reply. `sent` are the messages the target was given: a
    transcript that starts with them (as frameworks return their whole history) is read from
    the first message after them."""
    transcript, extra = reply_transcript(reply, sent)
    return transcript_line(case_id, repeat, transcript, extra, latency_ms)


def reply_transcript(
    reply: Any, sent: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The messages a reply adds to the `sent` ones (a lone assistant message is a transcript
    of one), and the usage, cost and provider it gives."""
    reply, extra = _unwrapped(reply)
    if isinstance(reply, dict) and reply.get("role") == "assistant":
        transcript = [reply]
    elif isinstance(reply, list):
        transcript = reply[len(sent):] if reply[:len(sent)] == sent else reply
    else:
        raise MalformedReply(f"a reply is {SHAPES}, not {_described(reply)}")
    return transcript, extra


def transcript_line(case_id: str, repeat: int, transcript: list[Any], extra: dict[str, Any],
                    latency_ms: float) -> dict[str, Any]:
    """The recorded line of a transcript (`reply_transcript`)."""
    turns = _assistant_turns(transcript)
    line: dict[str, Any] = {"case_id": case_id, "repeat": repeat}
    if len(turns) == 1:
        line["response"] = turns[0]
    else:
        line["turns"] = turns
    line.update(extra)
    line["latency_ms"] = round(latency_ms, 3)
    return line


def _unwrapped(reply: Any) -> tuple[Any, dict[str, Any]]:
    """The message or messages of a reply that wraps them, and its usage, cost and provider."""
    if not isinstance(reply, dict) or _WRAPPED.isdisjoint(reply):
        return reply, {}
    unknown = sorted(set(reply) - _WRAPPED)
    if unknown:
        raise MalformedReply(f"{unknown[0]}: unknown field (a reply holds message or messages, "
                             "and may hold usage, cost and provider)")
    if ("message" in reply) == ("messages" in reply):
        raise MalformedReply("a reply holds either message or messages")
    extra = _sane({key: reply[key] for key in ("usage", "cost", "provider") if key in reply})
    if "messages" in reply:
        return reply["messages"], extra
    message = reply["message"]
    if not isinstance(message, dict):
        raise MalformedReply(f"message: must be an object, not {_described(message)}")
    return {"role": "assistant", **message}, extra


def _sane(extra: dict[str, Any]) -> dict[str, Any]:
    """A reply's usage, cost and provider with what is not a count, an amount or a name taken
    as unknown, and a `note` saying so: the agent's bookkeeping never costs its answer."""
    notes = []
    cost = extra.get("cost")
    if "cost" in extra and cost is not None and not _amount(cost):
        del extra["cost"]
        notes.append(f"cost {_shown(cost)} is not an amount in USD; kept as unknown")
    usage = extra.get("usage")
    if isinstance(usage, dict):
        counts = dict(usage)
        for key, value in usage.items():
            if key in TOKEN_FIELDS and value is not None and not _count(value):
                counts[key] = None
                notes.append(f"usage.{key} {_shown(value)} is not a token count; kept as unknown")
            elif key == "cost" and value is not None and not _amount(value):
                counts[key] = None
                notes.append(f"usage.cost {_shown(value)} is not an amount; kept as unknown")
        extra["usage"] = counts
    elif "usage" in extra:
        del extra["usage"]
        notes.append(f"usage {_shown(usage)} is not an object; kept as unknown")
    if "provider" in extra and not isinstance(extra["provider"], str):
        del extra["provider"]
        notes.append("provider is not a string; left out")
    if notes:
        extra["note"] = "; ".join(notes)
    return extra


def _amount(value: Any) -> bool:
    return (isinstance(value, int | float) and not isinstance(value, bool)
            and math.isfinite(value) and value >= 0)


def _count(value: Any) -> bool:
    return (_amount(value) and float(value).is_integer() and value <= INT64_MAX)


def _shown(value: Any) -> str:
    return repr(value)[:40]


SHAPES = ('{"message": {...}}, {"messages": [...]}, an assistant message (role assistant) or '
          "a list of messages (docs/targets.md)")


def _described(reply: Any) -> str:
    if isinstance(reply, dict):
        return f"an object with the keys {', '.join(sorted(map(str, reply))[:5]) or '(none)'}"
    return "null" if reply is None else f"a JSON {type(reply).__name__}"


def _assistant_turns(transcript: list[Any]) -> list[dict[str, Any]]:
    """The assistant messages of a transcript, in order; its tool messages are the results the
    agent's own tools gave, which the checks recompute where the suite has an environment."""
    turns = []
    for index, message in enumerate(transcript):
        role = message.get("role") if isinstance(message, dict) else None
        if role == "assistant":
            turns.append({key: value for key, value in message.items() if key != "role"})
        elif role != "tool":
            raise MalformedReply(f"messages[{index}]: a transcript holds the assistant and tool "
                                 f"messages the agent produced, not {role or 'a non-message'}")
    if not turns:
        raise MalformedReply("the reply holds no assistant message")
    return turns
