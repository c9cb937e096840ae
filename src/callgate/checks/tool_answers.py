"""What the calls of a conversation get back: the suite's environment or the case's scripted
results. The live loop answers calls with it, and the judge's view of a recorded multi-turn
attempt is rebuilt with it, so both see the same results."""

from __future__ import annotations

from typing import Any

from callgate.checks.parsing import ParsedCall
from callgate.checks.replay import answer_call, scripted_results
from callgate.checks.schema import schema_problem
from callgate.suites.environment import Environment, fresh, scripted_answer
from callgate.suites.suite import Case, Suite


class ToolAnswers:
    """What the calls of one conversation get back: the suite's environment (one fresh copy per
    conversation, made at the first call) or the case's scripted results. A call that fails its
    tool's schema gets the schema error back, as from a real API, and is never run."""

    def __init__(self, suite: Suite, case: Case) -> None:
        self._suite = suite
        self._case = case
        self._schemas = suite.parameter_schemas
        self._offered = case.offered_names(self._schemas)
        self._scripted = scripted_results(case, suite.match, self._schemas)
        self._env: Environment | None = None

    def __call__(self, call: ParsedCall) -> Any:
        """The call's result; raises EnvironmentError_ when the environment fails."""
        factory = self._suite.environment
        validators = self._suite.validators
        if factory is None:
            problem = schema_problem(call, self._schemas, validators)
            if problem is not None:
                return {"error": problem}
            assert call.arguments is not None
            return scripted_answer(self._scripted, call.name, call.arguments)
        if self._env is None:
            self._env = fresh(factory, self._case.state or {})
        return answer_call(self._env, call, self._offered, self._schemas, validators)
