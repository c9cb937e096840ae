"""The Starlette app behind `callgate serve`: pages (Jinja2, readable without JavaScript) and
a JSON API under /api/ over the same reads (`views`, `calibration_views`).

SQLite connections belong to the thread that opened them: every endpoint is `async` and runs on
the event loop's thread, where the lifespan opened the store. A request's work is a few indexed
queries, so serialising them costs a local, single-user tool nothing.
"""

from __future__ import annotations

import contextlib
import hmac
import json
import time
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode, urlsplit

from jinja2 import Environment, PackageLoader, select_autoescape
from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import (
    HTMLResponse,
    JSONResponse,
    PlainTextResponse,
    RedirectResponse,
    Response,
)
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from callgate.errors import CallgateError
from callgate.gating.gate import find_current
from callgate.judging.audit import certificate_plan_lines, record_audit_label
from callgate.judging.calibration import (
    NOT_A_PERSON,
    CalibrationItem,
    Certificate,
    Labels,
)
from callgate.judging.labelling import (
    SessionPlan,
    adjudicate,
    judged_attempt_items,
    label_item,
    label_judged_attempt,
    queue_for,
    reload_set,
    still_to_label,
    undo_label,
)
from callgate.store.db import Store
from callgate.web import calibration_views as cv
from callgate.web.chart import models_chart, release_chart
from callgate.web.views import Views

STATIC = Path(__file__).parent / "static"
PAGE_SIZE = 100
LABELS = {"tool_choice": ("pass", "fail"), "arguments": ("pass", "fail", "n/a")}


def templates() -> Environment:
    env = Environment(loader=PackageLoader("callgate.web", "templates"),
                      autoescape=select_autoescape(["html"]), trim_blocks=True,
                      lstrip_blocks=True)
    env.filters["pct"] = lambda v: "–" if v is None else f"{v:.1f}"
    env.filters["num"] = lambda v, f="{:.2f}": "–" if v is None else f.format(v)
    env.filters["q"] = lambda d: urlencode({k: v for k, v in d.items() if v not in (None, "")},
                                           doseq=True)
    # the page's query with one parameter set (a repeated one, as compare's run, kept)
    env.filters["requery"] = lambda params, key, value: urlencode(
        [(k, v) for k, v in params.multi_items() if k != key] + [(key, value)])
    # one path segment of a link (a case id may hold '/', '?' or '#')
    env.filters["segment"] = lambda v: quote(str(v), safe="")
    return env


async def with_response_headers(app: Any, scope: Any, receive: Any, send: Any,
                                extra: Callable[[], list[tuple[bytes, bytes]]]) -> None:
    """Run `app` on an HTTP request, adding `extra()` to its response's headers as the
    response starts (other scopes pass through)."""
    if scope["type"] != "http":
        await app(scope, receive, send)
        return

    async def adding(message: Any) -> None:
        if message["type"] == "http.response.start":
            message["headers"] = [*message.get("headers", []), *extra()]
        await send(message)

    await app(scope, receive, adding)


class ServerTiming:
    """Adds `Server-Timing: app;dur=MS, cpu;dur=MS` to every response: the time from the
    request reaching the app to its response starting (the page rendered), and the CPU time
    the event loop's thread spent on it meanwhile (the same on an idle machine; less on a busy
    one), as benchmarks/serve_latency.py reads them."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        start, cpu = time.perf_counter(), time.thread_time()

        def timing() -> list[tuple[bytes, bytes]]:
            took = (time.perf_counter() - start) * 1000
            used = (time.thread_time() - cpu) * 1000
            return [(b"server-timing", f"app;dur={took:.2f}, cpu;dur={used:.2f}".encode())]

        await with_response_headers(self.app, scope, receive, send, timing)


SECURITY_HEADERS = [
    (b"x-frame-options", b"DENY"),  # no page of another site may frame these (clickjacking)
    (b"content-security-policy", b"frame-ancestors 'none'"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
]


class SecurityHeaders:
    """Adds SECURITY_HEADERS to every response, the refusals of the checks below included."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await with_response_headers(self.app, scope, receive, send, lambda: SECURITY_HEADERS)


LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "::1"})
WILDCARDS = frozenset({"0.0.0.0", "::", ""})
TOKEN_COOKIE = "callgate_token"


