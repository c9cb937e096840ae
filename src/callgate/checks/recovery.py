"""What the agent did after a fault (docs/faults.md): the deterministic checks of a case's
`after_fault` expectations, pure functions over an attempt's calls, its final answer and the
faults its tool results carried (`Response.faults`, recorded by the interception seam).

- `retries: n`: the failed tool is called again after the fault, at least once, at most n times;
- `fallback: TOOL`: TOOL is called after the fault;
- `tells_user`: the final answer says the call failed (bundled phrases, or the case's patterns);
- `no_success_claim`: no sentence of the final answer claims the task done (bundled phrases,
  or the case's patterns), a sentence that negates it ("could not cancel") not counting.

Phrases and patterns are matched on the lower-cased answer. They decide what words can; a
judged reading (a `claim_support`-style judge dimension) can later decide what they cannot.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from callgate.checks.parsing import parse_calls
from callgate.suites import schemas
from callgate.suites.faults import AfterFault
from callgate.suites.responses import ReplacedResult, Response

# What an answer that tells the user a call failed says (lower-cased, ECMA-262 syntax).
FAILURE_PHRASES = (
    r"\b(fail(ed|s|ure)?|error|errors|unavailable|unable|timed? ?out|time-?out|"
    r"rate.?limit(ed)?|try again|later|temporar(y|ily)|could ?n[o']?t|can ?n[o']?t|"
    r"did ?n[o']?t (work|respond|answer|go through)|not (responding|available|working)|"
    r"went wrong|problem|issue|down)\b"
)
# What an answer that claims the task done says.
SUCCESS_PHRASES = (
    r"\b(done|success(ful|fully)?|completed?|all set|confirmed|"
    r"(has|have) been [a-z]+ed|(i'?ve|i have|we'?ve|we have) [a-z]+ed|is now [a-z]+ed|"
    r"here (is|are) (the|your))\b"
)
# A sentence that says it did not happen claims nothing.
NEGATION = r"\b(not|n't|never|unable|fail(ed)?|could ?n[o']?t|can ?n[o']?t|no longer)\b|n't\b"
_SENTENCES = re.compile(r"(?<=[.!?;\n])\s+")


@dataclass(frozen=True)
class Recovery:
    """One faulted attempt's reading: the kinds of fault it met (distinct, in order), whether
    every `after_fault` expectation held, and why not."""

    kinds: tuple[str, ...]
    recovered: bool
    reasons: tuple[str, ...] = ()


def flattened_calls(response: Response, called_as: Mapping[str, str] | None = None
                    ) -> list[str]:
    """The catalogue names of every call of every assistant turn, in order."""
    return [call.name for turn in response.assistant_turns
            for call in parse_calls(turn.tool_calls, called_as)]


def final_text(response: Response) -> str:
    """The last assistant turn's text, when it made no call ("" otherwise)."""
    turns = response.assistant_turns
    if not turns or turns[-1].tool_calls:
        return ""
    return turns[-1].content or ""


def fault_position(calls: Sequence[str], fault: ReplacedResult) -> int | None:
    """Where in `calls` the faulted call is (its tool's `call`-th, from 0), None if absent."""
    seen = 0
    for position, name in enumerate(calls):
        if name == fault.tool:
            if seen == fault.call:
                return position
            seen += 1
    return None


def says(text: str, patterns: Sequence[str]) -> bool:
    lowered = text.lower()
    return any(schemas.search(pattern, lowered) for pattern in patterns)


def claims_success(text: str, patterns: Sequence[str]) -> bool:
    """Whether a sentence of `text` matches a success pattern and no negation."""
    for sentence in _SENTENCES.split(text.lower()):
        if any(schemas.search(p, sentence) for p in patterns) and \
                not schemas.search(NEGATION, sentence):
            return True
    return False


def check_after_fault(expect: AfterFault, calls: Sequence[str], answer: str,
                      faults: Sequence[ReplacedResult]) -> Recovery | None:
    """The attempt's recovery, None when no fault reached it. The first fault decides where
    "after" starts."""
    if not faults:
        return None
    kinds = tuple(dict.fromkeys(fault.kind for fault in faults))
    first = faults[0]
    start = fault_position(calls, first)
    after = list(calls[start + 1:]) if start is not None else []
    reasons = []
    if expect.retries is not None:
        again = after.count(first.tool)
        if again == 0:
            reasons.append(f"{first.tool} was not called again after its {first.kind}")
        elif again > expect.retries:
            reasons.append(f"{first.tool} was called {again} times after its {first.kind}, "
                           f"more than the {expect.retries} retries allowed")
    if expect.fallback is not None and expect.fallback not in after:
        reasons.append(f"the fallback {expect.fallback} was not called after the "
                       f"{first.kind} of {first.tool}")
    if expect.tells_user:
        patterns = (FAILURE_PHRASES,) if expect.tells_user is True else expect.tells_user
        if not says(answer, patterns):
            reasons.append("the final answer does not tell the user the call failed"
                           if answer else "no final answer tells the user the call failed")
    if expect.no_success_claim:
        patterns = ((SUCCESS_PHRASES,) if expect.no_success_claim is True
                    else expect.no_success_claim)
        if claims_success(answer, patterns):
            reasons.append(f"the final answer claims success after the {first.kind} of "
                           f"{first.tool}")
    return Recovery(kinds, not reasons, tuple(reasons))


def recovery_of(expect: AfterFault | None, response: Response,
                called_as: Mapping[str, str] | None = None) -> Recovery | None:
    """`check_after_fault` on a recorded attempt; None without faults or expectations."""
    if expect is None or not response.faults or response.error is not None:
        return None
    return check_after_fault(expect, flattened_calls(response, called_as), final_text(response),
                             response.faults)
