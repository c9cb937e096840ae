"""The one contract every target kind speaks (docs/targets.md): the request of an attempt (the
case's messages, tools and metadata), the hello that asks a target its version, and how a reply
(one assistant message, or the transcript the agent's own loop produced) becomes a recorded
line, the same shape `callgate score` reads (`response`, or `turns` for several turns).

Pure functions: a reply that breaks the contract raises `MalformedReply`."""

from __future__ import annotations

import json
import math
from typing import Any

from callgate.suites.faults import scheduled
from callgate.suites.interception import unchanged
from callgate.suites.responses import INT64_MAX, TOKEN_FIELDS
from callgate.suites.suite import Case, Suite

PROTOCOL = 1
HELLO: dict[str, Any] = {"hello": "callgate", "protocol": PROTOCOL}
_WRAPPED = frozenset({"message", "messages", "usage", "cost", "provider"})


class MalformedReply(ValueError):
    """A target's reply that is not an answer under the contract."""


def attempt_request(
    case: Case, repeat: int, messages: list[dict[str, Any]], tools: list[dict[str, Any]],
    user_turn: int = 0, faults: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """What a target gets for one attempt, or for one user turn of a case with `user_turns`:
    the messages and tools as a model would get them, and the case's metadata (its id, the
    repeat, tags, max_turns and initial state; for a conversation, its id and the user turn;
    the faults its own tools must answer, `scheduled_faults`)."""
    metadata: dict[str, Any] = {
        "case_id": case.id, "repeat": repeat, "tags": case.tags, "max_turns": case.max_turns,
    }
    if case.state is not None:
        metadata["state"] = case.state
    if faults:
        metadata["faults"] = faults
    if case.user_turns is not None:
        metadata.update(conversation_id=f"{case.id}#{repeat}", user_turn=user_turn,
                        user_turns=1 + len(case.user_turns))
    elif case.scenario is not None:  # a simulated user writes the later turns: at most this many
        metadata.update(conversation_id=f"{case.id}#{repeat}", user_turn=user_turn,
                        max_user_turns=1 + case.scenario.max_user_turns)
    return {"messages": messages, "tools": tools, "metadata": metadata}


def scheduled_faults(suite: Suite, case: Case, repeat: int) -> list[dict[str, Any]]:
    """The faults of the attempt's interception seam (suites.interception) that the target's
    own tools answer (docs/faults.md, "Agent targets"): `metadata.faults`."""
    transform = suite.tool_results(case, repeat).transform
    if transform is unchanged:
        return []
    sent = case.sent_names()
    offered = sorted(case.offered_names(suite.tools))
    turns = 1 + (len(case.user_turns) if case.user_turns is not None
                 else case.scenario.max_user_turns if case.scenario is not None else 0)
    return scheduled(transform, case.id, repeat, {key: sent.get(key, key) for key in offered},
                     min(MAX_SCHEDULED, 2 * case.max_turns * turns))


def applied_faults(transcript: list[Any], schedule: list[dict[str, Any]]
                   ) -> list[dict[str, Any]]:
    """The scheduled faults a transcript's calls met, as the recorded line's `faults`; a tool
    message that answers otherwise than its fault says breaks the contract (MalformedReply).
    A transcript without tool messages is taken at its word."""
    calls: dict[tuple[str, int], str | None] = {}
    answers: dict[str, Any] = {}
    for message in transcript:
        if not isinstance(message, dict):
            continue
        for call in message.get("tool_calls") or ():
            name = (call.get("function") or {}).get("name") if isinstance(call, dict) else None
            if isinstance(name, str):
                index = sum(1 for tool, _ in calls if tool == name)
                calls[(name, index)] = call.get("id")
        if message.get("role") == "tool" and isinstance(message.get("tool_call_id"), str):
            answers[message["tool_call_id"]] = message.get("content")
    applied = []
    for number, entry in enumerate(schedule):
        key = (entry["tool"], entry["call"])
        if key not in calls:
            continue
        answered = answers.get(calls[key] or "", _UNSEEN)
        if "result" in entry and answered is not _UNSEEN and not _same(answered, entry["result"]):
            raise MalformedReply(f"the tool message of call {entry['call'] + 1} of "
                                 f"{entry['tool']} is not the {entry['kind']} metadata.faults"
                                 f"[{number}] gives it to answer")
        applied.append({"tool": entry["tool"], "call": entry["call"], "kind": entry["kind"]})
    return applied


_UNSEEN = object()
MAX_SCHEDULED = 200  # calls per tool and attempt a target is given faults for


def _same(content: Any, result: Any) -> bool:
    if content == result:
        return True
    if isinstance(content, str) and not isinstance(result, str):
        try:
            return bool(json.loads(content) == result)
        except ValueError:
            return False
    return False


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


def faulted_line(line: dict[str, Any], transcript: list[Any], request: dict[str, Any]
                 ) -> dict[str, Any]:
    """`line` with the faults its transcript met (`applied_faults` of the request's
    `metadata.faults`), when any."""
    applied = applied_faults(transcript, request["metadata"].get("faults") or [])
    return {**line, "faults": applied} if applied else line


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
