"""Recorded model responses: one attempt per JSON line, keyed by case id and repeat index.

Accepts every shape `callgate.suites.answer_formats` reads (an OpenAI chat completion or
Responses API response, an Anthropic or Gemini response, a bare assistant message) and refuses
the rest. Tool-call arguments are kept as the raw string the model produced, so broken JSON
stays visible as broken JSON. A `turns` line of a case with later user turns says where each
one's answers end (`user_turn_ends`, read by `read_turns`).
"""

from __future__ import annotations

import json
from collections.abc import Container, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from callgate.errors import InputError, from_validation_error
from callgate.reading import json_lines
from callgate.suites.answer_formats import one_response
from callgate.suites.attempt_keys import AttemptKeys
from callgate.suites.cases import Case


class ToolCall(BaseModel):
    model_config = ConfigDict(frozen=True)
    id: str | None = None
    name: str
    arguments: str


class AssistantMessage(BaseModel):
    model_config = ConfigDict(frozen=True)
    content: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()


# Every kind of failure callgate records (models.replies classifies a provider's; a target's is
# target_error, a simulated user's user_error; `error` is a line that names none). Another is
# a typo, never a provider error.
ErrorKind = Literal["error", "rate_limit", "server_error", "timeout", "connection",
                    "bad_response", "bad_request", "auth", "payment", "not_found", "refused",
                    "target_error", "user_error"]
ERROR_KINDS = frozenset(get_args(ErrorKind))


class ProviderError(BaseModel):
    model_config = ConfigDict(frozen=True)
    kind: ErrorKind = "error"
    message: str = ""
    status: int | None = None


# What SQLite's INTEGER holds: counts beyond it are input errors, not OverflowErrors.
INT64_MAX = 2**63 - 1
TokenCount = Annotated[int, Field(ge=0, le=INT64_MAX)]
# Costs and latencies are stored and summed as numbers: NaN, Infinity or a negative amount is an
# input error (unknown is null).
Amount = Annotated[float, Field(ge=0, allow_inf_nan=False)]


class Usage(BaseModel):
    model_config = ConfigDict(frozen=True)
    prompt_tokens: TokenCount | None = None
    completion_tokens: TokenCount | None = None
    total_tokens: TokenCount | None = None


