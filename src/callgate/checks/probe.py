"""`suite check --probe`: cases that cannot tell a good agent from a bad one, found by running
made-up answers through the real checks, without a model:

- a do-nothing agent (no call; a text answer; one junk call to a tool not offered) must fail
  every case that expects a call (a multi-turn or final-state case: a whole conversation of
  text answers must not reach the goal);
- an oracle built from the case's expectation (its calls with the values its key arguments
  accept, any other required argument filled with a value the schema takes) must pass;
- perturbed oracles must fail: another tool, one key argument changed, a required argument
  dropped, one call of several dropped (a no-call case: any one call).

A case that fails one of these is listed with the reason. Cases decided by a judge, and cases
whose oracle the probe cannot build (a value it finds none for), are listed as not probed."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from callgate.checks.check import check_response
from callgate.checks.parsing import ParsedCall, parse_calls
from callgate.checks.probe_fast import QuickCase, has_schema_problem, read_back
from callgate.checks.probe_values import NOT_FOUND, Samples, accepted, other_value
from callgate.checks.verdict import Verdict
from callgate.suites.bfcl_environment import parse_source_call
from callgate.suites.cases import (
    Alternatives,
    AnyCall,
    BfclMultiTurn,
    Calls,
    Case,
    ExpectedCall,
    FinalState,
    JudgeRubric,
    NoCall,
    Trajectory,
)
from callgate.suites.environment import EnvironmentError_
from callgate.suites.responses import AssistantMessage, Response, ToolCall
from callgate.suites.suite import Suite

JUNK_TOOL = "probe_no_such_tool"
TEXT = "Sorry, I cannot help with that."


@dataclass(frozen=True)
class Finding:
    """A case that cannot gate (or was not probed), the probe that showed it, and why."""

    case_id: str
    probe: str  # do-nothing, oracle, perturbation, not probed
    reason: str


@dataclass(frozen=True)
class ProbeReport:
    suite: str
    cases: int
    weak: tuple[Finding, ...]
    not_probed: tuple[Finding, ...]
    answers: int = 0  # made-up answers checked

    @property
    def weak_cases(self) -> list[str]:
        return sorted({f.case_id for f in self.weak})

    def reasons(self) -> dict[str, str]:
        """Each weak case's reasons, joined: what the gate warns with."""
        out: dict[str, list[str]] = {}
        for finding in self.weak:
            out.setdefault(finding.case_id, []).append(f"{finding.probe}: {finding.reason}")
        return {case_id: "; ".join(parts) for case_id, parts in sorted(out.items())}


@dataclass(frozen=True)
class Planned:
    """One call of a made-up answer: the name sent, its arguments (a dict, or raw text), the
    user turn and step it is made in, and the expected call it stands for."""

    name: str
    args: Mapping[str, Any] | str
    turn: int = 0
    step: int = 0
    spec: ExpectedCall | None = field(default=None, compare=False)
    tool: str | None = None  # its catalogue name


class NotProbed(Exception):
    pass


# Builds the arguments of an expected call where the suite's values are not plain JSON (an
# imported BFCL suite: callgate.importers.bfcl.answers.answer_arguments, which the layers
# above pass in).
Arguments = Callable[[Suite, ExpectedCall], Mapping[str, Any]]


def probe_suite(suite: Suite, *, arguments: Arguments | None = None,
                progress: Callable[[int], None] | None = None) -> ProbeReport:
    """Probe every case of `suite` (docs/probe.md); `arguments` builds an expected call's
    oracle arguments (default: each key argument's first listed value, or a value its matcher
    takes)."""
    weak: list[Finding] = []
    skipped: list[Finding] = []
    answers = 0
    samples = Samples(suite.parameter_schemas, suite.validators)  # shared by its cases
    for index, case in enumerate(suite.cases.values()):
        probing = CaseProbe(suite, case, arguments, samples)
        try:
            weak += probing.findings()
        except NotProbed as exc:
            skipped.append(Finding(case.id, "not probed", str(exc)))
        except EnvironmentError_ as exc:
            skipped.append(Finding(case.id, "not probed", f"the environment failed: {exc}"))
        except Exception as exc:  # a case the probe cannot answer is shown, never a crash
            skipped.append(Finding(case.id, "not probed",
                                   f"the probe failed: {type(exc).__name__}: {exc}"))
        answers += probing.answered
        if progress is not None:
            progress(index + 1)
    return ProbeReport(suite=suite.name, cases=len(suite.cases), weak=tuple(weak),
                       not_probed=tuple(skipped), answers=answers)


