"""Stage 2, the deterministic checks: tool selection, JSON, Draft 7 schema, key argument values.

Pure functions: a case, the suite's compiled validators and one response in, a Verdict out.
Everything an equality check or a validator can decide is decided here; only cases whose
expectation is `judge` are left pending for the judge. A multi-turn response is judged on the
calls of all its turns; in a suite with an environment, those calls are run again on a fresh
copy of it (for final_state, and so that an environment that fails is never the model's fault).

`check_response` decides what every kind shares (provider error, truncation, environment
failure, turn limit), then hands the attempt to its expectation kind's handler
(`callgate.checks.kinds.CHECKS`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jsonschema import Draft7Validator

from callgate.checks.attempt import Attempt
from callgate.checks.claims import final_answer, unsupported_claims
from callgate.checks.kinds import CHECKS, bfcl_multi_turn
from callgate.checks.kinds.calls import right_single_call
from callgate.checks.parsing import ParsedCall, parse_calls
from callgate.checks.policies import violations
from callgate.checks.replay import Replay, agent_run
from callgate.checks.schema import argument_problems
from callgate.checks.verdict import ServerErrors, ToolVerdict, Verdict
from callgate.suites.cases import BfclMultiTurn
from callgate.suites.environment import EnvironmentError_, EnvironmentFactory
from callgate.suites.policies import Policies
from callgate.suites.responses import ProviderError, Response, read_turns
from callgate.suites.suite import DEFAULT_MATCH, Case, FinalState, MatchRules, NoCall, Suite


def check_response(
    case: Case,
    response: Response,
    schemas: Mapping[str, Mapping[str, Any]],
    validators: Mapping[str, Draft7Validator],
    *,
    rules: MatchRules = DEFAULT_MATCH,
    environment: EnvironmentFactory | None = None,
    server_errors: ServerErrors = "exclude",
    policies: Policies | None = None,
) -> Verdict:
    """Decide one attempt. `schemas`/`validators` map tool name to parameters and validator;
    `rules` are the suite's match rules; `environment` is the suite's, if it names one;
    `server_errors` says whether a server error (a 5xx after retries) is excluded, as every
    provider error is, or counted as a wrong answer (`counted_server_error`); `policies` are
    the suite's (`Suite.policies`), with the case's own, checked on every scored attempt.

    The calls of a multi-turn attempt are every call of every turn, in order."""
    base: dict[str, Any] = {"case_id": response.case_id, "repeat": response.repeat}
    if response.error is not None:
        error_kind = response.error.kind
        # The agent under test failed, or the simulated user did: not the model.
        if error_kind == "target_error" or error_kind == "user_error":
            who = "target error" if error_kind == "target_error" else "simulated user"
            return Verdict(**base, status=error_kind,
                           tool_reason=f"{who}: {response.error.message}")
        if server_errors == "count" and response.error.kind == "server_error":
            return counted_server_error(base, case, response.error)
        return Verdict(
            **base,
            status="provider_error",
            tool_reason=f"provider error ({response.error.kind}): {response.error.message}".rstrip(
                ": "
            ),
        )
    hit_limit = response.finish_reason == "turn_limit"
    call_turns: list[int] = []  # the user turn of each call
    if response.turns is None:
        message = response.message
        calls = (parse_calls(message.tool_calls, case.called_as())
                 if message is not None else [])
        steps = [0] * len(calls)
    else:
        # The loop stops after max_turns turns of a user turn: a model still calling tools then
        # hit the limit, and turns recorded beyond it were never sent.
        read = read_turns(case, response)
        hit_limit = (hit_limit or read.hit_limit) and not bfcl_multi_turn.checks_the_cut(case,
                                                                                       read)
        steps = [step for step, turn in enumerate(read.turns) for _ in turn.tool_calls]
        call_turns = read.call_turns()
        calls = parse_calls([call for turn in read.turns for call in turn.tool_calls],
                            case.called_as())
    if response.finish_reason == "length":
        return Verdict(
            **base,
            status="truncated",
            calls=len(calls),
            tool_reason="the response was cut off (finish_reason length); "
            "not counted as an argument error",
        )
    expect = case.expect
    if isinstance(expect, BfclMultiTurn):
        failed = bfcl_multi_turn.runner_failed(base, response)
        if failed is not None:
            return failed
    problems = argument_problems(calls, schemas, validators)

    replayed: Replay | None = None
    started: bfcl_multi_turn.Started | None = None
    failure: str | None = None  # why the environment failed, if it did
    if environment is not None:
        replayed, started, failure = _run_again(environment, case, calls, schemas, validators,
                                                call_turns)
    if failure is None and response.finish_reason == "environment_error":  # set by the live loop
        failure = "the environment failed during the run"
    if failure is not None and problems is None:
        # Only schema-valid calls are ever run, so the failure is not the model's. A JSON or
        # schema problem, though, is the model's whatever the environment did: it is scored.
        return Verdict(
            **base,
            status="environment_error",
            calls=len(calls),
            tool_reason=f"environment error, not the model's: {failure}",
        )

    first = calls[0].name if calls else ""
    # what the claims check reads: the answer (its final text) and what each call got back
    trace = (response, replayed.results if replayed is not None else None)
    if hit_limit:
        args_verdict, kind, reason = problems or ("not_applicable", None, "")
        return _policed(policies, case, calls, call_turns, trace, Verdict(
            **base,
            status="scored",
            calls=len(calls),
            tool="turn_limit",
            first_tool=first,
            tool_reason=f"still calling tools at turn {case.max_turns} of max_turns "
            f"{case.max_turns}" + (f" (user turn {call_turns[-1] + 1})" if case.user_turns
                                   and call_turns else ""),
            arguments=args_verdict,
            schema_kind=kind,
            arguments_reason=reason,
        ))

    # Every kind builds its verdict from the attempt's base, so the first call is named once.
    base = {**base, "first_tool": first}
    fast = None if environment is not None else right_single_call(
        base, case, calls, problems, rules, schemas)
    if fast is not None:
        return _policed(policies, case, calls, call_turns, trace, fast)
    attempt = Attempt(base, case, calls, steps, problems, rules, schemas, validators,
                      environment, replayed, failure, call_turns, started)
    verdict = CHECKS[expect.type](attempt, expect)
    if case.never_right is not None and verdict.right_arguments:
        verdict = verdict.model_copy(update={
            "right_arguments": False, "arguments": "wrong_value",
            "arguments_reason": f"no answer can be right here: {case.never_right}"})
    return _policed(policies, case, calls, call_turns, trace, verdict)


def _policed(policies: Policies | None, case: Case, calls: list[ParsedCall],
             call_turns: list[int], trace: tuple[Response, tuple[Any, ...] | None],
             verdict: Verdict) -> Verdict:
    """The verdict with the policies it broke (a scored or judge-pending attempt only);
    `trace` is the answer and the calls' results, for the claims check."""
    applied = policies.merged(case.policies) if policies is not None else case.policies
    if applied is None or verdict.status not in ("scored", "pending_judge"):
        return verdict
    found = violations(applied, calls, call_turns)
    if applied.claims:
        found += unsupported_claims(applied.claims, final_answer(trace[0].assistant_turns),
                                    calls, trace[1])
    return verdict.model_copy(update={"violations": found}) if found else verdict


