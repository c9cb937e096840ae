"""The judge as a run uses it: one step object (`JudgeStep`), its cache in the store
(`JudgeCache`), its concurrent loop (`JudgeStep.judge_all`), and what it decided over a run
(`JudgedTally`, `judged_shares`). Scoring, live runs and merging call these; none spells the
steps out again."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

from callgate.checks.verdict import Verdict
from callgate.errors import CallgateError
from callgate.judging.certificates import Certificate, dimension_rates, require_certificate
from callgate.judging.judge import (
    Complete,
    Judge,
    JudgeCallError,
    JudgeEndpointError,
    JudgeModel,
    JudgeOutput,
    JudgeOutputError,
    JudgeSpec,
    cache_key,
    corrected_share,
    judge_candidate,
    judge_once,
    load_judge,
)
from callgate.judging.judged_shares import JudgedShare, JudgedShares
from callgate.models.config import Candidate
from callgate.models.pacing import CEILING
from callgate.stats import design_effect
from callgate.store.db import Store
from callgate.store.rows import judge_output_row

# What the judge reads of one attempt: its case document (tools, messages, rubric) and its
# response document.
Payloads = tuple[dict[str, Any], dict[str, Any]]
# A verdict; a reply or a call that was no verdict (judge_error); or why the attempt is still
# pending.
Outcome = JudgeOutput | JudgeOutputError | str
K = TypeVar("K")


class JudgeCache:
    """The judge's verdicts kept in the store, by judge fingerprint + case + response.
    Without `reasons` (production traces: real users' data), a verdict is kept without the
    judge's free-text reason, which can quote the trace: the labels are what a rerun needs."""

    def __init__(self, store: Store, fingerprint: str, *, reasons: bool = True) -> None:
        self.store, self.fingerprint, self.reasons = store, fingerprint, reasons

    def key(self, payloads: Payloads) -> str:
        return cache_key(self.fingerprint, *payloads)

    def get(self, keys: list[str]) -> dict[str, JudgeOutput]:
        """The cached verdicts among `keys`, by key."""
        return {key: JudgeOutput.model_validate_json(text)
                for key, text in self.store.judge_outputs(keys).items()}

    def put(self, key: str, output: JudgeOutput) -> None:
        """Keep a verdict, committed at once (call outside any transaction)."""
        kept = output if self.reasons else output.model_copy(update={"reason": ""})
        self.store.save_judge_outputs([judge_output_row(
            key=key, fingerprint=self.fingerprint, output=kept.model_dump_json())])


@dataclass
class JudgeStep:
    """The judge as a run uses it: certified (or knowingly not) and callable."""

    judge: Judge
    complete: Complete
    certificate: Certificate | None  # None only when scoring --uncalibrated
    concurrency: int | None = None  # judge calls in flight, exactly; None: the pacer adapts
    aclose: Callable[[], Awaitable[None]] | None = None  # closes the client after judging
    model: JudgeModel | None = None  # its requests pass the endpoint's pacer (models.pacing)
    calls: int = 0
    cache_hits: int = 0

    @property
    def fingerprint(self) -> str:
        return self.judge.fingerprint

    async def judge_all(self, store: Store, attempts: Mapping[K, Payloads | str],
                        done: dict[K, Outcome],
                        call_errors: Literal["pending", "raise"] = "pending", *,
                        cache_reasons: bool = True) -> None:
        """Judge every attempt, at most `concurrency` at a time (without it, as many as the
        model's pacer lets through: it adapts to the endpoint's limits), reading and filling
        the store's cache; `done` gets each outcome as it arrives, so that if judging is cut short
        (an exception, Ctrl-C) the caller still has what was decided. A judge call that fails
        after the client's retries is a JudgeEndpointError (the outcome judge_error, as a
        provider error is for the model), or with `call_errors="raise"` stops judging with its
        JudgeCallError (calibration: no certificate from part of a set); a reply that is not a
        verdict after the spec's retries is a JudgeOutputError. An attempt the judge cannot be
        given (its payload is a reason) stays pending with that reason. Without
        `cache_reasons`, the cache keeps each verdict without its reason (`JudgeCache`); `done`
        gets it whole. The client is closed at the end."""
        cache = JudgeCache(store, self.fingerprint, reasons=cache_reasons)
        keys = {index: cache.key(payloads) for index, payloads in attempts.items()
                if not isinstance(payloads, str)}
        cached = cache.get(list(dict.fromkeys(keys.values())))
        gate = asyncio.Semaphore(self.concurrency or CEILING)

        async def one(index: K, payloads: Payloads) -> None:
            case_doc, response_doc = payloads
            async with gate:
                try:
                    output = await judge_once(
                        self.judge, self.complete, tools=case_doc["tools"],
                        conversation=case_doc["messages"], rubric=case_doc["rubric"],
                        response=response_doc)
                except JudgeOutputError as exc:
                    done[index] = exc
                    return
                except JudgeCallError as exc:
                    if call_errors == "raise":
                        raise
                    done[index] = JudgeEndpointError(f"no verdict after retries: {exc}")
                    return
            cache.put(keys[index], output)
            self.calls += 1
            done[index] = output

        tasks = []
        for index, payloads in attempts.items():
            if isinstance(payloads, str):
                done[index] = payloads
            elif keys[index] in cached:
                self.cache_hits += 1
                done[index] = cached[keys[index]]
            else:
                tasks.append(asyncio.ensure_future(one(index, payloads)))
        try:
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:  # one failed: stop the others (their outputs so far are saved)
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            if self.aclose is not None:
                await self.aclose()


def at_endpoint(judge: Judge, api_base: str | None, api_key_env: str | None = None) -> Judge:
    """The same judge reached at another endpoint (a proxy, a local vLLM or Ollama server).

    The fingerprint is kept: it names what decides (prompt, model snapshot, parameters), and
    the endpoint only says where that model is served, as a key only says who pays. The key of
    the spec's own endpoint is never sent elsewhere: only `api_key_env` given here is used."""
    if api_base is None:
        if api_key_env is None:
            return judge
        return _with_spec(judge, judge.spec.model_copy(update={"api_key_env": api_key_env}))
    try:  # the candidates' rules: no credentials or query string in the URL, a NAME for the key
        Candidate.model_validate({"model": judge.spec.model, "api_base": api_base,
                                  "api_key_env": api_key_env})
    except ValueError as exc:
        first = exc.errors()[0] if hasattr(exc, "errors") else {"msg": str(exc)}
        field = ".".join(str(part) for part in first.get("loc", ())) or "--api-base"
        raise CallgateError(f"--{field.replace('_', '-')}: {first['msg']}") from None
    spec = judge.spec.model_copy(update={"api_base": api_base, "api_key_env": api_key_env})
    return _with_spec(judge, spec)


def _with_spec(judge: Judge, spec: JudgeSpec) -> Judge:
    """The judge with another endpoint: the client (its candidate) follows the spec."""
    return judge.model_copy(update={"spec": spec, "candidate": judge_candidate(spec)})


def judge_step(spec_path: Path | str, store: Store, *, uncalibrated: bool,
               environ: Mapping[str, str], concurrency: int | None = None,
               api_base: str | None = None, api_key_env: str | None = None) -> JudgeStep:
    """Load a judge for a run: refuse it without a certificate for its exact fingerprint,
    unless the user knowingly scores uncalibrated. `spec_path` may be a bundled judge's name."""
    from callgate.judging.bundled import judge_spec

    judge = at_endpoint(load_judge(judge_spec(spec_path)), api_base, api_key_env)
    try:
        certificate = require_certificate(judge, store)
    except CallgateError:
        if not uncalibrated:
            raise
        certificate = None
    model = JudgeModel(judge, environ, concurrency=concurrency)
    return JudgeStep(judge, model.complete, certificate, concurrency, model.aclose, model)


@dataclass
class JudgedTally:
    """What the judge decided over a run's judged attempts, on the quantities calibration
    measures its error rates on.

    tool_choice: the judge's tool_choice over every judged attempt. arguments: the judge's
    pass/fail over the attempts whose tool choice it passed, leaving out its n/a (calibration
    counts only items a person labelled pass or fail) and the attempts whose arguments already
    failed JSON or schema validation (failures the judge did not decide; counted apart)."""

    n: int = 0
    tool_choice: int = 0
    arguments_n: int = 0
    arguments: int = 0
    not_applicable: int = 0
    deterministic_failures: int = 0
    judge_errors: int = 0  # replies that were not a verdict: in no share, counted here
    # Per case: [tool choice passes, judged, arguments passes, arguments graded], for the
    # intervals clustered by case.
    by_case: dict[str, list[int]] = field(default_factory=dict)

    def add(self, verdict: Verdict, output: JudgeOutput) -> None:
        """`verdict` is the attempt's verdict before the judge (its JSON/schema findings)."""
        self.n += 1
        case = self.by_case.setdefault(verdict.case_id, [0, 0, 0, 0])
        case[1] += 1
        if output.tool_choice != "pass":
            return
        self.tool_choice += 1
        case[0] += 1
        if verdict.arguments in ("invalid_json", "schema_violation"):
            self.deterministic_failures += 1
        elif output.arguments == "n/a":
            self.not_applicable += 1
        else:
            self.arguments_n += 1
            self.arguments += output.arguments == "pass"
            case[3] += 1
            case[2] += output.arguments == "pass"

    def groups(self, dim: str) -> Counter[tuple[int, int]]:
        """A share's (passes, attempts) per case, counted by kind (`callgate.stats.Groups`)."""
        first = 0 if dim == "tool_choice" else 2
        return Counter((c[first], c[first + 1]) for c in self.by_case.values())


def judged_shares(tally: JudgedTally, fingerprint: str, certificate: Certificate | None
                  ) -> JudgedShares:
    """Raw and Rogan–Gladen corrected shares of the judged attempts, per dimension, each over
    the attempts its calibration rates apply to (see `JudgedTally`); corrected only with the
    judge's certificate. The interval is clustered by case, as the figures' are: each share
    carries the `design_effect` of its verdicts' repeats and their `icc` (None: no repeats, or
    verdicts that never vary). Built from the fields this writes (`tool_choice` has no
    n/a or deterministic failures), so a dump holds those only."""
    shares: dict[str, JudgedShare] = {}
    for dim, successes, n in (("tool_choice", tally.tool_choice, tally.n),
                              ("arguments", tally.arguments, tally.arguments_n)):
        effect, _, icc = design_effect(tally.groups(dim))
        rates = dimension_rates(certificate, dim) if certificate else None
        share = (corrected_share(successes, n, *rates, design_effect=effect)
                 if rates and n else None)
        beside = ({"not_applicable": tally.not_applicable,
                   "deterministic_failures": tally.deterministic_failures}
                  if dim == "arguments" else {})
        shares[dim] = JudgedShare.model_validate(
            {**(share or {"raw": 100 * successes / n if n else None, "corrected": None,
                          "low": None, "high": None, "n": n}),
             "design_effect": effect, "icc": icc, **beside})
    return JudgedShares(
        n=tally.n, fingerprint=fingerprint, certified=certificate is not None,
        tool_choice=shares["tool_choice"], arguments=shares["arguments"],
        judge_errors=tally.judge_errors,
        # Which estimator each figure is (an audit adds ppi++: callgate judge audit RUN).
        estimators={"raw": "raw", "corrected": "rogan_gladen",
                    "figures": "checks, with the judge's verdicts as given"})