class ReplacedResult(BaseModel):
    """A tool result the interception seam replaced in this attempt (suites.interception):
    the tool's catalogue name, its per-tool call index from 0, and why (a fault's kind)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    tool: str
    call: int = Field(ge=0, le=INT64_MAX, strict=True)
    kind: str


class Response(BaseModel):
    """One attempt: what the model (or the provider) gave back for a case and repeat.

    A multi-turn attempt holds every assistant message in `turns`; `message` is the last one,
    `usage` and `cost` are summed over the turns and `finish_reason` is the last turn's.
    """

    model_config = ConfigDict(frozen=True)
    case_id: str
    # Strict: "0" or true is a typo in a hand-written file, never repeat 0 or 1.
    repeat: int = Field(default=0, ge=0, le=INT64_MAX, strict=True)
    message: AssistantMessage | None = None
    turns: tuple[AssistantMessage, ...] | None = None
    # Where each user turn's answers end in `turns` (a case with `user_turns`): the count of
    # assistant messages recorded by the end of user turn 0, 1, ...
    user_turn_ends: tuple[int, ...] | None = None
    finish_reason: str | None = None
    error: ProviderError | None = None
    usage: Usage | None = None
    cost: Amount | None = None
    latency_ms: Amount | None = None
    provider: str | None = None
    # The tool results replaced on the way to the agent (a fault plan's): recorded by a live
    # run, so a replay of the line with a plan can tell whether its turns saw them.
    faults: tuple[ReplacedResult, ...] | None = None

    @property
    def assistant_turns(self) -> tuple[AssistantMessage, ...]:
        """Every assistant message in order: the turns, or the one message."""
        if self.turns is not None:
            return self.turns
        return (self.message,) if self.message is not None else ()


_LINE_FIELDS = frozenset({
    "case_id",
    "repeat",
    "response",
    "turns",
    "user_turn_ends",
    "error",
    "finish_reason",
    "usage",
    "cost",
    "latency_ms",
    "provider",
    "note",
    "trace_id",  # the trace an imported attempt was read from (docs/traces.md); kept in the body
    "faults",  # the results a fault plan replaced (docs/faults.md)
})


# The fields of a line that are copied as they are (when not null).
_COPIED = frozenset(
    ("case_id", "repeat", "finish_reason", "usage", "cost", "latency_ms", "provider", "error",
     "faults"))


def normalise(raw: dict[str, Any]) -> dict[str, Any]:
    """Map one recorded line (any answer shape it may hold) onto the fields of `Response`."""
    if not _LINE_FIELDS.issuperset(raw):
        raise ValueError(f"{sorted(set(raw) - _LINE_FIELDS)[0]}: unknown field")
    out: dict[str, Any] = {
        key: value for key, value in raw.items() if value is not None and key in _COPIED
    }
    if raw.get("turns") is not None:
        if raw.get("response") is not None:
            raise ValueError("turns: a line has either a response or turns, not both")
        _turns_into(out, raw["turns"])
        if raw.get("user_turn_ends") is not None:
            out["user_turn_ends"] = _user_turn_ends(raw["user_turn_ends"], len(out["turns"]))
        return out
    if raw.get("user_turn_ends") is not None:
        raise ValueError("user_turn_ends: only a line with turns has user turns")
    response = raw.get("response")
    if response is None:
        if "error" not in raw:
            raise ValueError("response: a line needs a response or an error")
        return out
    found = one_response(response, "response")
    out["message"] = found["message"]
    for key in ("finish_reason", "usage", "cost", "provider"):
        if found.get(key) is not None:
            out.setdefault(key, found[key])
    _usage_into(out)
    return out


TOKEN_FIELDS = ("prompt_tokens", "completion_tokens", "total_tokens")


def _usage_into(out: dict[str, Any]) -> bool:
    """Keep the token counts of a usage object in `out`, and its cost when `out` has none.
    False when `out` holds no usage object."""
    usage = out.get("usage")
    if not isinstance(usage, dict):
        return False
    if out.get("cost") is None and usage.get("cost") is not None:
        out["cost"] = usage["cost"]
    out["usage"] = {key: usage.get(key) for key in TOKEN_FIELDS}
    return True


def _user_turn_ends(ends: Any, turns: int) -> list[int]:
    """The user-turn boundaries of a `turns` line: rising counts, the last one every turn."""
    if not isinstance(ends, list) or not ends or not all(
            isinstance(end, int) and not isinstance(end, bool) for end in ends):
        raise ValueError("user_turn_ends: must be a non-empty list of integers")
    if any(end <= before for before, end in zip([0, *ends], ends, strict=False)):
        raise ValueError("user_turn_ends: each user turn ends after at least one more "
                         "assistant message (the counts must rise from 1)")
    if ends[-1] != turns:
        raise ValueError(f"user_turn_ends: the last user turn ends at {ends[-1]}, but the line "
                         f"holds {turns} turns")
    return ends


def _turns_into(out: dict[str, Any], turns: Any) -> None:
    """Fill `out` from the assistant messages of a multi-turn attempt."""
    if not isinstance(turns, list) or not turns:
        raise ValueError("turns: must be a non-empty list of assistant messages")
    found = [one_response(turn, f"turns[{index}]") for index, turn in enumerate(turns)]
    out["turns"] = [f["message"] for f in found]
    out["message"] = out["turns"][-1]
    if found[-1].get("finish_reason") is not None:
        out.setdefault("finish_reason", found[-1]["finish_reason"])
    provider = next((f["provider"] for f in found if f.get("provider")), None)
    if provider is not None:
        out.setdefault("provider", provider)
    if not _usage_into(out):
        given = [f["usage"] for f in found if isinstance(f.get("usage"), dict)]
        if given:
            out["usage"] = {
                key: sum(u[key] for u in given if isinstance(u.get(key), int))
                if any(isinstance(u.get(key), int) for u in given)
                else None
                for key in TOKEN_FIELDS
            }
    if out.get("cost") is None:
        costs = [f.get("cost") for f in found]
        # Unknown is unknown, not 0: a sum only when every turn priced itself.
        if all(isinstance(c, int | float) and not isinstance(c, bool) for c in costs):
            out["cost"] = sum(costs)


# Endings after which a conversation may stop before its last user turn (set by the live loop).
CUT_SHORT = frozenset({"length", "turn_limit", "environment_error"})


@dataclass(frozen=True)
class ReadTurns:
    turns: tuple[AssistantMessage, ...]  # every answer the checks read, in order
    user_turn: tuple[int, ...]  # the user turn each answers: 0 is the case's `messages`
    hit_limit: bool  # a user turn still calling tools after max_turns answers
    reached: int  # how many user turns the conversation reached

    def call_turns(self) -> list[int]:
        """The user turn of each call, in the order of the calls of `turns`."""
        return [user for turn, user in zip(self.turns, self.user_turn, strict=True)
                for _ in turn.tool_calls]


def read_turns(case: Case, response: Response) -> ReadTurns:
    """A `turns` response as the checks read it; a line without `user_turn_ends` is one user
    turn. Answers recorded past a user turn's max_turns were never sent, so are left out."""
    recorded = response.turns or ()
    ends = response.user_turn_ends or (len(recorded),)
    turns: list[AssistantMessage] = []
    owners: list[int] = []
    start = 0
    for user_turn, end in enumerate(ends):
        answers = recorded[start:end][: case.max_turns]
        start = end
        turns.extend(answers)
        owners.extend([user_turn] * len(answers))
        if len(answers) == case.max_turns and answers[-1].tool_calls:
            return ReadTurns(tuple(turns), tuple(owners), True, user_turn + 1)
    return ReadTurns(tuple(turns), tuple(owners), False, len(ends))


