"""What the calls of a conversation get back: the suite's environment or the case's scripted
results. The live loop answers calls with it, and the judge's view of a recorded multi-turn
attempt is rebuilt with it, so both see the same results."""

from __future__ import annotations

from typing import Any

from callgate.checks.parsing import ParsedCall
from callgate.checks.replay import answer_call, scripted_results
from callgate.checks.schema import schema_problem
from callgate.suites.environment import Environment, fresh, scripted_answer
from callgate.suites.interception import ToolResults
from callgate.suites.suite import Case, Suite


class ToolAnswers:
    """What the calls of one conversation get back: the suite's environment (one fresh copy per
    conversation, made at the first call) or the case's scripted results. A call that fails its
    tool's schema gets the schema error back, as from a real API, and is never run; so does a
    call to a tool that a later user turn adds (`offer_turn`). Every answer, whatever gave it,
    goes through `results`, the attempt's interception seam (suites.interception): without
    one, a seam that leaves the answers alone."""

    def __init__(self, suite: Suite, case: Case, results: ToolResults | None = None) -> None:
        self._suite = suite
        self._case = case
        self._schemas = suite.parameter_schemas
        self._offered = case.offered_names(self._schemas)
        self._not_yet: set[str] = set()  # tools a later user turn adds
        self._scripted = scripted_results(case, suite.match, self._schemas)
        self._env: Environment | None = None
        self.results = results if results is not None else ToolResults(case.id, 0)

    def offer_turn(self, user_turn: int) -> None:
        """From now on, the tools offered are those of this user turn (0: the case's
        `messages`); until called, those of every turn. One environment serves every turn."""
        self._offered = self._case.offered_names(self._schemas, user_turn)
        self._not_yet = self._case.offered_names(self._schemas) - self._offered

    def __call__(self, call: ParsedCall) -> Any:
        """The call's result as the agent reads it (through the seam); raises
        EnvironmentError_ when the environment fails."""
        return self.results(call.name, call.arguments, self._answer(call))

    def _answer(self, call: ParsedCall) -> Any:
        factory = self._suite.environment
        validators = self._suite.validators
        if factory is None:
            if call.name in self._not_yet:  # as answer_call answers a tool not offered
                return {"error": f"unknown tool {call.name}"}
            problem = schema_problem(call, self._schemas, validators)
            if problem is not None:
                return {"error": problem}
            assert call.arguments is not None
            return scripted_answer(self._scripted, call.name, call.arguments)
        if self._env is None:
            self._env = fresh(factory, self._case.state or {})
        return answer_call(self._env, call, self._offered, self._schemas, validators)
