"""A calibration set's labelling queue and its writes: a label (from the page's form or JSON at
/api/calibration/SET/labels), an undo, an adjudication. Writes go through
`callgate.judging.labelling`, the same code path as `callgate judge label`."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response

from callgate.judging.calibration_set import NOT_A_PERSON, CalibrationItem, Labels
from callgate.judging.labelling import adjudicate, label_item, queue_for, undo_label
from callgate.web import calibration_views as cv
from callgate.web.context import Context, read_form, read_json

LABELS = {"tool_choice": ("pass", "fail"), "arguments": ("pass", "fail", "n/a")}


def set_url(name: str, rest: str = "") -> str:
    """A set's page: its name is one path segment, whatever it holds (a file name may hold
    '#', '?', '%' or spaces)."""
    return f"/calibration/{quote(name, safe='')}{rest}"


def set_of(ctx: Context, request: Request) -> tuple[str, Path | None]:
    """The set the path names, and its file when it was given to `callgate serve --set`."""
    name = request.path_params["set_name"]
    return name, ctx.set_paths.get(name)


def set_items(ctx: Context, name: str, path: Path | None) -> list[CalibrationItem] | None:
    """A set's items: from its file when given (none yet for a new one), else as the store
    holds them; None when there is no such set."""
    if path is not None:
        return cv.load_items(path) if path.is_file() and path.read_bytes().strip() else []
    rows = ctx.store.calibration_item_rows(name)
    return [CalibrationItem.model_validate_json(r["body"]) for r in rows] or None


def given_labels(fields: Mapping[str, Any]) -> tuple[Labels | None, str | None]:
    """The labels of a form or JSON body, or why they are refused (the rule of Labels:
    arguments cannot pass when the tool choice fails)."""
    tool_choice, arguments = fields.get("tool_choice"), fields.get("arguments")
    if tool_choice not in LABELS["tool_choice"] or arguments not in LABELS["arguments"]:
        return None, "tool_choice must be pass or fail, arguments pass, fail or n/a"
    try:
        return Labels(tool_choice=tool_choice, arguments=arguments), None
    except ValidationError as exc:
        return None, str(exc.errors()[0]["msg"]).removeprefix("Value error, ")


def given_person(fields: Mapping[str, Any]) -> tuple[str, str | None]:
    """The labeller's name, or why it is refused."""
    labeller = str(fields.get("labeller") or "").strip()
    if not labeller:
        return labeller, "a labeller name is required"
    if labeller in NOT_A_PERSON:
        return labeller, (f"{labeller!r} marks a label no person gave; give your own name")
    return labeller, None


def person_and_labels(fields: Mapping[str, Any]) -> tuple[str, Labels | None, str | None]:
    """The labeller and the labels of a write, or why they are refused (the person first)."""
    labeller, error = given_person(fields)
    labels, error = (None, error) if error else given_labels(fields)
    return labeller, labels, error


async def label_page(ctx: Context, request: Request) -> Response:
    name, path = set_of(ctx, request)
    items = set_items(ctx, name, path)
    if items is None:
        return ctx.not_found(request, f"no calibration set {name}")
    if not items:
        return ctx.page("error.html", request, message=f"{name} has no items yet: label a "
                        "run's judged attempts into it from the run's page")
    rows = ctx.store.person_labels(name)
    by_id = {i.id: i for i in items}
    labeller = request.query_params.get("labeller", "").strip()
    order, todo = queue_for(list(by_id), cv.labelled_by(rows), labeller, ctx.plan)
    current = request.query_params.get("item") or order[0]
    if current not in by_id:
        return ctx.not_found(request, f"no item {current} in {name}")
    place = cv.queue_place(order, todo, current, rows, labeller)
    report = cv.progress(items, rows, ctx.store.adjudications(name))
    # Blind: what others said, the file's label, whether people disagree and the category
    # stay out of the page until this person has given their own label.
    conflict = next((c for c in report["conflicts"] if c["item_id"] == current), None)
    return ctx.page(
        "label.html", request, set_name=name, writable=path is not None,
        item=cv.item_view(by_id[current], reveal=place["mine"] is not None), **place,
        progress=report, conflict=conflict)


