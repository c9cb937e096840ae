"""A run's judged attempts labelled into a calibration set (/runs/ID/label), and a run's audit
sample (/runs/ID/audit, drawn by `callgate judge audit RUN --n N`) as a queue whose judge
verdicts are never shown."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from callgate.errors import CallgateError
from callgate.judging.audit_sample import record_audit_label
from callgate.judging.calibration_set import CalibrationItem
from callgate.judging.labelling import judged_attempt_items, label_judged_attempt, queue_for
from callgate.web import calibration_views as cv
from callgate.web.context import Context, read_form
from callgate.web.routes.labelling import person_and_labels, set_items

Judged = list[tuple[dict[str, Any], CalibrationItem]]


def judged_items(ctx: Context, run_id: int) -> Judged | str:
    """The run's judged attempts as calibration items, or why there are none to label."""
    try:
        return judged_attempt_items(ctx.store, run_id)
    except CallgateError as exc:
        return str(exc)


async def run_label_page(ctx: Context, request: Request) -> Response:
    run_id = request.path_params["run_id"]
    judged = judged_items(ctx, run_id)
    if isinstance(judged, str):
        return ctx.not_found(request, judged)
    q = request.query_params
    name = q.get("set") or (sorted(ctx.set_paths)[0] if ctx.set_paths else "")
    path = ctx.set_paths.get(name)
    in_file = {i.id for i in set_items(ctx, name, path) or []} if path else set()
    rows = ctx.store.person_labels(name) if path else []
    labeller = q.get("labeller", "").strip()
    order, todo = queue_for([item.id for _, item in judged], cv.labelled_by(rows), labeller)
    found = {item.id: (row, item) for row, item in judged}
    current = q.get("item") or order[0]
    if current not in found:
        return ctx.not_found(request, f"no judged attempt {current} in run {run_id}")
    place = cv.queue_place(order, todo, current, rows, labeller)
    mine = place["mine"]
    return ctx.page(
        "label.html", request, set_name=name, writable=path is not None,
        item=cv.item_view(found[current][1], reveal=mine is not None), **place,
        progress={"labelled": sum(item.id in in_file for _, item in judged),
                  "total": len(judged)},
        run=ctx.store.stored_run(run_id), judgement=found[current][0] if mine else None,
        sets=sorted(ctx.set_paths), audit_size=len(ctx.store.audit_items(run_id)),
        form_action=f"/runs/{run_id}/label", back=f"/runs/{run_id}/label")


async def run_label_post(ctx: Context, request: Request) -> Response:
    form = await read_form(request)
    if not ctx.authorised(request, form):
        return ctx.refused(request)
    run_id = request.path_params["run_id"]
    name = form.get("set", "")
    path = ctx.set_paths.get(name)
    back = f"/runs/{run_id}/label?" + urlencode(
        {"set": name, "labeller": form.get("labeller", ""), "item": form.get("item_id", "")})
    if path is None:
        return ctx.bad_form(request, f"set {name!r} was not given to callgate serve with "
                            "--set", back)
    labeller, labels, error = person_and_labels(form)
    split = form.get("split") or "dev"
    if labels is None or split not in ("dev", "test"):
        return ctx.bad_form(request, "the label was not saved: "
                            f"{error or 'split must be dev or test'}", back)
    judged = judged_items(ctx, run_id)
    if isinstance(judged, str):
        return ctx.not_found(request, judged)
    found = {item.id: (row, item) for row, item in judged}
    if form.get("item_id") not in found:
        return ctx.not_found(request, f"no judged attempt {form.get('item_id')} in run {run_id}")
    judgement, item = found[form["item_id"]]
    label_judged_attempt(ctx.store, run_id, path, item, judgement, labeller,
                         labels.tool_choice, labels.arguments, form.get("note", "").strip(),
                         split)
    order, todo = queue_for([i.id for _, i in judged],
                            cv.labelled_by(ctx.store.person_labels(name)), labeller)
    target = {"set": name, "labeller": labeller}
    if todo:
        target["item"] = order[0]
    return RedirectResponse(f"/runs/{run_id}/label?{urlencode(target)}", status_code=303)


async def audit_page(ctx: Context, request: Request) -> Response:
    """The audit sample of a run as a queue: its unlabelled items in sample order; the
    judge's verdict is never shown."""
    run_id = request.path_params["run_id"]
    sample = ctx.store.audit_items(run_id)
    if not sample:
        return ctx.not_found(request, f"run {run_id} has no audit sample; draw one: "
                             f"callgate judge audit {run_id} --n N")
    judged = judged_items(ctx, run_id)
    if isinstance(judged, str):
        return ctx.not_found(request, judged)
    by_key = {(row["case_id"], row["repeat"]): item for row, item in judged}
    waiting = [a for a in sample if a["label_tool_choice"] is None]
    labeller = request.query_params.get("labeller", "").strip()
    if not waiting:
        return ctx.page("error.html", request, message=(
            f"every item of run {run_id}'s audit sample is labelled "
            f"({len(sample)}); see callgate judge audit {run_id}"),
            back=f"/runs/{run_id}")
    current = waiting[0]
    item = by_key[(current["case_id"], current["repeat"])]
    return ctx.page(
        "label.html", request, set_name="", writable=True, item=cv.item_view(item),
        position=current["position"], total=len(sample), todo=len(waiting),
        prev_id=None, next_id=None, labeller=labeller, mine=None, others=[],
        progress={"labelled": len(sample) - len(waiting), "total": len(sample)},
        run=ctx.store.stored_run(run_id), judgement=None, audit_item=current,
        form_action=f"/runs/{run_id}/audit")


async def audit_post(ctx: Context, request: Request) -> Response:
    form = await read_form(request)
    if not ctx.authorised(request, form):
        return ctx.refused(request)
    run_id = request.path_params["run_id"]
    back = f"/runs/{run_id}/audit?" + urlencode({"labeller": form.get("labeller", "")})
    labeller, labels, error = person_and_labels(form)
    try:
        repeat = int(form.get("repeat", ""))
    except ValueError:
        labels, error = None, "repeat must be a number"
    if labels is None:
        return ctx.bad_form(request, f"the label was not saved: {error}", back)
    try:
        record_audit_label(ctx.store, run_id, form.get("case_id", ""), repeat,
                           labels.tool_choice, labels.arguments, labeller)
    except CallgateError as exc:
        return ctx.bad_form(request, f"the label was not saved: {exc}", back)
    return RedirectResponse(back, status_code=303)
