"""`callgate score --traces`: the attempts of an OTLP JSON trace export scored as recorded
answers are (`score_responses`), each read from its recorded-response line, so a trace and the
same conversation written in callgate's own format get the same verdicts and figures."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from callgate.errors import InputError, from_validation_error
from callgate.importers.traces import CASE_ATTRIBUTE, trace_lines
from callgate.scoring.exclusion import DEFAULT_MAX_EXCLUDED
from callgate.scoring.pipeline import RunResult, score_responses
from callgate.store.db import Store
from callgate.suites.responses import Response, parse_response, user_turns_problem
from callgate.suites.shard import Shard
from callgate.suites.suite import Suite


def trace_responses(suite: Suite, path: Path | str, *, attribute: str = CASE_ATTRIBUTE,
                    ) -> list[tuple[Response, str]]:
    """Every trace of the export as a (response, recorded line) pair, all read and checked
    before any is returned: an InputError names the file, the span or trace, and what."""
    loops = frozenset(case_id for case_id, case in suite.cases.items() if suite.loops(case))
    out = []
    for line in trace_lines(path, suite.cases, attribute=attribute, loops=loops):
        where = f"trace {line['trace_id']}"
        try:
            response = parse_response(line)
        except ValidationError as exc:
            raise from_validation_error(path, None, exc, prefix=f"{where}: ") from None
        except (ValueError, TypeError) as exc:
            raise InputError(path, f"{where}: {exc}") from None
        case = suite.cases[response.case_id]
        problem = user_turns_problem(case, response) if case.user_turns else None
        if problem:
            raise InputError(path, f"{where}: {problem}")
        out.append((response, json.dumps(line, ensure_ascii=False)))
    return out


def score_traces(
    suite: Suite, path: Path | str, store: Store, *, model: str, release: str,
    attribute: str = CASE_ATTRIBUTE, keep_verdicts: bool = True, shard: Shard | None = None,
    agent: str | None = None, max_excluded: float = DEFAULT_MAX_EXCLUDED, **options: Any,
) -> RunResult:
    """Score an OTLP JSON trace export against a suite, one trace an attempt, and store it
    as `score_file` stores a recorded-responses file (the run's source is `traces`)."""
    pairs = trace_responses(suite, path, attribute=attribute)
    return score_responses(suite, pairs, store, model=model, release=release, source="traces",
                           keep_verdicts=keep_verdicts, shard=shard, agent=agent,
                           max_excluded=max_excluded, **options)
