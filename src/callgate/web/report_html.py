"""`callgate report --html`: one self-contained HTML file (inline CSS and SVG, no script, no
external request) with a release's chart, figures and flipped cases, for a CI artifact."""

from __future__ import annotations

from pathlib import Path

from callgate.errors import CallgateError
from callgate.gating.finding import find_current
from callgate.store.db import Store
from callgate.store.rows import StoredRun
from callgate.web.chart import release_chart
from callgate.web.context import STATIC, templates
from callgate.web.views import Views


def html_report_text(store: Store, model: str, release: str | None, suite: str | None,
                  baseline: str = "auto") -> str:
    """The report of a release (default: the model's latest) whose decision is taken against
    `baseline` as `callgate gate --baseline` takes it; earlier releases against the store."""
    if release is not None:
        run = StoredRun(find_current(store, model, release, suite))  # gating: the columns
    else:
        runs = store.stored_runs(model, suite)
        if not runs:
            raise CallgateError(f"no finished release of {model!r}"
                                + (f" on suite {suite}" if suite else "") + f" in {store.path}")
        suites = sorted({r.suite_name for r in runs})
        if len(suites) > 1:
            raise CallgateError(f"{model!r} was run on several suites ({', '.join(suites)}); "
                                "choose one with --suite")
        run = runs[-1]
    views = Views(store, baselines={run.id: baseline})
    history = [h for h in views.history(run.agent, run.suite_name)
               if h["created_at"] <= run.created_at]
    detail = views.release(run.id)
    assert detail is not None
    env = templates()
    return env.get_template("report.html").render(
        static_report=True, inline_css=(STATIC / "app.css").read_text(encoding="utf-8"),
        r=detail, history=history,
        chart=release_chart(history, f"{model} on {run.suite_name}"))


def write_report(db: Path, out: Path, model: str, release: str | None, suite: str | None,
                 baseline: str = "auto") -> str:
    with Store(db) as store:
        text = html_report_text(store, model, release, suite, baseline)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    return text
