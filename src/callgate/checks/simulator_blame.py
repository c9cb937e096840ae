"""Blame (docs/simulated-user.md, "Blame"): why a conversation of a case with a `scenario` says
nothing about the agent because its simulated user, not the agent, did not play its part. Every
check here is deterministic, read from the scenario and what the user wrote, with no model:

- ended early: the user wrote its stop token before the agent made any call, in a case that
  expects one;
- leaked: a user turn holds a value the scenario lists in `secret` (what the agent must find
  out itself), as a whole token, case-insensitive;
- contradicted: a user turn states, for a fact of `known` whose value has a shape of its own
  (a string with a digit and something that is not one: `ord_1`, `A-1234`, `2026-05-01`), a
  different value of that same shape (`ord_2`) that the user had not been told in the
  conversation and that is no other fact's value;
- its model failed (a provider error after retries).

What is left to a reader: a contradiction in words (a reason, a yes for a no, a number), a fact
volunteered before the agent asked; the opt-in user_fidelity judge reads those (`run
--user-judge`, judging.user_fidelity), on the failed conversations no check here blamed. The
caller decides when blame applies: only to a
conversation that failed its checks."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from callgate.suites.cases import NoCall, Scenario
from callgate.suites.responses import Response
from callgate.suites.suite import Case

_EDGE = r"0-9A-Za-z_\-"  # what a token does not start or end beside


@dataclass
class Played:
    """What the simulated user of one conversation wrote, what it had been shown before each
    turn it wrote, and how it ended."""

    texts: list[str] = field(default_factory=list)
    heard: list[str] = field(default_factory=list)  # before texts[i]: what it was shown
    keys: list[str] = field(default_factory=list)
    stopped: bool = False  # it wrote the stop token (else: the turn cap, or an error)
    error: str | None = None  # its model failed: why
    # The conversation as the user saw it, in order: {"role": "agent" | "user", "content"}
    # (the user_fidelity judge reads it)
    transcript: list[dict[str, str]] = field(default_factory=list)


def _token(value: str) -> re.Pattern[str]:
    """A value as a whole token: not inside a longer identifier or number."""
    return re.compile(rf"(?<![{_EDGE}]){re.escape(value)}(?![{_EDGE}])", re.IGNORECASE)


def shape_of(value: str) -> re.Pattern[str] | None:
    """The values of a fact's shape: its text with each run of digits free (`ord_1` → `ord_N`
    for any N), as a whole token; None for a value without a shape of its own (no digit, or
    nothing but digits and spaces: a number means too many things to compare)."""
    if not re.search(r"\d", value) or not re.sub(r"[\d\s]", "", value):
        return None
    parts = [r"\d+" if part.isdigit() else re.escape(part)
             for part in re.split(r"(\d+)", value.strip()) if part]
    return re.compile(rf"(?<![{_EDGE}]){''.join(parts)}(?![{_EDGE}])", re.IGNORECASE)


def leaked(scenario: Scenario, played: Played) -> list[str]:
    """The secrets a user turn said."""
    return [f"it said {secret!r}, which the scenario keeps secret"
            for secret in scenario.secret
            if any(_token(secret).search(text) for text in played.texts)]


def contradicted(scenario: Scenario, played: Played) -> list[str]:
    """The facts of `known` a user turn gave another value of (see the module's doc)."""
    given = {str(value).casefold() for value in scenario.known.values()}
    given |= {secret.casefold() for secret in scenario.secret}  # a secret said is a leak
    found: list[str] = []
    for name, value in scenario.known.items():
        shape = shape_of(value) if isinstance(value, str) else None
        if shape is None:
            continue
        for number, text in enumerate(played.texts):
            heard = played.heard[number].casefold() if number < len(played.heard) else ""
            other = next((said for said in (m.group(0) for m in shape.finditer(text))
                          if said.casefold() not in given
                          and not _token(said).search(heard)), None)
            if other is not None:
                found.append(f"it said {other!r} where the scenario's {name} is {value!r}")
                break
    return found


def ended_early(case: Case, played: Played, response: Response) -> list[str]:
    """The user stopped before the agent made any call, in a case that expects one."""
    calls = sum(len(turn.tool_calls) for turn in response.turns or ())
    if response.message is not None:
        calls += len(response.message.tool_calls)
    if played.stopped and calls == 0 and not isinstance(case.expect, NoCall):
        return ["it ended the conversation before the agent made any call"]
    return []


def simulator_faults(case: Case, scenario: Scenario, played: Played, response: Response
                     ) -> list[str]:
    """Why the simulated user, not the agent, would be to blame for this conversation failing
    (empty: it played its part)."""
    found = [played.error] if played.error is not None else []
    return [*found, *ended_early(case, played, response), *leaked(scenario, played),
            *contradicted(scenario, played)]