def write_label(ctx: Context, name: str, path: Path | None, fields: Mapping[str, Any]
                ) -> tuple[dict[str, Any] | None, str | None]:
    """The label row written to the set's file and the store, or why nothing was written."""
    if path is None:
        return None, (f"set {name} was not given to callgate serve with --set, so its file "
                      "cannot be appended to")
    labeller, labels, error = person_and_labels(fields)
    if labels is None:
        return None, error
    items = {i.id: i for i in set_items(ctx, name, path) or []}  # a new file: no items yet
    item = items.get(str(fields.get("item_id")))
    if item is None:
        return None, f"no item {fields.get('item_id')!r} in {name}"
    row = label_item(ctx.store, path, item, labeller, labels.tool_choice, labels.arguments,
                     str(fields.get("note") or "").strip())
    return row, None


async def label_post(ctx: Context, request: Request) -> Response:
    form = await read_form(request)
    if not ctx.authorised(request, form):
        return ctx.refused(request)
    name, path = set_of(ctx, request)
    row, error = write_label(ctx, name, path, form)
    if error:
        back = set_url(name, "?") + urlencode(
            {"labeller": form.get("labeller", ""), "item": form.get("item_id", "")})
        return ctx.bad_form(request, f"the label was not saved: {error}", back)
    assert row is not None and path is not None  # no error: the label was written
    if form.get("back") == "review":
        query = urlencode({"labeller": row["labeller"]})
        return RedirectResponse(
            set_url(name, f"/review?{query}#{quote(row['item_id'], safe='')}"), status_code=303)
    # on to this person's next item
    items = cv.load_items(path)
    order, todo = queue_for([i.id for i in items],
                            cv.labelled_by(ctx.store.person_labels(name)),
                            row["labeller"], ctx.plan)
    target = {"labeller": row["labeller"]}
    if todo:
        target["item"] = order[0]
    return RedirectResponse(set_url(name, f"?{urlencode(target)}"), status_code=303)


async def labels_api(ctx: Context, request: Request) -> Response:
    if not ctx.authorised(request):
        return ctx.refused(request)
    name, path = set_of(ctx, request)
    fields = await read_json(request)
    row, error = write_label(ctx, name, path, fields)
    if error:
        return JSONResponse({"error": error}, status_code=400)
    assert row is not None  # no error: the label was written
    return JSONResponse({k: row[k] for k in ("id", "set_name", "item_id", "labeller",
                                             "tool_choice", "arguments", "note",
                                             "created_at")}, status_code=201)


async def adjudicate_post(ctx: Context, request: Request) -> Response:
    form = await read_form(request)
    if not ctx.authorised(request, form):
        return ctx.refused(request)
    name, path = set_of(ctx, request)
    back = set_url(name, "/progress")
    if path is None:
        return ctx.bad_form(request, f"set {name} was not given to callgate serve with --set",
                            back)
    labeller, labels, error = person_and_labels(form)
    why = form.get("why", "").strip()
    if labels is None or not why:
        return ctx.bad_form(request, f"not adjudicated: {error or 'say why'}", back)
    item_id = form.get("item_id", "")
    if item_id not in {i.id for i in set_items(ctx, name, path) or []}:
        return ctx.not_found(request, f"no item {item_id} in {name}")
    adjudicate(ctx.store, path, item_id, labeller, labels.tool_choice, labels.arguments, why)
    return RedirectResponse(back, status_code=303)


async def undo_post(ctx: Context, request: Request) -> Response:
    form = await read_form(request)
    if not ctx.authorised(request, form):
        return ctx.refused(request)
    name, path = set_of(ctx, request)
    labeller = str(form.get("labeller") or "")
    if path is None or not labeller:
        return ctx.page("error.html", request, status=400,
                        message="undo needs a set given with --set and a labeller")
    row = undo_label(ctx.store, path, labeller)
    target = {"labeller": labeller}
    if row is not None:
        target["item"] = row.item_id
    back = form.get("back", "")
    if back.startswith("/") and not back.startswith("//"):  # a page of this app only
        target["set"] = name
        return RedirectResponse(f"{back}?{urlencode(target)}", status_code=303)
    return RedirectResponse(set_url(name, f"?{urlencode(target)}"), status_code=303)