def _with_args(call: Planned, args: Mapping[str, Any]) -> Planned:
    """dataclasses.replace(call, args=args), at a third of its cost."""
    return Planned(call.name, args, call.turn, call.step, call.spec, call.tool)


def _passes(verdict: Verdict) -> bool:
    return verdict.status == "scored" and verdict.right_tool and verdict.right_arguments


class CaseProbe:
    """The probes of one case."""

    def __init__(self, suite: Suite, case: Case, arguments: Arguments | None = None,
                 samples: Samples | None = None) -> None:
        self.suite, self.case, self.arguments = suite, case, arguments
        self.sent = case.sent_names()
        self.turns = 1 + len(case.user_turns or ())
        self.answered = 0
        self.samples = samples if samples is not None else Samples(suite.parameter_schemas,
                                                                   suite.validators)
        self.others: dict[tuple[int, str], tuple[Planned, Any]] = {}
        self.read: dict[int, list[Any]] = {}
        self.nothing: bool | None = None  # whether an answer of no call passes (quick path)
        self.quick = (QuickCase(case, suite.parameter_schemas, suite.validators, suite.match)
                      if suite.environment is None and not suite.loops(case) else None)
        self.called_as = case.called_as()

    # ------------------------------------------------------------ answering

    def answer(self, calls: Sequence[Planned], text: str | None = TEXT) -> Verdict:
        """The verdict on an answer making `calls` (by user turn and step), then `text`."""
        self.answered += 1
        if not self.suite.loops(self.case):
            tool_calls = tuple(self._call(c, i) for i, c in enumerate(calls))
            message = AssistantMessage(content=None if tool_calls else text,
                                       tool_calls=tool_calls)
            response = Response(case_id=self.case.id, message=message,
                                finish_reason="tool_calls" if tool_calls else "stop")
        else:
            response = self._conversation(calls, text)
        return check_response(self.case, response, self.suite.parameter_schemas,
                              self.suite.validators, rules=self.suite.match,
                              environment=self.suite.environment)

    def passes(self, calls: Sequence[Planned], text: str | None = TEXT) -> bool:
        """Whether `answer(calls, text)` passes: decided without a verdict where
        checks/probe_fast.py can (one message, no environment), else by `answer`. On one
        message the text is not read when calls are made, nor for passing when none is."""
        quick = self.quick
        if quick is None or quick.kind is None:
            return _passes(self.answer(calls, text))
        self.answered += 1
        if not calls:
            if self.nothing is None:
                self.nothing = quick.passes((), bool)
            return self.nothing
        read = [self._read(call) for call in calls]
        parsed = [ParsedCall(index, name, args, error)
                  for index, (_, name, args, error, _) in enumerate(read)]

        def problem(index: int) -> bool:
            entry = read[index]
            if entry[4] is None:
                entry[4] = has_schema_problem(parsed[index], self.suite.parameter_schemas,
                                              self.suite.validators)
            return bool(entry[4])

        return quick.passes(parsed, problem)

    def _conversation(self, calls: Sequence[Planned], text: str | None) -> Response:
        messages: list[AssistantMessage] = []
        ends: list[int] = []
        for turn in range(self.turns):
            steps = sorted({c.step for c in calls if c.turn == turn})
            for step in steps:
                batch = [c for c in calls if c.turn == turn and c.step == step]
                messages.append(AssistantMessage(tool_calls=tuple(
                    self._call(c, len(messages) * 100 + i) for i, c in enumerate(batch))))
            messages.append(AssistantMessage(content=text))
            ends.append(len(messages))
        return Response(case_id=self.case.id, turns=tuple(messages),
                        user_turn_ends=tuple(ends) if self.case.user_turns else None,
                        finish_reason="stop")

    def _read(self, call: Planned) -> list[Any]:
        """The call as `check_response` reads it (parse_calls): [call, name, arguments, JSON
        error, schema problem (None: not asked yet)], read once per planned call (an
        oracle's calls are in its perturbations too) and without JSON where that is exact
        (probe_fast.read_back). The call is kept in it, so its id is not reused."""
        entry = self.read.get(id(call))
        if entry is None:
            args = read_back(call.args)
            if args is None:
                parsed = parse_calls([self._call(call, 0)], self.called_as)[0]
                entry = [call, parsed.name, parsed.arguments, parsed.json_error, None]
            else:
                entry = [call, self.called_as.get(call.name, call.name), args, None, None]
            self.read[id(call)] = entry
        return entry

    @staticmethod
    def _call(call: Planned, index: int) -> ToolCall:
        args = call.args if isinstance(call.args, str) else json.dumps(call.args)
        return ToolCall(id=f"probe_{index}", name=call.name, arguments=args)

    # ------------------------------------------------------------ the probes

    def findings(self) -> list[Finding]:
        expect = self.case.expect
        if isinstance(expect, JudgeRubric):
            raise NotProbed("decided by a judge")
        if isinstance(expect, NoCall):
            return self._no_call_findings()
        plans = self.oracles()
        out = self._do_nothing()
        passing = None
        for label, plan in plans:
            if self.passes(plan):
                passing = passing or plan
            else:
                self.answered -= 1  # the same answer, asked again for its reason
                verdict = self.answer(plan)
                marked = (f" (marked never_right: {self.case.never_right})"
                          if self.case.never_right and "no answer can be right" not in
                          verdict.reason else "")
                out.append(Finding(self.case.id, "oracle",
                                   f"{label} fails: {verdict.reason or verdict.status}{marked}"))
        if passing is not None:
            out += self._perturbed(passing)
        return out

    def _do_nothing(self) -> list[Finding]:
        if isinstance(self.case.expect, FinalState) and not self.case.expect.calls:
            return []  # the goal is the state as it is: doing nothing is right
        out = []
        for label, calls, text in (("no call", [], None), ("a text answer", [], TEXT),
                                   ("one junk call", [Planned(JUNK_TOOL, "{}")], TEXT)):
            if self.passes(calls, text):
                out.append(Finding(self.case.id, "do-nothing", f"{label} passes"
                                   + self._why_nothing(label)))
        return out

    def _why_nothing(self, label: str) -> str:
        if isinstance(self.case.expect, AnyCall):
            return " (expectation any_call: any call is right, one to a tool not offered too)"
        if isinstance(self.case.expect, FinalState | BfclMultiTurn) and label != "one junk call":
            return ": the reference calls leave the state as it was"
        return ""

    def _no_call_findings(self) -> list[Finding]:
        out = []
        if not self.passes([], TEXT):
            out.append(Finding(self.case.id, "oracle", "a text answer fails: "
                               + self.answer([], TEXT).reason))
        offered = sorted(self.case.offered_names(self.suite.tools))
        calls = [Planned(JUNK_TOOL, "{}")]
        if offered:
            calls.insert(0, self._sampled(offered[0]))
        for call in calls:
            if self.passes([call], TEXT):
                out.append(Finding(self.case.id, "perturbation",
                                   f"a call to {call.name} passes where none is expected"))
        return out

    # ------------------------------------------------------------ oracles

    def _sampled(self, tool: str, given: Mapping[str, Any] | None = None, turn: int = 0,
                 step: int = 0, spec: ExpectedCall | None = None) -> Planned:
        args = self.samples.object_sample(tool, given)
        if args is NOT_FOUND or not all(self.samples.takes(tool, key, value)
                                        for key, value in args.items()
                                        if key not in (given or {})):
            raise NotProbed(f"found no value the schema of {tool} takes for a required "
                            "argument")
        return Planned(self.sent.get(tool, tool), args, turn, step, spec, tool)

    def _other(self, call: Planned, key: str, spec: Any) -> Any:
        """other_value for one key argument of an oracle's call (asked twice: worked out
        once)."""
        asked = (id(call), key)
        if asked not in self.others:
            assert call.tool is not None and not isinstance(call.args, str)
            properties = self.suite.validators[call.tool].schema.get("properties", {})
            self.others[asked] = (call, other_value(spec, call.args[key],
                                                    properties.get(key, {})))
        return self.others[asked][1]  # the call is kept with it, so its id is not reused

    def _expected(self, call: ExpectedCall, turn: int = 0, step: int = 0, attempt: int = 0
                  ) -> Planned:
        if self.arguments is not None:
            return self._sampled(call.tool, self.arguments(self.suite, call), turn, step, call)
        given = {}
        for key, spec in call.args.items():
            value = accepted(spec, self.samples.key_validator(call.tool, key), attempt)
            if value is NOT_FOUND:
                raise NotProbed(f"found no value {call.tool}.{key} accepts")
            given[key] = value
        return self._sampled(call.tool, given, turn, step, call)

    def _listed(self, calls: Iterable[ExpectedCall], steps: Iterable[int] | None = None,
                attempt: int = 0) -> list[Planned]:
        listed = list(calls)
        return [self._expected(c, 0, s, attempt)
                for c, s in zip(listed, steps or [0] * len(listed), strict=True)]

    def oracles(self) -> list[tuple[str, list[Planned]]]:
        """The answers built from the expectation, each with a label: one per listed
        alternative (the first value each key argument lists; the second when it fails)."""
        expect = self.case.expect
        if isinstance(expect, Calls):
            return [("its oracle", self._first_passing(lambda a: self._listed(expect.calls,
                                                                              attempt=a)))]
        if isinstance(expect, Alternatives):
            return [(f"the oracle of alternative {i + 1}",
                     self._first_passing(partial(self._alternative, calls)))
                    for i, calls in enumerate(expect.alternatives)]
        if isinstance(expect, Trajectory):
            return [("its oracle", self._first_passing(lambda a: self._listed(
                expect.calls, [c.step for c in expect.calls], attempt=a)))]
        if isinstance(expect, FinalState):
            return [("its oracle (the reference calls)", self._reference(expect))]
        if isinstance(expect, BfclMultiTurn):
            return [("its oracle (the ground truth)", self._ground_truth(expect))]
        if isinstance(expect, AnyCall):
            offered = sorted(self.case.offered_names(self.suite.tools))
            if not offered:
                raise NotProbed("no tool is offered")
            return [("its oracle (a call to the first tool offered)",
                     [self._sampled(offered[0])])]
        raise NotProbed(f"expectation {expect.type} is not probed")

    def _alternative(self, calls: list[ExpectedCall], attempt: int) -> list[Planned]:
        return self._listed(calls, attempt=attempt)

    def _first_passing(self, build: Callable[[int], list[Planned]]) -> list[Planned]:
        """The plan with each key argument's first listed value, or its second or third
        where that one fails (a listed value the schema refuses is the case's own doing)."""
        first = build(0)
        if self.passes(first):
            return first
        for attempt in (1, 2):
            other = build(attempt)
            if other != first and self.passes(other):
                return other
        return first

    def _reference(self, expect: FinalState) -> list[Planned]:
        turns = expect.per_turn if expect.per_turn is not None else [expect.calls]
        # a turn's reference calls in one message: replayed in order, within max_turns
        return [Planned(self.sent.get(call.tool, call.tool), dict(call.args), turn, 0,
                        None, call.tool)
                for turn, calls in enumerate(turns) for call in calls]

    def _ground_truth(self, expect: BfclMultiTurn) -> list[Planned]:
        out = []
        for turn, calls in enumerate(expect.ground_truth):
            for step, text in enumerate(calls):
                name, positional, keywords = parse_source_call(text)
                if positional:
                    keywords = {**self._named(name, positional, text), **keywords}
                out.append(Planned(name, keywords, turn, step))
        return out

    def _named(self, name: str, positional: Sequence[Any], text: str) -> dict[str, Any]:
        """A ground-truth call's positional arguments named as its doc lists its parameters."""
        tool = {sent: key for key, sent in self.sent.items()}.get(name, name)
        schema = self.suite.parameter_schemas.get(tool)
        names = list((schema or {}).get("properties") or {})
        if len(names) < len(positional):
            raise NotProbed(f"a ground-truth call whose positional arguments have no "
                            f"parameter name: {text}")
        return dict(zip(names, positional, strict=False))

    # ------------------------------------------------------------ perturbations

    def _perturbed(self, oracle: list[Planned]) -> list[Finding]:
        if isinstance(self.case.expect, FinalState | BfclMultiTurn | AnyCall):
            return []  # judged by the state or by any call: the do-nothing probes hold
        out = []
        for label, plan in self._perturbations(oracle):
            if self.passes(plan):
                out.append(Finding(self.case.id, "perturbation",
                                   f"{label} still passes{self._why(label, plan)}"))
        return out + self._permissive(oracle)

    def _permissive(self, oracle: list[Planned]) -> list[Finding]:
        """The key arguments that accept every other value tried (a matcher such as `.*`)."""
        out = []
        for call in oracle:
            if call.spec is None or call.tool is None or isinstance(call.args, str):
                continue
            for key, spec in call.spec.args.items():
                if key in call.args and self._other(call, key, spec) is NOT_FOUND:
                    out.append(Finding(self.case.id, "perturbation",
                                       f"{call.tool}.{key} accepts every other value tried: "
                                       "this key argument cannot fail"))
        return out

    def _why(self, label: str, plan: list[Planned]) -> str:
        """What in the expectation lets the perturbed answer pass, where it says."""
        expect = self.case.expect
        mode = getattr(expect, "mode", "strict")
        if label.startswith("dropping") and mode == "subset":
            return " (mode subset: calls left out are allowed)"
        if label.startswith("calling") and mode in ("superset", "subset"):
            return f" (mode {mode})"
        if isinstance(expect, Trajectory) and " changed from " in label:
            tool = label.split(".", 1)[0]
            rule = expect.per_tool.get(tool, expect.args)
            if rule == "ignore":
                return (f" (the trajectory's arguments rule for {tool} is ignore: its key "
                        "arguments are never compared)")
        return ""

    def _perturbations(self, oracle: list[Planned]) -> Iterable[tuple[str, list[Planned]]]:
        named = {call.tool for calls in self.case.expected_call_lists() for call in calls}
        named |= {c.tool for c in getattr(self.case.expect, "calls", ()) if hasattr(c, "tool")}
        others = sorted(self.case.offered_names(self.suite.tools) - named)
        first = oracle[0]
        if others:
            swapped = self._sampled(others[0], None, first.turn, first.step)  # spec None
            yield f"calling {others[0]} instead of {first.tool}", [swapped, *oracle[1:]]
        changed = self._key_changed(oracle)
        if changed is not None:
            yield changed
        yield from self._dropped(oracle)

    def _key_changed(self, oracle: list[Planned]) -> tuple[str, list[Planned]] | None:
        for index, call in enumerate(oracle):
            if call.spec is None or call.tool is None or isinstance(call.args, str):
                continue
            for key, spec in sorted(call.spec.args.items(), key=lambda kv: kv[1].optional):
                if key not in call.args:
                    continue
                value = self._other(call, key, spec)
                if value is NOT_FOUND:
                    continue
                plan = list(oracle)
                plan[index] = _with_args(call, {**call.args, key: value})
                shown = json.dumps(value, ensure_ascii=False)
                return (f"{call.tool}.{key} changed from "
                        f"{json.dumps(call.args[key], ensure_ascii=False)} to {shown}", plan)
        return None

    def _dropped(self, oracle: list[Planned]) -> Iterable[tuple[str, list[Planned]]]:
        for index, call in enumerate(oracle):
            if call.tool is None or isinstance(call.args, str):
                continue
            required = self.suite.parameter_schemas[call.tool].get("required") or []
            present = [key for key in required if key in call.args]
            if present:
                plan = list(oracle)
                plan[index] = _with_args(call, {k: v for k, v in call.args.items()
                                                  if k != present[0]})
                yield f"{call.tool} without its required {present[0]}", plan
                break
        if len(oracle) > 1:
            yield f"dropping the last of {len(oracle)} calls ({oracle[-1].tool})", oracle[:-1]
