"""What every route of `callgate serve` is handed (`Context`): the store, opened on the event
loop's thread, the calibration files it may append to, the token every write needs (when set),
the session plan and the page templates; and the few rules every route shares (a page, a 404,
a refused write, a query number SQLite can hold).

SQLite connections belong to the thread that opened them: every endpoint is `async` and runs on
the event loop's thread, where the lifespan opened the store. A request's work is a few indexed
queries, so serialising them costs a local, single-user tool nothing.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode, urlsplit

from jinja2 import Environment, PackageLoader, select_autoescape
from markupsafe import Markup, escape
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response

from callgate.gating.gated import GateInputs
from callgate.judging.calibration import kappa_text
from callgate.judging.labelling import SessionPlan, is_text, reload_set
from callgate.store.db import Store
from callgate.web.security import same_token
from callgate.web.views import Views

STATIC = Path(__file__).parent / "static"
SQLITE_MAX = 2**63 - 1


def templates() -> Environment:
    env = Environment(loader=PackageLoader("callgate.web", "templates"),
                      autoescape=select_autoescape(["html"]), trim_blocks=True,
                      lstrip_blocks=True)
    env.filters["pct"] = lambda v: "–" if v is None else f"{v:.1f}"
    env.filters["num"] = lambda v, f="{:.2f}": "–" if v is None else f.format(v)
    env.filters["kappa"] = lambda v, items, f="{:.2f}": kappa_text(v, items, f)
    env.filters["q"] = lambda d: urlencode({k: v for k, v in d.items() if v not in (None, "")},
                                           doseq=True)
    # the page's query with one parameter set (a repeated one, as compare's run, kept)
    env.filters["requery"] = lambda params, key, value: urlencode(
        [(k, v) for k, v in params.multi_items() if k != key] + [(key, value)])
    env.filters["worddiff"] = word_diff_html
    # one path segment of a link (a case id may hold '/', '?' or '#')
    env.filters["segment"] = lambda v: quote(str(v), safe="")
    return env


_DELETED = re.compile(r"\[-(.*?)-\]")
_INSERTED = re.compile(r"\{\+(.*?)\+\}")


def word_diff_html(text: str) -> Markup:
    """A word diff's line (gating.surface_diff: `[-gone-]`, `{+new+}`) as escaped HTML, the
    words gone in <del> and the new ones in <ins> (their markers kept, for a reader without
    the stylesheet and for copying)."""
    escaped = str(escape(text))
    escaped = _DELETED.sub(r"<del>[-\1-]</del>", escaped)
    return Markup(_INSERTED.sub(r"<ins>{+\1+}</ins>", escaped))


class BadQuery(ValueError):
    """A query parameter the page cannot take: answered 400 with this message."""


def whole(query: Mapping[str, str], name: str, default: int) -> int:
    value = query.get(name)
    if value is None or value == "":
        return default
    if not (value.isascii() and value.isdigit()) or int(value) > SQLITE_MAX:
        raise BadQuery(f"{name} must be a whole number from 0 to {SQLITE_MAX}, not {value!r}")
    return int(value)


def is_api(request: Request) -> bool:
    return request.url.path.startswith("/api/")


async def read_form(request: Request) -> dict[str, str]:
    """The pages' forms are urlencoded (no file uploads): parsed here, which spares the
    python-multipart dependency Starlette's request.form() needs. A form that is not UTF-8
    text is refused (BadQuery: 400), never kept with its bytes replaced."""
    try:
        body = (await request.body()).decode("utf-8")
        return dict(parse_qsl(body, keep_blank_values=True, errors="strict"))
    except UnicodeDecodeError:
        raise BadQuery("the form is not UTF-8 text; nothing was saved") from None


async def read_json(request: Request) -> dict[str, Any]:
    """A JSON object body whose every string can be kept as UTF-8 text, or BadQuery (400)
    saying why: JSON may escape a lone surrogate ("\\ud800"), which no file or store can
    hold."""
    try:
        fields = json.loads(await request.body())
    except ValueError:  # not JSON, or not UTF-8
        raise BadQuery("the body must be a JSON object") from None
    if not isinstance(fields, dict):
        raise BadQuery("the body must be a JSON object")
    for key, value in fields.items():
        if not (is_text(key) and (not isinstance(value, str) or is_text(value))):
            raise BadQuery(f"field {key!r} is not UTF-8 text (it holds a lone surrogate); "
                           "nothing was saved")
    return fields


class Context:
    """What the app holds, handed to every route."""

    def __init__(self, db: Path, sets: list[Path], token: str | None,
                 plan: SessionPlan | None, configured: GateInputs | None = None) -> None:
        self.db_path = db
        self.configured = configured  # `serve --config`: a never-gated release's gate inputs
        self.set_paths = {path.name: path for path in sets}
        self.token = token
        self.plan = plan
        self.env = templates()
        # in the static URLs, so that a browser never keeps an older stylesheet or script
        self.static_version = max(int(f.stat().st_mtime) for f in STATIC.iterdir())
        self._store: Store | None = None
        self._views: Views | None = None

    @property
    def store(self) -> Store:
        if self._store is None:
            raise RuntimeError("the app's store is not open")
        return self._store

    @property
    def views(self) -> Views:
        if self._views is None:
            raise RuntimeError("the app's store is not open")
        return self._views

    def open(self) -> None:
        self._store = Store(self.db_path)
        self._views = Views(self._store, configured=self.configured)
        for path in self.set_paths.values():
            if path.is_file() and path.read_bytes().strip():
                reload_set(self._store, path)  # a new file is created by the first label
        for name in self.env.list_templates(extensions=["html"]):
            self.env.get_template(name)  # compiled once at start, not on a person's first request

    def close(self) -> None:
        if self._store is not None:
            self._store.close()

    # ------------------------------------------------------------------ answers

    def page(self, name: str, request: Request, status: int = 200, **context: Any
             ) -> HTMLResponse:
        body = self.env.get_template(name).render(
            request=request, token_required=bool(self.token), db=str(self.db_path),
            static_version=self.static_version, **context)
        return HTMLResponse(body, status_code=status)

    def not_found(self, request: Request, what: str) -> Response:
        if is_api(request):
            return JSONResponse({"error": what}, status_code=404)
        return self.page("error.html", request, status=404, message=what)

    def bad_form(self, request: Request, message: str, back: str) -> Response:
        return self.page("error.html", request, status=400, message=message, back=back)

    # ------------------------------------------------------------------ writes

    def authorised(self, request: Request, form: Mapping[str, str] | None = None) -> bool:
        # A page of another site may make the browser POST here (cross-site request forgery):
        # browsers say where such a request comes from, and it must be this server.
        # ("null", from a sandboxed frame or a file, is not this server either.)
        origin = request.headers.get("origin")
        if origin and urlsplit(origin).netloc != request.headers.get("host", ""):
            return False
        if not self.token:
            return True
        given = (request.headers.get("x-callgate-token")
                 or request.headers.get("authorization", "").removeprefix("Bearer ").strip()
                 or (form.get("token") if form is not None else None) or "")
        return same_token(str(given), self.token)

    def refused(self, request: Request) -> Response:
        message = ("this server needs its token for every write (X-Callgate-Token header or "
                   "token field), from its own pages" if self.token else
                   "a write from another site's page is refused")
        if is_api(request):
            return JSONResponse({"error": message}, status_code=403)
        return self.page("error.html", request, status=403, message=message)