def user_turns_problem(case: Case, response: Response) -> str | None:
    """What is wrong with a recorded line of a case with `user_turns`, if anything: its
    boundaries are missing, name more user turns than the case has, or end before the last
    user turn without a reason that stops the loop."""
    if response.turns is None:
        return None
    total = 1 + len(case.user_turns or ())
    if response.user_turn_ends is None:
        return (f"case {case.id!r} has {total} user turns: give user_turn_ends, where each "
                "one's answers end in turns")
    if len(response.user_turn_ends) > total:
        return f"{len(response.user_turn_ends)} user turns, but case {case.id!r} has {total}"
    read = read_turns(case, response)
    if read.reached < total and not read.hit_limit and response.finish_reason not in CUT_SHORT:
        return (f"the conversation ends after user turn {read.reached} of {total}, without a "
                f"finish_reason that stops it ({', '.join(sorted(CUT_SHORT))})")
    return None


def parse_response(raw: dict[str, Any]) -> Response:
    """Parse one recorded line. Raises ValueError or pydantic ValidationError."""
    return Response.model_validate(normalise(raw))


def read_responses(path: Path | str, case_ids: set[str] | None = None) -> Iterator[Response]:
    """Stream responses from a JSON Lines file, checking each line as it goes.

    Args:
        path: a file of `{"case_id": ..., "repeat": ..., "response": ...}` lines (the OpenAI
            chat-completion message, or `turns` for a multi-turn attempt; docs/formats.md).
        case_ids: when given, a line naming another case is an input error.

    Raises InputError naming file, line and field on the first bad line."""
    for response, _ in read_response_lines(path, case_ids):
        yield response


