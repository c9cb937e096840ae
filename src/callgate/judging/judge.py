"""Stage 3, the judge: a frozen LLM judge for cases whose valid answers cannot be listed.

A judge is a TOML spec in `judges/`: a prompt template, a dated model snapshot, parameters and
certification thresholds. Its fingerprint hashes everything that can change a verdict, and the
judge refuses to score without a certificate for that exact fingerprint (see calibration.py).
The candidate's output is data inside the prompt: it is JSON-encoded with `<` and `>` escaped,
so it can never close the block it sits in.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import random
import re
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from callgate.checks.verdict import ArgsVerdict, Verdict
from callgate.errors import CallgateError, InputError, from_validation_error

# The correction of judged shares lives in judging.correction; its names stay importable here.
from callgate.judging.correction import add_two_corrected as add_two_corrected
from callgate.judging.correction import corrected_share as corrected_share
from callgate.judging.correction import rogan_gladen as rogan_gladen
from callgate.judging.dimensions import (
    BEHAVIOUR_DIMENSIONS,
    DIMENSIONS,
    AnswerKind,
    Dimension,
    output_schema,
    vote,
)
from callgate.models.config import Candidate, refuse_max_tokens
from callgate.models.pacing import CEILING, PacedClient, Pacer, Pacers, PacingFigures
from callgate.models.providers import make_client
from callgate.models.replies import Reply
from callgate.models.retry import RetryPolicy
from callgate.models.routes import api_key, route_for
from callgate.reading import loads, read_text, reading_toml

Label = Literal["pass", "fail", "n/a"]

# A dated snapshot: 2025-04-14, 20250414, @20250414 or -0613 style suffixes.
_DATED = re.compile(r"(\d{4}-\d{2}-\d{2}|\d{8}|-\d{4}$)")
_PLACEHOLDER = re.compile(r"\{\{(tools|conversation|rubric|response)\}\}")
NO_KEY_IN_FILE = ("a key is never written in the spec: put it in an environment variable and "
                  "give that variable's name in api_key_env")
# Fields of the candidate a judge is called as, by the spec field they come from.
_CANDIDATE_FIELDS = {"extra": "parameters.extra", "reasoning_effort": "parameters.reasoning_effort"}


class Thresholds(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    tpr: float = Field(0.90, ge=0, le=1)
    tnr: float = Field(0.90, ge=0, le=1)
    min_items_per_class: int = Field(30, ge=1)
    # Largest share of the set's items the judge may answer with no verdict (judge errors).
    max_judge_errors: float = Field(0.02, ge=0, le=1)
    # `point`: TPR and TNR at least the thresholds; `wilson`: their Wilson 95% lower bounds.
    rule: Literal["point", "wilson"] = "point"
    # Share of the test items whose labels a person gave or confirmed (not an assistant).
    min_person_confirmed: float = Field(0.0, ge=0, le=1)


class JudgeParameters(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    temperature: float = Field(0.0, allow_inf_nan=False)  # sent as JSON, which has no inf
    reasoning_effort: str | None = None  # set it for reasoning models; others reject it
    samples: int = Field(1, ge=1, le=15)
    extra: dict[str, Any] = Field(default_factory=dict)

    @field_validator("samples")
    @classmethod
    def _odd(cls, value: int) -> int:
        if value % 2 == 0:
            raise ValueError("use an odd number of samples, so the majority vote has no ties")
        return value

    @model_validator(mode="before")
    @classmethod
    def _no_max_tokens_here(cls, raw: Any) -> Any:
        if isinstance(raw, Mapping):
            refuse_max_tokens(raw)
        return raw

    @field_validator("extra")
    @classmethod
    def _no_max_tokens(cls, value: dict[str, Any]) -> dict[str, Any]:
        refuse_max_tokens(value)  # the candidates' rule: a cut-off verdict is unreadable
        return value


class JudgeSpec(BaseModel):
    """A frozen judge: prompt + dated model + parameters (+ thresholds for certification)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str
    model: str
    prompt: str  # path of the Markdown template, relative to the spec file
    api_base: str | None = None
    api_key_env: str | None = None
    dimensions: tuple[Dimension, ...] = DIMENSIONS
    parameters: JudgeParameters = Field(default_factory=JudgeParameters)
    thresholds: Thresholds = Field(default_factory=Thresholds)
    # Times a reply that is not a verdict is asked again before it counts as a judge error.
    # Not in the fingerprint: it decides what happens to an unreadable reply, not a verdict.
    retries: int = Field(2, ge=0, le=5)

    @model_validator(mode="before")
    @classmethod
    def _refused_fields(cls, raw: Any) -> Any:
        if isinstance(raw, Mapping):
            refuse_max_tokens(raw)
            if "api_key" in raw:
                raise ValueError(f"api_key: {NO_KEY_IN_FILE}")
        return raw

    @field_validator("dimensions")
    @classmethod
    def _one_judge(cls, value: tuple[Dimension, ...]) -> tuple[Dimension, ...]:
        behaviour = [dim for dim in value if dim in BEHAVIOUR_DIMENSIONS]
        if behaviour and len(value) != 1:
            raise ValueError(f"{behaviour[0]} is a judge of its own: give it alone")
        if not value:
            raise ValueError("name at least one dimension")
        return value

    @field_validator("api_key_env")
    @classmethod
    def _env_named(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError(
                "is empty: name the environment variable that holds the judge model's key "
                "(e.g. OPENAI_API_KEY), or leave the field out")
        return value

    @field_validator("model")
    @classmethod
    def _dated(cls, value: str) -> str:
        if not _DATED.search(value):
            raise ValueError(
                "looks like a floating alias (the value is not shown: it may be a pasted key); "
                "name a dated snapshot "
                "(e.g. openai/gpt-4.1-2025-04-14) so the judge cannot change under you")
        return value


def judge_candidate(spec: JudgeSpec) -> Candidate:
    """The judge's model as the candidate it is called as (same clients, same rules)."""
    params = spec.parameters
    return Candidate(
        name=spec.name, model=spec.model, api_base=spec.api_base, api_key_env=spec.api_key_env,
        reasoning_effort=params.reasoning_effort or "omit",  # type: ignore[arg-type]
        extra={"temperature": params.temperature, **params.extra},
    )


class Judge(BaseModel):
    """A loaded spec with its prompt text and fingerprint."""

    model_config = ConfigDict(frozen=True)
    spec: JudgeSpec
    spec_path: Path
    template: str
    fingerprint: str
    candidate: Candidate

    @property
    def certificate_path(self) -> Path:
        return self.spec_path.with_name(f"{self.spec_path.stem}.cert.json")


def fingerprint(spec: JudgeSpec, template: str) -> str:
    """SHA-256 over the canonical prompt text, model, parameters and output schema."""
    canonical_prompt = template.replace("\r\n", "\n").strip() + "\n"
    payload = {
        "prompt": canonical_prompt,
        "model": spec.model,
        "api_base": spec.api_base,
        "parameters": spec.parameters.model_dump(mode="json"),
        "dimensions": list(spec.dimensions),
        "output_schema": output_schema(spec.dimensions),
    }
    return hashlib.sha256(
        json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()
    ).hexdigest()


def load_judge(path: Path | str) -> Judge:
    """Load a judge spec (TOML, with its prompt file beside it; README, "The judge").

    Args:
        path: the spec's .toml file (or the path without the suffix).

    Returns the Judge, whose fingerprint names the prompt, model and parameters. Raises
    InputError naming file, line and field."""
    source = Path(path)
    if source.is_dir() or source.suffix != ".toml":
        with_suffix = source.with_suffix(".toml") if not source.is_dir() else None
        if with_suffix is not None and with_suffix.is_file():
            source = with_suffix
    with reading_toml(source, missing="judge spec not found") as raw:
        spec, candidate = _checked_spec(source, raw)
    prompt_path = source.parent / spec.prompt
    template = read_text(prompt_path)
    missing = {"tools", "conversation", "rubric", "response"} - set(_PLACEHOLDER.findall(template))
    if missing:
        raise InputError(prompt_path, f"missing placeholder(s): {', '.join(sorted(missing))}")
    return Judge(spec=spec, spec_path=source, template=template,
                 fingerprint=fingerprint(spec, template), candidate=candidate)


def _checked_spec(source: Path, raw: Mapping[str, Any]) -> tuple[JudgeSpec, Candidate]:
    """The spec read from `source` and the candidate its model is called as, or an InputError
    naming the field (`reading_toml` adds its line)."""
    _refuse_the_key_itself(source, raw)
    try:
        spec = JudgeSpec.model_validate(raw)
    except ValidationError as exc:
        raise from_validation_error(source, None, exc) from None
    try:
        candidate = judge_candidate(spec)
    except ValidationError as exc:
        error = from_validation_error(source, None, exc)
        head, dot, rest = (error.field or "").partition(".")
        field = _CANDIDATE_FIELDS.get(head, head) + dot + rest
        raise InputError(source, error.message, field=field) from None
    prompt_path = source.parent / spec.prompt
    if not prompt_path.exists():
        raise InputError(source, f"prompt file {prompt_path} not found", field="prompt")
    return spec, candidate


def _refuse_the_key_itself(source: Path, raw: Mapping[str, Any]) -> None:
    """A spec that holds the key its api_key_env names (pasted as the model, say) is refused
    before anything could print that field's value."""
    name = raw.get("api_key_env")
    secret = os.environ.get(name, "") if isinstance(name, str) and name else ""
    if len(secret) < 8:  # nothing set, or too short to tell apart from ordinary text
        return
    stack: list[tuple[str, Any]] = [(key, value) for key, value in raw.items()]
    while stack:
        field, value = stack.pop()
        if isinstance(value, str) and secret in value:
            raise InputError(source, f"holds the value of ${name}, the key itself: name the "
                             "variable in api_key_env, never the key", field=field)
        if isinstance(value, dict):
            stack.extend((f"{field}.{key}", item) for key, item in value.items())
        elif isinstance(value, list):
            stack.extend((f"{field}[{i}]", item) for i, item in enumerate(value))


def _data(value: Any) -> str:
    """JSON with < and > escaped: valid JSON, same meaning, and no delimiter can form in it."""
    return json.dumps(value, indent=1, ensure_ascii=False).replace("<", "\\u003c").replace(
        ">", "\\u003e")


def render_prompt(template: str, tools: Sequence[Mapping[str, Any]],
                  conversation: Sequence[Mapping[str, Any]], rubric: str,
                  response: Mapping[str, Any]) -> str:
    """Fill the template in one pass, so data that contains a placeholder stays data."""
    values = {
        "tools": _data(list(tools)),
        "conversation": _data(list(conversation)),
        "rubric": rubric.replace("<<<", "‹‹‹").replace(">>>", "›››"),
        "response": _data(dict(response)),
    }
    return _PLACEHOLDER.sub(lambda m: values[m.group(1)], template)


class JudgeOutput(BaseModel):
    """A verdict: tool_choice and arguments from the tool-choice judge, or the one dimension
    of a judge beyond the call (the others None)."""

    model_config = ConfigDict(frozen=True)
    tool_choice: Literal["pass", "fail"] | None = None
    arguments: Label | None = None
    answer_kind: AnswerKind | None = None
    claim_support: Literal["pass", "fail"] | None = None
    user_fidelity: Literal["pass", "fail"] | None = None
    reason: str = ""

    def missing(self, dimensions: Sequence[str]) -> list[str]:
        """The fields a judge of these dimensions must give that this verdict lacks."""
        behaviour = [dim for dim in dimensions if dim in BEHAVIOUR_DIMENSIONS]
        wanted = behaviour or ["tool_choice", "arguments"]
        return [dim for dim in wanted if getattr(self, dim) is None]


class JudgeOutputError(CallgateError):
    """The judge model's reply is not the JSON object the prompt asks for."""


def parse_output(text: str | None, dimensions: Sequence[str] = DIMENSIONS) -> JudgeOutput:
    if not text:
        raise JudgeOutputError("the judge returned no text")
    body = text.strip()
    fence = re.match(r"^```(?:json)?\s*(.*?)\s*```$", body, re.DOTALL)
    if fence:
        body = fence.group(1)
    start, end = body.find("{"), body.rfind("}")
    if start < 0 or end < start:
        raise JudgeOutputError(f"no JSON object in the judge's reply: {body[:80]!r}")
    try:
        output = JudgeOutput.model_validate(loads(body[start:end + 1]))
    except (ValueError, ValidationError) as exc:  # JSON errors and limits (too deep) included
        raise JudgeOutputError(f"the judge's reply is not a valid verdict: {exc}") from None
    missing = output.missing(dimensions)
    if missing:
        raise JudgeOutputError(f"the judge's reply is not a valid verdict: no {missing[0]}")
    return output


def majority(outputs: Sequence[JudgeOutput], dimensions: Sequence[str] = DIMENSIONS
             ) -> JudgeOutput:
    """Majority vote per dimension over samples (odd counts, so no ties on two labels; three
    answer kinds can tie: the earliest sample's kind among the tied ones wins)."""
    behaviour = [dim for dim in dimensions if dim in BEHAVIOUR_DIMENSIONS]
    if behaviour:
        chosen = vote(outputs, behaviour[0])
        return JudgeOutput.model_validate({behaviour[0]: getattr(chosen, behaviour[0]),
                                           "reason": chosen.reason})
    tool = Counter(o.tool_choice for o in outputs).most_common(1)[0][0]
    args_votes = Counter(o.arguments for o in outputs).most_common()
    # Three labels can tie; a tie never passes.
    top = [label for label, count in args_votes if count == args_votes[0][1]]
    args = top[0] if len(top) == 1 else ("fail" if "fail" in top else "n/a")
    reason = next((o.reason for o in outputs if o.tool_choice == tool and o.arguments == args),
                  outputs[0].reason)
    return JudgeOutput(tool_choice=tool, arguments=args, reason=reason)


def cache_key(judge_fingerprint: str, case: Mapping[str, Any], response: Mapping[str, Any]
              ) -> str:
    payload = json.dumps({"judge": judge_fingerprint, "case": case, "response": response},
                         sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(payload.encode()).hexdigest()


# messages -> the judge model's text; `JudgeModel.complete` in production, a stub in unit tests.
Complete = Callable[[list[dict[str, Any]]], Awaitable[str | None]]


async def judge_once(judge: Judge, complete: Complete, *, tools: Sequence[Mapping[str, Any]],
                     conversation: Sequence[Mapping[str, Any]], rubric: str,
                     response: Mapping[str, Any]) -> JudgeOutput:
    """Ask the judge model `samples` times and take the majority. A reply that is not a
    verdict is asked again up to the spec's `retries` times; after that JudgeOutputError (the
    outcome `judge_error`: never a verdict, never agreement)."""
    prompt = render_prompt(judge.template, tools, conversation, rubric, response)
    messages = [{"role": "user", "content": prompt}]
    outputs = []
    for _ in range(judge.spec.parameters.samples):
        for attempt in range(judge.spec.retries + 1):
            try:
                outputs.append(parse_output(await complete(messages), judge.spec.dimensions))
                break
            except JudgeOutputError as exc:
                if attempt == judge.spec.retries:
                    raise JudgeOutputError(f"{exc} (asked {attempt + 1} times)") from None
    return majority(outputs, judge.spec.dimensions)


JUDGE_ERROR = "judge_error"  # the outcome of a reply that is not a verdict


class JudgeCallError(CallgateError):
    """The judge model could not be reached (after retries); nothing was decided."""


class JudgeEndpointError(JudgeOutputError):
    """A run's judge call that failed after the client's retries (an HTTP error, an HTML page,
    a 200 holding an error object, no connection): no verdict came, so the attempt's outcome is
    `judge_error`, excluded and counted as a provider error is, never left waiting in silence.
    Not cached: scoring again asks the judge again."""


class JudgeModel:
    """The judge's model, called through the same clients, retry rules and pacing as live
    runs: every request passes the pacer of the judge's endpoint (models.pacing), adaptive
    unless `concurrency` fixes the requests in flight."""

    def __init__(self, judge: Judge, environ: Mapping[str, str], *,
                 concurrency: int | None = None, timeout: float = 120.0,
                 client: Any = None) -> None:
        self.candidate = judge.candidate
        self.route = route_for(self.candidate)
        self._environ = environ
        self._concurrency = concurrency
        self.client = client  # made on the first call: cached verdicts need no key
        self.timeout = timeout
        self.policy = RetryPolicy(max_retries=4, base_delay=0.5, max_delay=10.0)
        self.calls = 0
        # A live run puts its own in: a judge at the candidate's endpoint then shares the
        # candidate's pacer (one endpoint, one limit).
        self.pacers = Pacers(concurrency)
        self.used = False  # whether any request was sent (a fully cached judge sends none)

    @property
    def pacer(self) -> Pacer:
        return self.pacers.for_route(self.route)

    async def complete(self, messages: list[dict[str, Any]]) -> str | None:
        if self.client is None:
            self.client = make_client(self.route, "auto", api_key(self.route, self._environ),
                                      self._concurrency or CEILING)
        paced = PacedClient(self.client, self.pacer)
        self.used = True
        body = self.route.body(messages, [])
        rng = random.Random()
        for attempt in range(1, self.policy.max_retries + 2):
            self.calls += 1
            sent = await paced.send(body, self.timeout)
            if isinstance(sent, Reply):
                choices = sent.body.get("choices") or [{}]
                return (choices[0].get("message") or {}).get("content")
            if not sent.retryable or attempt > self.policy.max_retries:
                raise JudgeCallError(f"judge model {self.route.model}: {sent.kind}: "
                                     f"{sent.message}")
            delay = self.policy.delay(attempt, sent.retry_after, rng)
            self.pacer.backing_off(delay)
            await asyncio.sleep(delay)
        raise AssertionError("unreachable")

    def pacing(self) -> PacingFigures | None:
        """What limited the judge's calls (`Pacer.figures`); None when none was sent."""
        return self.pacer.figures() if self.used else None

    async def aclose(self) -> None:
        if self.client is not None:
            await self.client.aclose()


def apply_judgement(verdict: Verdict, output: JudgeOutput) -> Verdict:
    """The final verdict of a judged attempt. The judge never overrides a deterministic
    failure: an invalid payload stays invalid whatever the judge says of it."""
    tool_ok = output.tool_choice == "pass"
    reason = f"judge: {output.reason}".strip()
    if tool_ok:
        tool, tool_reason = "right", ""
    else:
        tool, tool_reason = ("wrong_tool" if verdict.calls else "missing_call"), reason
    arguments: ArgsVerdict
    if verdict.arguments in ("invalid_json", "schema_violation"):
        arguments, args_reason = verdict.arguments, verdict.arguments_reason
    elif not tool_ok or output.arguments == "n/a":
        arguments, args_reason = "not_applicable", ""
    elif output.arguments == "pass":
        arguments, args_reason = "right", ""
    else:
        arguments, args_reason = "wrong_value", reason
    return verdict.model_copy(update={
        "status": "scored", "tool": tool, "tool_reason": tool_reason, "arguments": arguments,
        "arguments_reason": args_reason, "right_tool": tool_ok,
        "right_arguments": tool_ok and arguments in ("right", "not_applicable"),
    })
