"""Releases side by side: two releases' flipped cases with both answers (?run=A&run=B, B
against A), or every model's newest release on a suite (?suite=S); a page, or JSON under
/api/compare."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from callgate.gating.decision import decision_json
from callgate.web.chart import models_chart
from callgate.web.context import BadQuery, Context, is_api, whole
from callgate.web.routes.releases import flipped_page


async def compare_page(ctx: Context, request: Request) -> Response:
    given, suite = request.query_params.getlist("run"), request.query_params.get("suite")
    if suite and not given:
        return suite_models(ctx, request, suite)
    if len(given) != 2:
        raise BadQuery("compare two releases (?run=A&run=B) or a suite's models (?suite=S)")
    return two_releases(ctx, request, [whole({"run": value}, "run", 0) for value in given])


def suite_models(ctx: Context, request: Request, suite: str) -> Response:
    rows = ctx.views.suite_models(suite)
    if not rows:
        return ctx.not_found(request, f"no finished release on suite {suite}")
    if is_api(request):
        return JSONResponse({"suite": suite, "models": rows})
    return ctx.page("compare.html", request, suite=suite, models=rows,
                    chart=models_chart(rows, f"models on {suite}"))


def two_releases(ctx: Context, request: Request, ids: list[int]) -> Response:
    pair = [ctx.views.release(run_id) for run_id in ids]
    if pair[0] is None or pair[1] is None:
        return ctx.not_found(request, f"no finished run {ids[pair.index(None)]}")
    before, after = (ctx.store.stored_run(run_id) for run_id in ids)
    assert before is not None and after is not None  # both are finished releases (above)
    decision = ctx.views.compared(before, after)
    if is_api(request):
        return JSONResponse({"before": pair[0], "after": pair[1],
                             "comparison": decision_json(decision)})
    flips = {"worse": decision.worse, "better": decision.better}
    flipped = {side: flipped_page(flips[side], request.query_params.get(side))
               for side in flips}
    shown = [c.case_id for side in flipped.values() for c in side["rows"]]
    return ctx.page("compare.html", request, a=pair[0], b=pair[1], d=decision,
                    flipped=flipped, answers=[ctx.views.answers(run_id, shown)
                                              for run_id in ids])