# The fields that decide which attempt a line is and what it holds, as they stand in its text.
_DECIDING = {name: f'"{name}"' for name in ("case_id", "repeat", "response", "turns", "error")}
# Escapes of the letters and `_` a field's name is spelled with: JSON writers escape no printable
# ASCII but `"` and `\`, so text never holds one (non-ASCII is \u0080 and up).
_ASCII_ESCAPES = tuple(f"\\u00{high}" for high in "4567")


def twice_given(text: str, keys: Iterable[str]) -> str | None:
    """The first field of a recorded line (`text`, read into a dict with `keys`) that the text
    gives twice, if any: a JSON reader keeps the last, so `{"case_id": "a", "case_id": "b"}`
    would be read as case b in silence. The fields are those that decide which attempt a line
    is and what it holds; only a line that names one of them twice (or escapes a letter, the
    one other way to spell one) is read again."""
    for key in keys:
        quoted = _DECIDING.get(key)
        if quoted is not None and text.count(quoted) > 1:
            break
    else:
        if "\\u00" not in text or not any(escape in text for escape in _ASCII_ESCAPES):
            return None
    top: list[list[tuple[str, Any]]] = []

    def keep(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        top[:] = [pairs]  # the outermost object is the last one finished
        return dict(pairs)

    try:
        json.loads(text, object_pairs_hook=keep, parse_constant=float)
    except ValueError:  # already read once; what was wrong with it has been said
        return None
    seen: set[str] = set()
    for key, _ in top[0] if top else ():
        if key in seen:
            return key
        seen.add(key)
    return None


def read_response_lines(
    path: Path | str, case_ids: Container[str] | None = None,
    multi_turn: Container[str] | None = None,
    user_turns: Mapping[str, Case] | None = None,
) -> Iterator[tuple[Response, str]]:
    """Stream (response, raw line) pairs from a JSON Lines file, checking each line.

    `multi_turn`: the case ids whose calls get results (the model gets further turns); their
    attempts must be recorded as `turns`. `user_turns`: the cases with later user turns, by
    id; their lines must say where each user turn ends (`user_turn_ends`). Raises InputError
    naming file, line and field on the first bad line, and on a file with no response at all.
    """
    source = Path(path)
    seen = AttemptKeys()
    count = 0
    for line_no, raw, text in json_lines(source):
        twice = twice_given(text, raw)
        if twice is not None:
            raise InputError(source, "given twice in one line (JSON keeps only the last one)",
                             line=line_no, field=twice)
        if raw.get("response") is not None and raw.get("error") is not None:
            # (A live run keeps a content-filter refusal with its body; a file says one thing.)
            raise InputError(source, "a line has a response or an error, not both",
                             line=line_no, field="error")
        try:
            response = parse_response(raw)
        except ValidationError as exc:
            raise from_validation_error(source, line_no, exc) from None
        except (ValueError, AttributeError, TypeError) as exc:
            field, _, message = str(exc).partition(": ")
            raise InputError(
                source, message or field, line=line_no, field=field if message else None
            ) from None
        if case_ids is not None and response.case_id not in case_ids:
            raise InputError(
                source,
                f"no case {response.case_id!r} in the suite",
                line=line_no,
                field="case_id",
            )
        if multi_turn is not None and response.turns is None and (
            response.message is not None and response.case_id in multi_turn
        ):
            raise InputError(
                source,
                f"case {response.case_id!r} is multi-turn: record its assistant messages "
                "under `turns`, not `response`",
                line=line_no,
                field="response",
            )
        # (`is not None`, not truthiness: a lazy mapping's len() would build every case.)
        conversation = user_turns.get(response.case_id) if user_turns is not None else None
        problem = conversation and user_turns_problem(conversation, response)
        if problem:
            raise InputError(source, problem, line=line_no, field="user_turn_ends")
        key = (response.case_id, response.repeat)
        if not seen.add(*key):
            raise InputError(
                source,
                f"a second response for case {key[0]!r} repeat {key[1]}",
                line=line_no,
                field="repeat",
            )
        count += 1
        yield response, text
    if not count:
        raise InputError(source, "no responses (the file is empty)")
