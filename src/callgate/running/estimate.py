"""`run --estimate`: what a run would call and cost, before calling anything.

The run's plan is read against the store as the run reads it (after the cache, in the shard).
Prompt tokens are counted with litellm's offline token counter for the model (the tokenizer
litellm uses for it: tiktoken's for OpenAI models, its default one where it has none), request
by request; completion tokens are the agent's mean per stored answer, else a stated default;
dollars come from litellm's bundled price map. litellm is imported with its network switched
off (models.litellm_client.import_litellm). A conversation's later turns depend on the model's
answers: only its first request is counted, and the estimate says so."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from pydantic import BaseModel, ConfigDict

from callgate.models.config import Candidate
from callgate.running.cache import AnswerCache
from callgate.running.conversation import converse
from callgate.running.model_source import ModelSource, run_route
from callgate.running.plan import plan, plan_conversations
from callgate.running.settings import RunSettings
from callgate.store.db import Store
from callgate.suites.suite import Suite

# Completion tokens per attempt when the agent has no stored answer that reported usage: a
# tool call with a few arguments, or a short answer, is well under it.
DEFAULT_COMPLETION_TOKENS = 256


class RunEstimate(BaseModel):
    model_config = ConfigDict(frozen=True)
    candidate: str
    model: str
    attempts: int  # planned (cases × repeats, in the shard)
    cached: int  # answered by the store
    to_call: int  # attempts to make
    prompt_tokens: int | None  # of the attempts to make; None for a target
    completion_tokens_per_attempt: float
    completion_source: str
    completion_tokens: int
    usd: float | None  # None: not in litellm's price map
    price_source: str
    notes: list[str]

    def text(self) -> str:
        usd = f"${self.usd:.4f}" if self.usd is not None else "unknown"
        prompt = f"{self.prompt_tokens:,}" if self.prompt_tokens is not None else "unknown"
        lines = [
            f"estimate for {self.candidate} ({self.model}): nothing was called",
            f"  attempts: {self.attempts} planned, {self.cached} from the store, "
            f"{self.to_call} to make",
            f"  prompt tokens: {prompt} (litellm's offline token counter)",
            f"  completion tokens: {self.completion_tokens:,} "
            f"({self.completion_tokens_per_attempt:.0f} an attempt: {self.completion_source})",
            f"  cost: {usd} ({self.price_source})",
        ]
        return "\n".join(lines + [f"  note: {note}" for note in self.notes])


def _counter(model: str) -> Any:
    from callgate.models.litellm_client import import_litellm

    litellm = import_litellm()

    def count(body: dict[str, Any]) -> int:
        return int(litellm.token_counter(model=model, messages=body["messages"],
                                         tools=body.get("tools") or None))

    return litellm, count


def _price(litellm: Any, model: str, prompt: int, completion: int) -> float | None:
    try:
        pair = litellm.cost_per_token(model=model, prompt_tokens=prompt,
                                      completion_tokens=completion)
    except Exception:  # not in the map: unknown, never 0
        return None
    return float(pair[0]) + float(pair[1])


def estimate_run(suite: Suite, candidate: Candidate, store: Store,
                 settings: RunSettings) -> RunEstimate:
    """The run `run_live` would make with these settings, counted and priced, calling
    nothing."""
    if candidate.target is not None:
        return _target_estimate(suite, candidate, store, settings)
    route = run_route(candidate, settings.perturbation)
    notes: list[str] = []
    attempts = plan(suite, route, settings.repeats)
    conversations = plan_conversations(suite, settings.repeats)
    if settings.shard is not None:
        attempts = [a for a in attempts if settings.shard.holds(a.case_id)]
        conversations = [c for c in conversations if settings.shard.holds(c.case_id)]
    cache = AnswerCache(store, read=settings.cache or settings.offline, offline=False,
                        commit_every=settings.commit_every)
    stored = cache.usable([a.key for a in attempts])
    to_call = [a for a in attempts if a.key not in stored]

    model = ModelSource(candidate, route)

    async def unfinished() -> list[Any]:
        return [c for c in conversations
                if await converse(c, model, suite, cache, None) is None]

    talks = asyncio.run(unfinished()) if conversations else []
    planned = len(attempts) + len(conversations)
    making = len(to_call) + len(talks)
    per, source = _completion_per_attempt(store, candidate.name)
    completion = round(per * making)
    litellm, count = _counter(route.model)
    by_body: dict[str, int] = {}
    prompt = 0
    for body in [a.body for a in to_call] + [route.body(c.messages, c.tools) for c in talks]:
        text = json.dumps(body, sort_keys=True)
        if text not in by_body:
            by_body[text] = count(body)
        prompt += by_body[text]
    if talks:
        notes.append(f"{len(talks)} attempts are conversations: only their first request "
                     "is counted (later turns depend on the answers)")
    usd = _price(litellm, route.model, prompt, completion)
    price_source = ("litellm's offline price map" if usd is not None else
                    f"{route.model} is not in litellm's offline price map")
    return RunEstimate(candidate=candidate.name, model=candidate.model, attempts=planned,
                       cached=planned - making, to_call=making, prompt_tokens=prompt,
                       completion_tokens_per_attempt=per, completion_source=source,
                       completion_tokens=completion, usd=usd, price_source=price_source,
                       notes=notes)


def _completion_per_attempt(store: Store, agent: str) -> tuple[float, str]:
    total, answers = store.completion_tokens_of(agent)
    if answers:
        return total / answers, f"the mean of {answers} stored answers of agent {agent}"
    return (float(DEFAULT_COMPLETION_TOKENS),
            f"default {DEFAULT_COMPLETION_TOKENS}: no stored answer of {agent}")


def _target_estimate(suite: Suite, candidate: Candidate, store: Store,
                     settings: RunSettings) -> RunEstimate:
    """A target runs its own loop: its attempts are counted, its tokens are its own."""
    cases = [c for c in suite.cases if settings.shard is None or settings.shard.holds(c)]
    planned = len(cases) * settings.repeats
    per, source = _completion_per_attempt(store, candidate.name)
    return RunEstimate(candidate=candidate.name, model=candidate.model, attempts=planned,
                       cached=0, to_call=planned, prompt_tokens=None,
                       completion_tokens_per_attempt=per, completion_source=source,
                       completion_tokens=round(per * planned), usd=None,
                       price_source="not priced: a target's calls are its own",
                       notes=["a target runs its own loop: its calls and tokens are its own, "
                              "only the attempts are counted (its stored answers are not "
                              "looked up)"])


def total_estimate(parts: list[tuple[str, RunEstimate]]) -> RunEstimate:
    """Several runs' estimates (`run --perturb --estimate`: the clean run and one per
    variant) as one, each part's count in a note; unknown dollars when any part's are."""
    first = parts[0][1]
    prices = [part.usd for _, part in parts]
    to_call = sum(part.to_call for _, part in parts)
    completion = sum(part.completion_tokens for _, part in parts)
    prompts = [part.prompt_tokens for _, part in parts]
    notes = [f"{label}: {part.to_call} of {part.attempts} attempts to make"
             + (f", ${part.usd:.4f}" if part.usd is not None else "")
             for label, part in parts]
    notes += sorted({note for _, part in parts for note in part.notes})
    return first.model_copy(update={
        "attempts": sum(part.attempts for _, part in parts),
        "cached": sum(part.cached for _, part in parts), "to_call": to_call,
        "prompt_tokens": None if None in prompts else sum(p or 0 for p in prompts),
        "completion_tokens": completion,
        "usd": None if None in prices else sum(p or 0.0 for p in prices),
        "notes": notes})
