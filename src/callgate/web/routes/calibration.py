"""A calibration set's progress (who labelled what, agreement, conflicts, what the session plan
and `judge plan` still ask for), the review of where the judge and the person differ, and a
certificate: pages, and JSON under /api/ for progress and certificates."""

from __future__ import annotations

from pathlib import Path

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from callgate.judging.audit_text import certificate_plan_lines
from callgate.judging.certificates import Certificate
from callgate.judging.labelling import still_to_label
from callgate.web import calibration_views as cv
from callgate.web.context import Context, is_api
from callgate.web.routes.labelling import set_items, set_of


async def progress_page(ctx: Context, request: Request) -> Response:
    name, path = set_of(ctx, request)
    items = set_items(ctx, name, path)
    if items is None:
        return ctx.not_found(request, f"no calibration set {name}")
    rows = ctx.store.person_labels(name)
    report = cv.progress(items, rows, ctx.store.adjudications(name))
    report["still_to_label"] = still_to_label([i.id for i in items], cv.labelled_by(rows),
                                              ctx.plan)
    report["plan"] = ctx.plan.model_dump(mode="json") if ctx.plan else None
    # progress against `judge plan`: the labels the newest calibration on this set said
    # it still needs, beside the labels given since
    certificates = cv.certificates_for_set(ctx.store, name)
    report["labels_needed"] = None
    if certificates:
        newest = certificates[0]
        report["labels_needed"] = {
            "judge": newest.judge, "calibrated_at": newest.created_at,
            "plan": certificate_plan_lines(newest.dimensions, newest.thresholds),
            # labels carry whole seconds: one given in the calibration's second counts
            "labels_since": sum(r["created_at"] >= newest.created_at[:19] for r in rows)}
    if is_api(request):
        return JSONResponse({"set": name, **report})
    return ctx.page("progress.html", request, set_name=name, p=report,
                    writable=path is not None)


async def review_page(ctx: Context, request: Request) -> Response:
    name, path = set_of(ctx, request)
    items = set_items(ctx, name, path)
    if items is None:
        return ctx.not_found(request, f"no calibration set {name}")
    certificates = cv.certificates_for_set(ctx.store, name)
    rows = cv.disagreements(ctx.store, items, certificates[0]) if certificates else []
    return ctx.page("review.html", request, set_name=name, rows=rows, writable=path is not None,
                    certificate=certificates[0] if certificates else None,
                    labeller=request.query_params.get("labeller", ""))


async def certificate_page(ctx: Context, request: Request) -> Response:
    fingerprint = request.path_params["fingerprint"]
    rows = [r for r in ctx.store.certificate_rows() if r["fingerprint"] == fingerprint]
    if not rows:
        return ctx.not_found(request, f"no certificate for {fingerprint}")
    certificate = Certificate.model_validate_json(rows[0]["body"])
    set_path = ctx.set_paths.get(Path(certificate.set_path).name)
    if set_path is None and Path(certificate.set_path).is_file():
        set_path = Path(certificate.set_path)
    status, why = cv.certificate_status(certificate, bool(rows[0]["certified"]), set_path)
    plan = certificate_plan_lines(certificate.dimensions, certificate.thresholds)
    if is_api(request):
        return JSONResponse({"status": status, "why": why, "plan": plan,
                             "certificate": certificate.model_dump(mode="json")})
    return ctx.page("certificate.html", request, c=certificate, cert_status=status, why=why,
                    plan=plan, history=rows)