def _run_again(environment: EnvironmentFactory, case: Case, calls: list[ParsedCall],
               schemas: Mapping[str, Mapping[str, Any]],
               validators: Mapping[str, Draft7Validator], call_turns: list[int]
               ) -> tuple[Replay | None, bfcl_multi_turn.Started | None, str | None]:
    """The calls run again: the environment failing on them is the environment's fault
    (the replay, what the check plays on, or why the environment failed). BFCL's classes
    answer every call, an error too: only starting them can fail, so the two sets of instances
    its check plays on are started instead."""
    try:
        if isinstance(case.expect, BfclMultiTurn) and bfcl_multi_turn.plays_on(environment):
            return None, bfcl_multi_turn.start(environment, case), None
        return agent_run(environment, case, calls, schemas, validators,
                         track=isinstance(case.expect, FinalState),
                         call_turns=call_turns), None, None
    except EnvironmentError_ as exc:
        return None, None, str(exc)


def counted_server_error(base: dict[str, Any], case: Case, error: ProviderError) -> Verdict:
    """A server error counted as the release's wrong answer (--server-errors count): scored as
    an answer with no call, and never right: `missing_call`, or `wrong_tool` on a case that
    expects a text answer (the answer never came)."""
    status = f" {error.status}" if error.status is not None else ""
    label = f"server error{status} counted (--server-errors count)"
    if isinstance(case.expect, NoCall):
        reason = f"{label}: no answer came, where a text answer is expected"
        tool: ToolVerdict = "wrong_tool"
    else:
        reason, tool = f"{label}: no answer came, so no tool call", "missing_call"
    if error.message:
        reason += f"; {error.message}"
    return Verdict(**base, status="scored", tool=tool, tool_reason=reason,
                   arguments="not_applicable", first_tool="")


def check(suite: Suite, response: Response) -> Verdict:
    """Decide one recorded attempt against its case in `suite`, as `callgate score` does.

    Args:
        suite: the suite (`load_suite`); its tools' schemas, match rules and environment apply.
        response: one response (`read_responses`), whose `case_id` names a case of the suite.

    Returns the attempt's Verdict; a case with a `judge` expectation is left `pending_judge`.
    Raises KeyError when the suite has no case `response.case_id`."""
    return check_response(suite.cases[response.case_id], response, suite.parameter_schemas,
                          suite.validators,
                          rules=suite.match, environment=suite.environment,
                          policies=suite.policies)
