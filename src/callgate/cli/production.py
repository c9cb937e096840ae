"""`callgate score FOLDER --traces FILE --production` and `callgate history --production`:
production traces checked without expected answers, and their figures per day or release
(docs/traces.md, "Production samples"). Called from cli/scoring.py and cli/gating.py."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rich.console import Console

from callgate.cli.common import _fail, judge_step_for, print_judge_pacing
from callgate.errors import CallgateError

BY = ("day", "release")


def refuse_with_production(**given: object) -> None:
    """The options of `score` that need a suite's cases (or are not read yet for production
    samples: --judge and --answer-kind-judge, which need a case's rubric or expected kind):
    refused with --production, never silently ignored."""
    named = [f"--{name.replace('_', '-')}" for name, value in given.items() if value is not None]
    if named:
        raise _fail(f"score --production: {', '.join(named)} not taken (production samples "
                    "have no cases; --traces FILE is what is read)")


def score_production(folder: Path, traces: Path | None, db: Path, *, agent: str | None,
                     release: str | None, model: str | None, as_json: bool,
                     claims_judge: Path | None = None,
                     judging: Mapping[str, Any] | None = None) -> None:
    """`judging`: --uncalibrated, the judge's endpoint (api_base, api_key_env) and
    --concurrency, for the claim_support judge `claims_judge` (None: not asked)."""
    from callgate.report.production_history import claims_of, production_table
    from callgate.scoring.production import score_production as score
    from callgate.store.db import Store

    if traces is None:
        raise _fail("score --production: give --traces FILE (an OTLP JSON trace export)")
    if not agent:
        raise _fail("score --production: name the agent the traces are of: --agent NAME")
    if not traces.is_file():
        raise _fail(f"{traces}: "
                    + ("is a folder, not a file" if traces.is_dir() else "file not found"))
    pacing = None
    try:
        with Store(db) as store:
            given = dict(judging or {})
            step = judge_step_for(claims_judge, store,
                                  uncalibrated=bool(given.get("uncalibrated")),
                                  api_base=given.get("api_base"),
                                  api_key_env=given.get("api_key_env"),
                                  concurrency=given.get("concurrency"))
            try:
                result = score(folder, traces, store, agent=agent, release=release,
                               model=model, claims=step)
            finally:
                pacing = step.model.pacing() if step and step.model else None
                print_judge_pacing(pacing)
    except CallgateError as exc:
        raise _fail(str(exc)) from None
    claims = claims_of(result.claims) if result.claims else None
    if as_json:
        document = {"agent": agent, "release": release, "batch": result.batch_id,
                    "stored": result.stored, **result.figures.model_dump(mode="json"),
                    "claims": claims.model_dump(mode="json") if claims else None,
                    "samples": [{"trace_id": s.trace_id, "started_at": s.started_at,
                                 "release": s.release,
                                 "provider_error": s.provider_error, "calls": s.calls,
                                 "schema_valid": s.schema_valid, "problems": list(s.problems),
                                 "violations": [v.model_dump() for v in s.violations],
                                 "claims": None if s.claims is None else
                                 {"status": s.claims.status, "reason": s.claims.reason}}
                                for s in result.samples]}
        json.dump(document, sys.stdout, indent=2, sort_keys=True)
        sys.stdout.write("\n")
        return
    from callgate.report.production_history import ProductionGroup

    console = Console()
    first, last = result.samples[0].started_at, result.samples[-1].started_at
    group = ProductionGroup(key=release or traces.name, first_trace=first, last_trace=last,
                            figures=result.figures, claims=claims)
    console.print(production_table(agent, "release" if release else "file", [group]))
    for sample in result.samples:
        said = ([f"claims: {sample.claims.status}"
                 + (f": {sample.claims.reason}" if sample.claims.reason else "")]
                if sample.claims and sample.claims.status in ("unsupported", "judge_error")
                else [])
        for why in [*sample.problems, *(f"{v.policy}: {v.reason}" for v in sample.violations),
                    *said]:
            console.print(f"trace {sample.trace_id}: {why}", highlight=False, markup=False,
                          soft_wrap=True)
    skipped = len(result.samples) - result.stored
    console.print(f"stored {result.stored} samples as batch {result.batch_id} in {db}"
                  + (f" ({skipped} traces already stored, kept as they were)" if skipped
                     else ""), highlight=False, soft_wrap=True)


def history_production(agent: str, by: str | None, db: Path, as_json: bool,
                       suite: str | None = None) -> None:
    from callgate.report.production_history import (
        production_document,
        production_groups,
        production_table,
    )
    from callgate.store.db import Store

    if suite is not None:
        raise _fail("history --production: production samples belong to no suite; drop "
                    f"--suite {suite}")
    by = by or "day"
    if by not in BY:
        raise _fail(f"--by {by!r}: with --production, expected day or release")
    if not db.exists():
        raise _fail(f"{db}: no such database")
    with Store(db) as store:
        groups = production_groups(store.production_counts(agent, by),
                                   store.production_violations(agent, by))
    if not groups:
        raise _fail(f"no production samples of agent {agent!r} "
                    "(score them with `callgate score FOLDER --traces FILE --production`)")
    if as_json:
        json.dump(production_document(agent, by, groups), sys.stdout, indent=2, sort_keys=True)
        sys.stdout.write("\n")
        return
    Console().print(production_table(agent, by, groups))
