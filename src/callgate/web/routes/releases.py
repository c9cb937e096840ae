"""The index, a model's releases on a suite, one release with its attempts, one attempt, and
the gate's decision: pages and their JSON under /api/."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from callgate.errors import CallgateError
from callgate.gating.decision import decision_json
from callgate.gating.finding import find_current
from callgate.store.rows import StoredRun
from callgate.web.chart import release_chart
from callgate.web.context import Context, whole

PAGE_SIZE = 100
FLIPPED_PAGE = 100
VERDICT_FILTERS = ("fail", "right", "wrong_tool", "unexpected_call", "missing_call",
                   "extra_call", "invalid_json", "schema_violation", "wrong_value", "truncated",
                   "provider_error", "environment_error", "pending_judge", "judge_error",
                   "target_error")


def flipped_page(cases: Sequence[Any], offset: str | None) -> dict[str, Any]:
    """A page of FLIPPED_PAGE of a release's flipped cases, from `offset` (a query value)."""
    start = int(offset) if offset and offset.isdigit() else 0
    start = min(start, max(0, len(cases) - 1)) // FLIPPED_PAGE * FLIPPED_PAGE
    return {"rows": cases[start:start + FLIPPED_PAGE], "offset": start, "total": len(cases),
            "size": FLIPPED_PAGE}


def attempt_filters(request: Request) -> dict[str, Any]:
    """The attempts' filters and page; BadQuery for an offset or limit that is not a whole
    number SQLite can hold."""
    q = request.query_params
    offset, limit = (whole(q, "offset", 0), whole(q, "limit", PAGE_SIZE))
    return {"verdict": q.get("verdict") or None, "tag": q.get("tag") or None,
            "tool": q.get("tool") or None, "case": q.get("case") or None,
            "offset": offset, "limit": min(1000, max(1, limit))}


async def index(ctx: Context, request: Request) -> Response:
    certs = []
    for row in ctx.store.certificate_rows():
        body = json.loads(row["body"])
        certs.append({"fingerprint": row["fingerprint"], "judge": row["judge"],
                      "created_at": row["created_at"], "certified": bool(row["certified"]),
                      "set": Path(body.get("set_path", "")).name})
    sets = ctx.store.calibration_sets()  # the sets with items that count
    # a set given with --set is listed before any of its items counts (a new file, or one
    # whose every item people disagree on)
    sets += [{"set_name": name, "items": 0} for name in sorted(
        set(ctx.set_paths) - {s["set_name"] for s in sets})]
    return ctx.page("index.html", request, models=ctx.views.models(),
                    sets=sorted(sets, key=lambda s: s["set_name"]),
                    labelable=sorted(ctx.set_paths),
                    certificates=certs)


async def releases_page(ctx: Context, request: Request) -> Response:
    model, suite = request.query_params.get("model"), request.query_params.get("suite")
    if not model or not suite:
        return ctx.not_found(request, "choose a model and a suite: /releases?model=M&suite=S")
    history = ctx.views.history(model, suite)
    if not history:
        return ctx.not_found(request, f"no finished release of {model} on {suite}")
    return ctx.page("releases.html", request, model=model, suite=suite, history=history,
                    chart=release_chart(history, f"{model} on {suite}"))


async def releases_api(ctx: Context, request: Request) -> Response:
    model, suite = request.query_params.get("model"), request.query_params.get("suite")
    if not model:
        return JSONResponse({"models": ctx.views.models()})
    suites = ([suite] if suite else
              [m["suite_name"] for m in ctx.views.models() if m["agent"] == model])
    return JSONResponse({"model": model, "suites": {
        name: ctx.views.history(model, name) for name in suites}})


async def release_page(ctx: Context, request: Request) -> Response:
    run_id = request.path_params["run_id"]
    release = ctx.views.release(run_id)
    if release is None:
        return ctx.not_found(request, f"no finished run {run_id}")
    filters = attempt_filters(request)
    attempts = ctx.views.attempts(run_id, **filters)
    flipped = {side: flipped_page(release[side], request.query_params.get(side))
               for side in ("worse", "better")}
    return ctx.page("release.html", request, r=release, attempts=attempts, filters=filters,
                    verdicts=VERDICT_FILTERS, flipped=flipped)


async def release_api(ctx: Context, request: Request) -> Response:
    release = ctx.views.release(request.path_params["run_id"])
    if release is None:
        return ctx.not_found(request, "no such finished run")
    return JSONResponse(release)


async def attempts_api(ctx: Context, request: Request) -> Response:
    run_id = request.path_params["run_id"]
    if ctx.store.stored_run(run_id) is None:
        return ctx.not_found(request, "no such run")
    return JSONResponse(ctx.views.attempts(run_id, **attempt_filters(request)))


async def attempt_page(ctx: Context, request: Request) -> Response:
    p = request.path_params
    found = ctx.views.attempt(p["run_id"], p["case_id"], p["repeat"])
    if found is None:
        return ctx.not_found(request, "no such attempt")
    return ctx.page("attempt.html", request, a=found)


async def attempt_api(ctx: Context, request: Request) -> Response:
    p = request.path_params
    found = ctx.views.attempt(p["run_id"], p["case_id"], p["repeat"])
    if found is None:
        return ctx.not_found(request, "no such attempt")
    return JSONResponse(found)


async def gate_api(ctx: Context, request: Request) -> Response:
    q = request.query_params
    if not q.get("model") or not q.get("release"):
        return JSONResponse({"error": "model and release are required"}, status_code=400)
    try:
        # gating still hands back the stored columns: typed here until it returns a StoredRun
        run = StoredRun(find_current(ctx.store, q["model"], q["release"], q.get("suite")))
    except CallgateError as exc:
        return JSONResponse({"error": str(exc)}, status_code=404)
    _, decision = ctx.views.decision(run)
    return JSONResponse(decision_json(decision))