def host_of(header: str) -> str:
    """The host of a Host header, without its port: '[::1]:8765' -> '::1'."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1:header.find("]")] if "]" in header else header
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


def allowed_hosts(host: str, extra: list[str] | None = None) -> frozenset[str]:
    """The Host header names a server bound to `host` answers to. On loopback, the machine's
    loopback names; beyond it, also the address bound, the machine's names and addresses
    (for a wildcard bind) and the names given (`--allow-host`). Anything else may be a page
    whose DNS name was re-pointed at this server (DNS rebinding)."""
    names = set(LOOPBACK_NAMES) | {h.lower().strip("[]") for h in extra or []}
    if host.lower() not in LOOPBACK_NAMES:
        names.add(host.lower().strip("[]"))
    if host in WILDCARDS:
        import socket

        for name in {socket.gethostname(), socket.getfqdn()}:
            names.add(name.lower())
            with contextlib.suppress(OSError):
                names |= {str(info[4][0]).lower() for info in socket.getaddrinfo(name, None)}
    return frozenset(names - WILDCARDS)


def same_token(given: str, token: str) -> bool:
    # bytes, so that a header's non-ASCII characters are a mismatch and not a TypeError
    return hmac.compare_digest(given.encode("utf-8", "surrogateescape"), token.encode())


class Guard:
    """Refuses a request whose Host header is not one of `hosts` (400); and, with
    `read_token` (a bind beyond loopback), one that does not carry the token (401) in the
    X-Callgate-Token header, an Authorization Bearer header or the cookie a link with
    ?token=T sets (that link answers with the cookie and a redirect to itself without the
    token, so the token does not stay in the address bar or the history)."""

    def __init__(self, app: Any, hosts: frozenset[str], read_token: str | None) -> None:
        self.app, self.hosts, self.token = app, hosts, read_token

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        if host_of(request.headers.get("host", "")) not in self.hosts:
            await PlainTextResponse("Invalid host header", status_code=400)(scope, receive, send)
            return
        if self.token is not None:
            given = (request.headers.get("x-callgate-token")
                     or request.headers.get("authorization", "").removeprefix("Bearer ").strip()
                     or request.cookies.get(TOKEN_COOKIE) or "")
            in_link = request.query_params.get("token")
            if in_link is not None and same_token(in_link, self.token):
                rest = urlencode([(k, v) for k, v in request.query_params.multi_items()
                                  if k != "token"])
                response: Response = RedirectResponse(
                    request.url.path + (f"?{rest}" if rest else ""), status_code=303)
                response.set_cookie(TOKEN_COOKIE, self.token, httponly=True,
                                    samesite="strict")
                await response(scope, receive, send)
                return
            if not same_token(given, self.token):
                await PlainTextResponse(
                    "this server needs its token for every request: open a link with "
                    "?token=T once, or send an X-Callgate-Token header",
                    status_code=401)(scope, receive, send)
                return
        await self.app(scope, receive, send)


class Session:
    """What the app holds: the store (opened on the loop's thread), the calibration files it
    may append to, and the token every write needs (when set)."""

    def __init__(self, db: Path, sets: list[Path], token: str | None) -> None:
        self.db_path = db
        self.set_paths = {path.name: path for path in sets}
        self.token = token
        self._store: Store | None = None
        self._views: Views | None = None

    @property
    def store(self) -> Store:
        if self._store is None:
            raise RuntimeError("the session is not open")
        return self._store

    @property
    def views(self) -> Views:
        if self._views is None:
            raise RuntimeError("the session is not open")
        return self._views

    def open(self) -> None:
        self._store = Store(self.db_path)
        self._views = Views(self._store)
        for path in self.set_paths.values():
            if path.is_file() and path.read_bytes().strip():
                reload_set(self._store, path)  # a new file is created by the first label

    def close(self) -> None:
        if self._store is not None:
            self._store.close()


def create_app(db: Path, sets: list[Path] | None = None, token: str | None = None,
               host: str = "127.0.0.1", plan: SessionPlan | None = None,
               allow_hosts: list[str] | None = None) -> Starlette:
    session = Session(Path(db), list(sets or []), token)
    env = templates()
    # in the static URLs, so that a browser never keeps an older stylesheet or script
    static_version = max(int(f.stat().st_mtime) for f in STATIC.iterdir())

    def page(name: str, request: Request, status: int = 200, **context: Any) -> HTMLResponse:
        body = env.get_template(name).render(request=request, token_required=bool(token),
                                             db=str(session.db_path),
                                             static_version=static_version, **context)
        return HTMLResponse(body, status_code=status)

    def not_found(request: Request, what: str) -> Response:
        if request.url.path.startswith("/api/"):
            return JSONResponse({"error": what}, status_code=404)
        return page("error.html", request, status=404, message=what)

    async def read_form(request: Request) -> dict[str, str]:
        """The pages' forms are urlencoded (no file uploads): parsed here, which spares the
        python-multipart dependency Starlette's request.form() needs."""
        body = (await request.body()).decode("utf-8", errors="replace")
        return dict(parse_qsl(body, keep_blank_values=True))

    def authorised(request: Request, form: Any = None) -> bool:
        # A page of another site may make the browser POST here (cross-site request forgery):
        # browsers say where such a request comes from, and it must be this server.
        # ("null", from a sandboxed frame or a file, is not this server either.)
        origin = request.headers.get("origin")
        if origin and urlsplit(origin).netloc != request.headers.get("host", ""):
            return False
        if not token:
            return True
        given = (request.headers.get("x-callgate-token")
                 or request.headers.get("authorization", "").removeprefix("Bearer ").strip()
                 or (form.get("token") if form is not None else None) or "")
        return same_token(str(given), token)

    def refused(request: Request) -> Response:
        message = ("this server needs its token for every write (X-Callgate-Token header or "
                   "token field), from its own pages" if token else
                   "a write from another site's page is refused")
        if request.url.path.startswith("/api/"):
            return JSONResponse({"error": message}, status_code=403)
        return page("error.html", request, status=403, message=message)

    # ------------------------------------------------------------------ releases

    async def index(request: Request) -> Response:
        assert session.store is not None
        store = session.store
        certs = []
        for row in store.certificate_rows():
            body = json.loads(row["body"])
            certs.append({"fingerprint": row["fingerprint"], "judge": row["judge"],
                          "created_at": row["created_at"], "certified": bool(row["certified"]),
                          "set": Path(body.get("set_path", "")).name})
        return page("index.html", request, models=session.views.models(),
                    sets=store.calibration_sets(), labelable=sorted(session.set_paths),
                    certificates=certs)

    async def releases_page(request: Request) -> Response:
        model, suite = request.query_params.get("model"), request.query_params.get("suite")
        if not model or not suite:
            return not_found(request, "choose a model and a suite: /releases?model=M&suite=S")
        history = session.views.history(model, suite)
        if not history:
            return not_found(request, f"no finished release of {model} on {suite}")
        return page("releases.html", request, model=model, suite=suite, history=history,
                    chart=release_chart(history, f"{model} on {suite}"))

    async def releases_api(request: Request) -> Response:
        model, suite = request.query_params.get("model"), request.query_params.get("suite")
        if not model:
            return JSONResponse({"models": session.views.models()})
        suites = ([suite] if suite else
                  [m["suite_name"] for m in session.views.models() if m["agent"] == model])
        return JSONResponse({"model": model, "suites": {
            name: session.views.history(model, name) for name in suites}})

    def _filters(request: Request) -> dict[str, Any]:
        """The attempts' filters and page; BadQuery for an offset or limit that is not a
        whole number SQLite can hold."""
        q = request.query_params
        offset, limit = (whole(q, "offset", 0), whole(q, "limit", PAGE_SIZE))
        return {"verdict": q.get("verdict") or None, "tag": q.get("tag") or None,
                "tool": q.get("tool") or None, "case": q.get("case") or None,
                "offset": offset, "limit": min(1000, max(1, limit))}

    async def release_page(request: Request) -> Response:
        run_id = request.path_params["run_id"]
        release = session.views.release(run_id)
        if release is None:
            return not_found(request, f"no finished run {run_id}")
        filters = _filters(request)
        attempts = session.views.attempts(run_id, **filters)
        flipped = {side: flipped_page(release[side], request.query_params.get(side))
                   for side in ("worse", "better")}
        return page("release.html", request, r=release, attempts=attempts, filters=filters,
                    verdicts=VERDICT_FILTERS, flipped=flipped)

    async def release_api(request: Request) -> Response:
        release = session.views.release(request.path_params["run_id"])
        if release is None:
            return not_found(request, "no such finished run")
        return JSONResponse(release)

    async def attempts_api(request: Request) -> Response:
        run_id = request.path_params["run_id"]
        if session.store.run(run_id) is None:
            return not_found(request, "no such run")
        return JSONResponse(session.views.attempts(run_id, **_filters(request)))

    async def attempt_page(request: Request) -> Response:
        p = request.path_params
        found = session.views.attempt(p["run_id"], p["case_id"], p["repeat"])
        if found is None:
            return not_found(request, "no such attempt")
        return page("attempt.html", request, a=found)

    async def attempt_api(request: Request) -> Response:
        p = request.path_params
        found = session.views.attempt(p["run_id"], p["case_id"], p["repeat"])
        if found is None:
            return not_found(request, "no such attempt")
        return JSONResponse(found)

    async def gate_api(request: Request) -> Response:
        q = request.query_params
        if not q.get("model") or not q.get("release"):
            return JSONResponse({"error": "model and release are required"}, status_code=400)
        try:
            run = find_current(session.store, q["model"], q["release"], q.get("suite"))
        except CallgateError as exc:
            return JSONResponse({"error": str(exc)}, status_code=404)
        _, decision = session.views.decision(run)
        return JSONResponse(decision.model_dump(mode="json"))

    async def compare_page(request: Request) -> Response:
        """Two releases (?run=A&run=B: B against A) side by side, their flipped cases with
        both answers; or (?suite=S) every model's newest release on a suite."""
        api = request.url.path.startswith("/api/")
        q = request.query_params
        given, suite = q.getlist("run"), q.get("suite")
        if suite and not given:
            rows = session.views.suite_models(suite)
            if not rows:
                return not_found(request, f"no finished release on suite {suite}")
            if api:
                return JSONResponse({"suite": suite, "models": rows})
            return page("compare.html", request, suite=suite, models=rows,
                        chart=models_chart(rows, f"models on {suite}"))
        if len(given) != 2:
            raise BadQuery("compare two releases (?run=A&run=B) or a suite's models (?suite=S)")
        ids = [whole({"run": value}, "run", 0) for value in given]
        pair = [session.views.release(run_id) for run_id in ids]
        if pair[0] is None or pair[1] is None:
            return not_found(request, f"no finished run {ids[pair.index(None)]}")
        runs = [session.store.run(run_id) or {} for run_id in ids]
        decision = session.views.compared(runs[0], runs[1])
        flips = {"worse": [c.model_dump() for c in decision.worse],
                 "better": [c.model_dump() for c in decision.better]}
        if api:
            return JSONResponse({"before": pair[0], "after": pair[1],
                                 "comparison": decision.model_dump(mode="json")})
        flipped = {side: flipped_page(flips[side], q.get(side)) for side in flips}
        shown = [c["case_id"] for side in flipped.values() for c in side["rows"]]
        return page("compare.html", request, a=pair[0], b=pair[1], d=decision,
                    flipped=flipped, answers=[session.views.answers(run_id, shown)
                                              for run_id in ids])

    # ------------------------------------------------------------------ calibration

    def _set(request: Request) -> tuple[str, Path | None]:
        name = request.path_params["set_name"]
        return name, session.set_paths.get(name)

    def _items(name: str, path: Path | None) -> list[CalibrationItem] | None:
        if path is not None:
            return cv.load_items(path) if path.is_file() and path.read_bytes().strip() else []
        rows = session.store.calibration_item_rows(name)
        return [CalibrationItem.model_validate_json(r["body"]) for r in rows] or None

    async def label_page(request: Request) -> Response:
        name, path = _set(request)
        items = _items(name, path)
        if items is None:
            return not_found(request, f"no calibration set {name}")
        if not items:
            return page("error.html", request, message=f"{name} has no items yet: label a "
                        "run's judged attempts into it from the run's page")
        rows = session.store.person_labels(name)
        by_id = {i.id: i for i in items}
        labeller = request.query_params.get("labeller", "").strip()
        order, todo = queue_for(list(by_id), cv.labelled_by(rows), labeller, plan)
        current = request.query_params.get("item") or order[0]
        if current not in by_id:
            return not_found(request, f"no item {current} in {name}")
        position = order.index(current)
        latest = cv.latest_labels(rows)
        mine = latest.get((current, labeller)) if labeller else None
        # Blind: what others said, the file's label and the category stay out of the page
        # until this person has given their own label.
        return page(
            "label.html", request, set_name=name, writable=path is not None,
            item=cv.item_view(by_id[current], reveal=mine is not None), position=position,
            total=len(order), todo=todo,
            prev_id=order[position - 1] if position > 0 else None,
            next_id=order[position + 1] if position + 1 < len(order) else None,
            labeller=labeller, mine=mine,
            others=[r for (i, who), r in sorted(latest.items()) if i == current]
            if mine else [],
            progress=cv.progress(items, rows))

    def _labels(fields: dict[str, Any]) -> tuple[Labels | None, str | None]:
        """The labels of a form or JSON body, or why they are refused (the rule of Labels:
        arguments cannot pass when the tool choice fails)."""
        tool_choice, arguments = fields.get("tool_choice"), fields.get("arguments")
        if tool_choice not in LABELS["tool_choice"] or arguments not in LABELS["arguments"]:
            return None, "tool_choice must be pass or fail, arguments pass, fail or n/a"
        try:
            return Labels(tool_choice=tool_choice, arguments=arguments), None
        except ValidationError as exc:
            return None, str(exc.errors()[0]["msg"]).removeprefix("Value error, ")

    def _person(fields: dict[str, Any]) -> tuple[str, str | None]:
        labeller = str(fields.get("labeller") or "").strip()
        if not labeller:
            return labeller, "a labeller name is required"
        if labeller in NOT_A_PERSON:
            return labeller, (f"{labeller!r} marks a label no person gave; give your own name")
        return labeller, None

    async def _write_label(name: str, path: Path | None, fields: dict[str, Any]
                           ) -> tuple[dict[str, Any] | None, str | None]:
        if path is None:
            return None, (f"set {name} was not given to callgate serve with --set, so its file "
                          "cannot be appended to")
        labeller, error = _person(fields)
        labels, error = (None, error) if error else _labels(fields)
        if labels is None:
            return None, error
        items = {i.id: i for i in _items(name, path) or []}  # a new file: no items yet
        item = items.get(str(fields.get("item_id")))
        if item is None:
            return None, f"no item {fields.get('item_id')!r} in {name}"
        row = label_item(session.store, path, item, labeller, labels.tool_choice,
                         labels.arguments, str(fields.get("note") or "").strip())
        return row, None

    def _refused_form(request: Request, message: str, back: str) -> Response:
        return page("error.html", request, status=400, message=message, back=back)

    async def label_post(request: Request) -> Response:
        form = await read_form(request)
        if not authorised(request, form):
            return refused(request)
        name, path = _set(request)
        row, error = await _write_label(name, path, form)
        if error:
            back = f"/calibration/{name}?" + urlencode(
                {"labeller": form.get("labeller", ""), "item": form.get("item_id", "")})
            return _refused_form(request, f"the label was not saved: {error}", back)
        assert row is not None and path is not None  # no error: the label was written
        if form.get("back") == "review":
            query = urlencode({"labeller": row["labeller"]})
            return RedirectResponse(f"/calibration/{name}/review?{query}#{row['item_id']}",
                                    status_code=303)
        # on to this person's next item
        items = cv.load_items(path)
        order, todo = queue_for([i.id for i in items],
                                cv.labelled_by(session.store.person_labels(name)),
                                row["labeller"], plan)
        target = {"labeller": row["labeller"]}
        if todo:
            target["item"] = order[0]
        return RedirectResponse(f"/calibration/{name}?{urlencode(target)}", status_code=303)

    async def adjudicate_post(request: Request) -> Response:
        form = await read_form(request)
        if not authorised(request, form):
            return refused(request)
        name, path = _set(request)
        back = f"/calibration/{name}/progress"
        if path is None:
            return _refused_form(request, f"set {name} was not given to callgate serve with "
                                 "--set", back)
        labeller, error = _person(form)
        labels, error = (None, error) if error else _labels(form)
        why = form.get("why", "").strip()
        if labels is None or not why:
            return _refused_form(request, f"not adjudicated: {error or 'say why'}", back)
        item_id = form.get("item_id", "")
        if item_id not in {i.id for i in _items(name, path) or []}:
            return not_found(request, f"no item {item_id} in {name}")
        adjudicate(session.store, path, item_id, labeller, labels.tool_choice,
                   labels.arguments, why)
        return RedirectResponse(back, status_code=303)

    async def undo_post(request: Request) -> Response:
        form = await read_form(request)
        if not authorised(request, form):
            return refused(request)
        name, path = _set(request)
        labeller = str(form.get("labeller") or "")
        if path is None or not labeller:
            return page("error.html", request, status=400,
                        message="undo needs a set given with --set and a labeller")
        row = undo_label(session.store, path, labeller)
        target = {"labeller": labeller}
        if row is not None:
            target["item"] = row["item_id"]
        back = form.get("back", "")
        if back.startswith("/") and not back.startswith("//"):  # a page of this app only
            target["set"] = name
            return RedirectResponse(f"{back}?{urlencode(target)}", status_code=303)
        return RedirectResponse(f"/calibration/{name}?{urlencode(target)}", status_code=303)

    # ------------------------------------------------------------------ a run's judged attempts

    def _judged(run_id: int) -> list[tuple[dict[str, Any], CalibrationItem]] | str:
        try:
            return judged_attempt_items(session.store, run_id)
        except CallgateError as exc:
            return str(exc)

    async def run_label_page(request: Request) -> Response:
        run_id = request.path_params["run_id"]
        judged = _judged(run_id)
        if isinstance(judged, str):
            return not_found(request, judged)
        q = request.query_params
        name = q.get("set") or (sorted(session.set_paths)[0] if session.set_paths else "")
        path = session.set_paths.get(name)
        in_file = {i.id for i in _items(name, path) or []} if path else set()
        rows = session.store.person_labels(name) if path else []
        labeller = q.get("labeller", "").strip()
        order, todo = queue_for([item.id for _, item in judged], cv.labelled_by(rows),
                                labeller)
        found = {item.id: (row, item) for row, item in judged}
        current = q.get("item") or order[0]
        if current not in found:
            return not_found(request, f"no judged attempt {current} in run {run_id}")
        position = order.index(current)
        latest = cv.latest_labels(rows)
        mine = latest.get((current, labeller)) if labeller else None
        run = session.store.run(run_id) or {}
        audit = session.store.audit_items(run_id)
        return page(
            "label.html", request, set_name=name, writable=path is not None,
            item=cv.item_view(found[current][1], reveal=mine is not None), position=position,
            total=len(order), todo=todo,
            prev_id=order[position - 1] if position > 0 else None,
            next_id=order[position + 1] if position + 1 < len(order) else None,
            labeller=labeller, mine=mine,
            others=[r for (i, _), r in sorted(latest.items()) if i == current] if mine else [],
            progress={"labelled": sum(item.id in in_file for _, item in judged),
                      "total": len(judged)},
            run=run, judgement=found[current][0] if mine else None,
            sets=sorted(session.set_paths), audit_size=len(audit),
            form_action=f"/runs/{run_id}/label", back=f"/runs/{run_id}/label")

    async def run_label_post(request: Request) -> Response:
        form = await read_form(request)
        if not authorised(request, form):
            return refused(request)
        run_id = request.path_params["run_id"]
        name = form.get("set", "")
        path = session.set_paths.get(name)
        back = f"/runs/{run_id}/label?" + urlencode(
            {"set": name, "labeller": form.get("labeller", ""), "item": form.get("item_id", "")})
        if path is None:
            return _refused_form(request, f"set {name!r} was not given to callgate serve with "
                                 "--set", back)
        labeller, error = _person(form)
        labels, error = (None, error) if error else _labels(form)
        split = form.get("split") or "dev"
        if labels is None or split not in ("dev", "test"):
            return _refused_form(request, "the label was not saved: "
                                 f"{error or 'split must be dev or test'}", back)
        judged = _judged(run_id)
        if isinstance(judged, str):
            return not_found(request, judged)
        found = {item.id: (row, item) for row, item in judged}
        if form.get("item_id") not in found:
            return not_found(request, f"no judged attempt {form.get('item_id')} in run {run_id}")
        judgement, item = found[form["item_id"]]
        label_judged_attempt(session.store, run_id, path, item, judgement, labeller,
                             labels.tool_choice, labels.arguments, form.get("note", "").strip(),
                             split)
        order, todo = queue_for([i.id for _, i in judged],
                                cv.labelled_by(session.store.person_labels(name)), labeller)
        target = {"set": name, "labeller": labeller}
        if todo:
            target["item"] = order[0]
        return RedirectResponse(f"/runs/{run_id}/label?{urlencode(target)}", status_code=303)

    # ------------------------------------------------------------------ a release's audit

    async def audit_page(request: Request) -> Response:
        """The audit sample of a run (`callgate judge audit RUN --n N` draws it) as a queue:
        its unlabelled items in sample order; the judge's verdict is never shown."""
        run_id = request.path_params["run_id"]
        sample = session.store.audit_items(run_id)
        if not sample:
            return not_found(request, f"run {run_id} has no audit sample; draw one: "
                             f"callgate judge audit {run_id} --n N")
        judged = _judged(run_id)
        if isinstance(judged, str):
            return not_found(request, judged)
        by_key = {(row["case_id"], row["repeat"]): item for row, item in judged}
        waiting = [a for a in sample if a["label_tool_choice"] is None]
        labeller = request.query_params.get("labeller", "").strip()
        if not waiting:
            return page("error.html", request, message=(
                f"every item of run {run_id}'s audit sample is labelled "
                f"({len(sample)}); see callgate judge audit {run_id}"),
                back=f"/runs/{run_id}")
        current = waiting[0]
        item = by_key[(current["case_id"], current["repeat"])]
        run = session.store.run(run_id) or {}
        return page(
            "label.html", request, set_name="", writable=True, item=cv.item_view(item),
            position=current["position"], total=len(sample), todo=len(waiting),
            prev_id=None, next_id=None, labeller=labeller, mine=None, others=[],
            progress={"labelled": len(sample) - len(waiting), "total": len(sample)},
            run=run, judgement=None, audit_item=current,
            form_action=f"/runs/{run_id}/audit")

    async def audit_post(request: Request) -> Response:
        form = await read_form(request)
        if not authorised(request, form):
            return refused(request)
        run_id = request.path_params["run_id"]
        back = f"/runs/{run_id}/audit?" + urlencode({"labeller": form.get("labeller", "")})
        labeller, error = _person(form)
        labels, error = (None, error) if error else _labels(form)
        try:
            repeat = int(form.get("repeat", ""))
        except ValueError:
            labels, error = None, "repeat must be a number"
        if labels is None:
            return _refused_form(request, f"the label was not saved: {error}", back)
        try:
            record_audit_label(session.store, run_id, form.get("case_id", ""), repeat,
                               labels.tool_choice, labels.arguments, labeller)
        except CallgateError as exc:
            return _refused_form(request, f"the label was not saved: {exc}", back)
        return RedirectResponse(back, status_code=303)

    async def labels_api(request: Request) -> Response:
        if not authorised(request):
            return refused(request)
        name, path = _set(request)
        try:
            fields = await request.json()
        except ValueError:
            return JSONResponse({"error": "the body must be a JSON object"}, status_code=400)
        if not isinstance(fields, dict):
            return JSONResponse({"error": "the body must be a JSON object"}, status_code=400)
        row, error = await _write_label(name, path, fields)
        if error:
            return JSONResponse({"error": error}, status_code=400)
        assert row is not None  # no error: the label was written
        return JSONResponse({k: row[k] for k in ("id", "set_name", "item_id", "labeller",
                                                 "tool_choice", "arguments", "note",
                                                 "created_at")}, status_code=201)

    async def progress_page(request: Request) -> Response:
        name, path = _set(request)
        items = _items(name, path)
        if items is None:
            return not_found(request, f"no calibration set {name}")
        rows = session.store.person_labels(name)
        report = cv.progress(items, rows, session.store.adjudications(name))
        report["still_to_label"] = still_to_label([i.id for i in items], cv.labelled_by(rows),
                                                  plan)
        report["plan"] = plan.model_dump(mode="json") if plan else None
        # progress against `judge plan`: the labels the newest calibration on this set said
        # it still needs, beside the labels given since
        certificates = cv.certificates_for_set(session.store, name)
        report["labels_needed"] = None
        if certificates:
            newest = certificates[0]
            report["labels_needed"] = {
                "judge": newest.judge, "calibrated_at": newest.created_at,
                "plan": certificate_plan_lines(newest.dimensions, newest.thresholds),
                # labels carry whole seconds: one given in the calibration's second counts
                "labels_since": sum(r["created_at"] >= newest.created_at[:19] for r in rows)}
        if request.url.path.startswith("/api/"):
            return JSONResponse({"set": name, **report})
        return page("progress.html", request, set_name=name, p=report,
                    writable=path is not None)

    async def review_page(request: Request) -> Response:
        name, path = _set(request)
        items = _items(name, path)
        if items is None:
            return not_found(request, f"no calibration set {name}")
        certificates = cv.certificates_for_set(session.store, name)
        rows = cv.disagreements(session.store, items, certificates[0]) if certificates else []
        return page("review.html", request, set_name=name, rows=rows, writable=path is not None,
                    certificate=certificates[0] if certificates else None,
                    labeller=request.query_params.get("labeller", ""))

    async def certificate_page(request: Request) -> Response:
        fingerprint = request.path_params["fingerprint"]
        rows = [r for r in session.store.certificate_rows() if r["fingerprint"] == fingerprint]
        if not rows:
            return not_found(request, f"no certificate for {fingerprint}")
        certificate = Certificate.model_validate_json(rows[0]["body"])
        set_path = session.set_paths.get(Path(certificate.set_path).name)
        if set_path is None and Path(certificate.set_path).is_file():
            set_path = Path(certificate.set_path)
        status, why = cv.certificate_status(certificate, bool(rows[0]["certified"]), set_path)
        plan = certificate_plan_lines(certificate.dimensions, certificate.thresholds)
        if request.url.path.startswith("/api/"):
            return JSONResponse({"status": status, "why": why, "plan": plan,
                                 "certificate": certificate.model_dump(mode="json")})
        return page("certificate.html", request, c=certificate, cert_status=status, why=why,
                    plan=plan, history=rows)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        session.open()
        for name in env.list_templates(extensions=["html"]):
            env.get_template(name)  # compiled once at start, not on a person's first request
        try:
            yield
        finally:
            session.close()

    async def bad_query(request: Request, exc: Exception) -> Response:
        if request.url.path.startswith("/api/"):
            return JSONResponse({"error": str(exc)}, status_code=400)
        return page("error.html", request, status=400, message=str(exc))

    async def out_of_range(request: Request, exc: Exception) -> Response:
        # An id or repeat in the path past what SQLite stores (2^63 - 1): no such row.
        return not_found(request, "no such run or attempt (the number is past any stored id)")

    routes = [
        Route("/", index),
        Route("/releases", releases_page),
        Route("/compare", compare_page),
        Route("/runs/{run_id:int}", release_page),
        Route("/runs/{run_id:int}/attempts/{case_id:path}/{repeat:int}", attempt_page),
        Route("/runs/{run_id:int}/label", run_label_page),
        Route("/runs/{run_id:int}/label", run_label_post, methods=["POST"]),
        Route("/calibration/{set_name}", label_page),
        Route("/calibration/{set_name}/label", label_post, methods=["POST"]),
        Route("/calibration/{set_name}/undo", undo_post, methods=["POST"]),
        Route("/calibration/{set_name}/adjudicate", adjudicate_post, methods=["POST"]),
        Route("/runs/{run_id:int}/audit", audit_page),
        Route("/runs/{run_id:int}/audit", audit_post, methods=["POST"]),
        Route("/calibration/{set_name}/progress", progress_page),
        Route("/calibration/{set_name}/review", review_page),
        Route("/certificates/{fingerprint}", certificate_page),
        Route("/api/releases", releases_api),
        Route("/api/runs/{run_id:int}", release_api),
        Route("/api/runs/{run_id:int}/attempts", attempts_api),
        Route("/api/runs/{run_id:int}/attempts/{case_id:path}/{repeat:int}", attempt_api),
        Route("/api/gate", gate_api),
        Route("/api/compare", compare_page),
        Route("/api/calibration/{set_name}/progress", progress_page),
        Route("/api/calibration/{set_name}/labels", labels_api, methods=["POST"]),
        Route("/api/certificates/{fingerprint}", certificate_page),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
    ]
    # Every bind answers only to its own names: a page whose DNS name is re-pointed at this
    # server (DNS rebinding) would otherwise read and write as if it were local. Beyond
    # loopback, reads need the token too.
    beyond_loopback = host.lower() not in LOOPBACK_NAMES
    middleware = [Middleware(SecurityHeaders),
                  Middleware(Guard, hosts=allowed_hosts(host, allow_hosts),
                             read_token=token if beyond_loopback else None),
                  Middleware(ServerTiming)]
    app = Starlette(routes=routes, lifespan=lifespan, middleware=middleware,
                    exception_handlers={BadQuery: bad_query, OverflowError: out_of_range})
    app.state.session = session
    return app


SQLITE_MAX = 2**63 - 1


class BadQuery(ValueError):
    """A query parameter the page cannot take: answered 400 with this message."""


def whole(query: Mapping[str, str], name: str, default: int) -> int:
    value = query.get(name)
    if value is None or value == "":
        return default
    if not (value.isascii() and value.isdigit()) or int(value) > SQLITE_MAX:
        raise BadQuery(f"{name} must be a whole number from 0 to {SQLITE_MAX}, not {value!r}")
    return int(value)


def flipped_page(cases: list[dict[str, Any]], offset: str | None) -> dict[str, Any]:
    """A page of FLIPPED_PAGE of a release's flipped cases, from `offset` (a query value)."""
    start = int(offset) if offset and offset.isdigit() else 0
    start = min(start, max(0, len(cases) - 1)) // FLIPPED_PAGE * FLIPPED_PAGE
    return {"rows": cases[start:start + FLIPPED_PAGE], "offset": start, "total": len(cases),
            "size": FLIPPED_PAGE}


FLIPPED_PAGE = 100

VERDICT_FILTERS = ("fail", "right", "wrong_tool", "unexpected_call", "missing_call",
                   "extra_call", "invalid_json", "schema_violation", "wrong_value", "truncated",
                   "provider_error", "environment_error", "pending_judge", "target_error")
