"""callgate: evaluate how well an LLM calls tools, and gate releases on it.

The public API, one function per step of the pipeline (each documented with its arguments):

    suite = load_suite("suites/orders")                       # suites: tools and cases
    for response in read_responses("responses.jsonl"): ...   # suites: recorded responses
    verdict = check(suite, response)                          # checks: one attempt's Verdict
    with Store("callgate.db") as store:                       # store: the SQLite file
        result = score_file(suite, "responses.jsonl", store, model="m", release="r1")
        decision, scores = gate_release(store, "m", "r1")     # gating: pass, regression, ...
    certificate, disagreements, judged = await calibrate(...)  # judging: certify a judge

The names are imported on first use, so that `import callgate` (and `callgate --help`) stays
fast; the stage packages below them (suites, checks, judging, scoring, gating, running, store)
hold the rest.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from callgate.version import __version__

if TYPE_CHECKING:
    from callgate.checks.check import check, check_response
    from callgate.checks.verdict import Verdict
    from callgate.errors import CallgateError, InputError
    from callgate.gating.decision import GateDecision
    from callgate.gating.release import gate_release
    from callgate.gating.scores_file import ReleaseScores
    from callgate.judging.calibration import calibrate
    from callgate.judging.calibration_set import read_set
    from callgate.judging.certificates import Certificate
    from callgate.judging.judge import Judge, JudgeModel, load_judge
    from callgate.scoring.pipeline import RunResult, score_file
    from callgate.scoring.scores import Scores
    from callgate.store.db import Store
    from callgate.suites.environment import ToolError
    from callgate.suites.responses import Response, read_responses
    from callgate.suites.suite import Case, Suite, load_suite

_WHERE = {
    "load_suite": "callgate.suites.suite",
    "Suite": "callgate.suites.suite",
    "Case": "callgate.suites.suite",
    "read_responses": "callgate.suites.responses",
    "Response": "callgate.suites.responses",
    "check": "callgate.checks.check",
    "check_response": "callgate.checks.check",
    "Verdict": "callgate.checks.verdict",
    "score_file": "callgate.scoring.pipeline",
    "RunResult": "callgate.scoring.pipeline",
    "Scores": "callgate.scoring.scores",
    "gate_release": "callgate.gating.release",
    "GateDecision": "callgate.gating.decision",
    "ReleaseScores": "callgate.gating.scores_file",
    "load_judge": "callgate.judging.judge",
    "Judge": "callgate.judging.judge",
    "JudgeModel": "callgate.judging.judge",
    "calibrate": "callgate.judging.calibration",
    "read_set": "callgate.judging.calibration_set",
    "Certificate": "callgate.judging.certificates",
    "Store": "callgate.store.db",
    "ToolError": "callgate.suites.environment",
    "CallgateError": "callgate.errors",
    "InputError": "callgate.errors",
}

__all__ = [
    "CallgateError",
    "Case",
    "Certificate",
    "GateDecision",
    "InputError",
    "Judge",
    "JudgeModel",
    "ReleaseScores",
    "Response",
    "RunResult",
    "Scores",
    "Store",
    "Suite",
    "ToolError",
    "Verdict",
    "__version__",
    "calibrate",
    "check",
    "check_response",
    "gate_release",
    "load_judge",
    "load_suite",
    "read_responses",
    "read_set",
    "score_file",
]


def __getattr__(name: str) -> Any:
    """Import a public name from its stage package on first use (PEP 562)."""
    if name not in _WHERE:
        raise AttributeError(f"module 'callgate' has no attribute {name!r}")
    value = getattr(importlib.import_module(_WHERE[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
