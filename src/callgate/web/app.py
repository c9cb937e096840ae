"""The Starlette app behind `callgate serve`: pages (Jinja2, readable without JavaScript) and
a JSON API under /api/ over the same reads (`views`, `calibration_views`). The routes live in
`web.routes` by concern, each handed the app's `Context`; the middlewares in `web.security`."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from functools import partial
from pathlib import Path

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from callgate.gating.gated import GateInputs
from callgate.judging.labelling import SessionPlan
from callgate.web.context import STATIC, BadQuery, Context, is_api
from callgate.web.routes import calibration, compare, labelling, releases, run_labels
from callgate.web.security import (
    LOOPBACK_NAMES,
    BodyLimit,
    Guard,
    SecurityHeaders,
    ServerTiming,
    allowed_hosts,
)

Endpoint = Callable[[Context, Request], Awaitable[Response]]
POST = ["POST"]

# (path, endpoint, methods): GET unless said
ROUTES: list[tuple[str, Endpoint, list[str] | None]] = [
    ("/", releases.index, None),
    ("/releases", releases.releases_page, None),
    ("/compare", compare.compare_page, None),
    ("/runs/{run_id:int}", releases.release_page, None),
    ("/runs/{run_id:int}/attempts/{case_id:path}/{repeat:int}", releases.attempt_page, None),
    ("/runs/{run_id:int}/label", run_labels.run_label_page, None),
    ("/runs/{run_id:int}/label", run_labels.run_label_post, POST),
    ("/calibration/{set_name}", labelling.label_page, None),
    ("/calibration/{set_name}/label", labelling.label_post, POST),
    ("/calibration/{set_name}/undo", labelling.undo_post, POST),
    ("/calibration/{set_name}/adjudicate", labelling.adjudicate_post, POST),
    ("/runs/{run_id:int}/audit", run_labels.audit_page, None),
    ("/runs/{run_id:int}/audit", run_labels.audit_post, POST),
    ("/calibration/{set_name}/progress", calibration.progress_page, None),
    ("/calibration/{set_name}/review", calibration.review_page, None),
    ("/certificates/{fingerprint}", calibration.certificate_page, None),
    ("/api/releases", releases.releases_api, None),
    ("/api/runs/{run_id:int}", releases.release_api, None),
    ("/api/runs/{run_id:int}/attempts", releases.attempts_api, None),
    ("/api/runs/{run_id:int}/attempts/{case_id:path}/{repeat:int}", releases.attempt_api,
     None),
    ("/api/gate", releases.gate_api, None),
    ("/api/compare", compare.compare_page, None),
    ("/api/calibration/{set_name}/progress", calibration.progress_page, None),
    ("/api/calibration/{set_name}/labels", labelling.labels_api, POST),
    ("/api/certificates/{fingerprint}", calibration.certificate_page, None),
]


def create_app(db: Path, sets: list[Path] | None = None, token: str | None = None,
               host: str = "127.0.0.1", plan: SessionPlan | None = None,
               allow_hosts: list[str] | None = None, configured: GateInputs | None = None
               ) -> Starlette:
    """`configured`: the gate inputs of callgate.toml's [gate] (`serve --config`), for the
    releases `callgate gate` never decided (one it decided shows its own)."""
    ctx = Context(Path(db), list(sets or []), token, plan, configured)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        ctx.open()
        try:
            yield
        finally:
            ctx.close()

    async def bad_query(request: Request, exc: Exception) -> Response:
        if is_api(request):
            return JSONResponse({"error": str(exc)}, status_code=400)
        return ctx.page("error.html", request, status=400, message=str(exc))

    async def out_of_range(request: Request, exc: Exception) -> Response:
        # An id or repeat in the path past what SQLite stores (2^63 - 1): no such row.
        return ctx.not_found(request, "no such run or attempt (the number is past any stored id)")

    routes: list[BaseRoute] = [Route(path, partial(endpoint, ctx), methods=methods)
                               for path, endpoint, methods in ROUTES]
    routes.append(Mount("/static", StaticFiles(directory=STATIC), name="static"))
    # Every bind answers only to its own names: a page whose DNS name is re-pointed at this
    # server (DNS rebinding) would otherwise read and write as if it were local. Beyond
    # loopback, reads need the token too.
    beyond_loopback = host.lower() not in LOOPBACK_NAMES
    middleware = [Middleware(SecurityHeaders),
                  Middleware(Guard, hosts=allowed_hosts(host, allow_hosts),
                             read_token=token if beyond_loopback else None),
                  Middleware(BodyLimit), Middleware(ServerTiming)]
    app = Starlette(routes=routes, lifespan=lifespan, middleware=middleware,
                    exception_handlers={BadQuery: bad_query, OverflowError: out_of_range})
    app.state.context = ctx
    return app
