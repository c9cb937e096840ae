"""Stage 6, the report: tables for people and JSON documents for machines."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from callgate.report.policy_lines import policy_lines
from callgate.report.what_to_fix import (
    fix_headline,
    fix_junit,
    fix_markdown,
    fix_markdown_lead,
    print_fix,
)
from callgate.scoring.exclusion import COUNTED_APART, SEEN_APART
from callgate.scoring.scores import Scores, Share, agent_label

if TYPE_CHECKING:  # types only: `callgate score` need not load the gate or the judge
    from callgate.checks.verdict import Verdict
    from callgate.gating.decision import GateDecision
    from callgate.gating.scores_file import ReleaseScores
    from callgate.judging.certificates import Certificate, DimensionReport, Disagreement
    from callgate.scoring.pipeline import RunResult


# The JUnit class of the gate's test cases: a name CI dashboards group results by, kept as
# it was when it was a module's name (gating/gate.py is gone) so their history continues.
JUNIT_CLASS = "callgate.gating.gate"

def pct(share: Share) -> str:
    if share.pct is None:
        return "–"
    return f"{share.pct:5.1f}  [{share.low:4.1f}–{share.high:5.1f}]"


def _num(value: float | None, fmt: str = "{:.2f}") -> str:
    return "–" if value is None else fmt.format(value)


def _judged(scores: Scores, dim: str) -> str:
    """A judged share, raw and Rogan–Gladen corrected for the judge's measured errors."""
    share = scores.judged.share(dim) if scores.judged is not None else None
    if share is None:
        return "–"
    raw = _num(share.raw, "{:.1f}")
    # Attempts outside the corrected population: schema/JSON failures the judge never decided.
    beside = (f", +{share.deterministic_failures} schema/JSON failures"
              if share.deterministic_failures else "")
    if share.corrected is None or share.low is None or share.high is None:
        text = f"{raw} (uncorrected: no certificate)" if scores.uncalibrated else raw
        return f"{text} (n={share.n}{beside})"
    return (f"{raw} → {share.corrected:.1f} [{share.low:.1f}–{share.high:.1f}] "
            f"(n={share.n}{beside})")


def run_document(result: RunResult) -> dict[str, Any]:
    """The `--json` document: figures plus every attempt's verdicts and reasons."""
    return {
        "suite": {
            "name": result.suite.name,
            "fingerprint": result.suite.fingerprint,
            "cases": len(result.suite.cases),
        },
        "agent": result.agent or result.model,
        "model": result.model,
        "release": result.release,
        "run_id": result.run_id,
        "scores": result.scores.model_dump(mode="json"),
        "missing_cases": result.missing,
        "attempts": [v.model_dump(mode="json") for v in result.verdicts],
    }


def scores_table(title: str, columns: Sequence[tuple[str, Scores]]) -> Table:
    """Figures side by side, one column per (label, scores)."""
    table = Table(title=escape(title), title_justify="left", show_lines=False)
    table.add_column("figure", style="bold")
    for label, _ in columns:
        table.add_column(escape(label), justify="right")
    rows: list[tuple[str, list[str]]] = [
        ("right tool % [95% CI]", [pct(s.figures.right_tool) for _, s in columns]),
        ("right arguments % [95% CI]", [pct(s.figures.right_arguments) for _, s in columns]),
        ("calls per task", [_num(s.figures.calls_per_task) for _, s in columns]),
        ("scored attempts", [str(s.figures.scored) for _, s in columns]),
        *((f"excluded: {kind.replace('_', ' ')}",
           [str(s.excluded.get(kind, 0)) for _, s in columns]) for kind in COUNTED_APART
          + tuple(k for k in SEEN_APART if any(s.excluded.get(k) for _, s in columns))),
    ]
    ks = sorted({k for _, s in columns for k in s.pass_hat_k})
    rows += [
        (f"pass^{k} (right arguments)", [_num(s.pass_hat_k.get(k), "{:.3f}") for _, s in columns])
        for k in ks
    ]
    if any(s.judged is not None for _, s in columns):
        for dim, label in (("tool_choice", "right tool"), ("arguments", "right arguments")):
            rows.append((f"judged: {label} raw → corrected", [_judged(s, dim) for _, s in columns]))
    rows += [
        (
            "cost USD",
            [
                _num(s.cost_usd, "{:.4f}")
                + (f" (+{s.cost_unknown} unknown)" if s.cost_unknown else "")
                for _, s in columns
            ],
        ),
        ("tokens in / out", [f"{_num(s.prompt_tokens, '{}')} / {_num(s.completion_tokens, '{}')}"
                             for _, s in columns]),
        (
            "latency p50 / p95 ms",
            [
                f"{_num(s.latency_p50_ms, '{:.0f}')} / {_num(s.latency_p95_ms, '{:.0f}')}"
                for _, s in columns
            ],
        ),
        ("cost per right answer USD", [_num(s.cost_per_right_usd, "{:.4f}")
                                       for _, s in columns]),
        ("latency per right answer ms", [_num(s.latency_per_right_ms, "{:.0f}")
                                         for _, s in columns]),
    ]
    for name, cells in rows:
        table.add_row(name, *cells)
    table.caption = clustering_note(columns)
    table.caption_justify = "left"
    return table


def clustering_note(columns: Sequence[tuple[str, Scores]]) -> str | None:
    """Under the figures, when repeats of a case widened their intervals: by how much."""
    notes = []
    for label, s in columns:
        effects = [(name, share.design_effect, share.icc)
                   for name, share in (("right tool", s.figures.right_tool),
                                       ("right arguments", s.figures.right_arguments))]
        effects += [(f"judged {name}", judged.design_effect, judged.icc)
                    for name, dim in (("right tool", "tool_choice"),
                                      ("right arguments", "arguments"))
                    if s.judged is not None and (judged := s.judged.share(dim)) is not None]
        parts = [f"{name} {effect:.2f} (ICC {icc:.2f})" for name, effect, icc in effects
                 if effect > 1 and icc is not None]
        if parts:
            notes.append((f"{escape(label)}: " if len(columns) > 1 else "") + ", ".join(parts))
    if not notes:
        return None
    return ("intervals clustered by case (repeats of a case are not independent), design "
            "effect: " + "; ".join(notes))


def tags_table(columns: Sequence[tuple[str, Scores]]) -> Table:
    table = Table(title="per tag: right tool % / right arguments % (scored)", title_justify="left")
    table.add_column("tag", style="bold")
    for label, _ in columns:
        table.add_column(escape(label), justify="right")
    tags = sorted({t for _, s in columns for t in s.by_tag})
    for tag in tags:
        cells = []
        for _, s in columns:
            fig = s.by_tag.get(tag)
            cells.append(
                "–"
                if fig is None
                else f"{_num(fig.right_tool.pct, '{:.1f}')} / "
                f"{_num(fig.right_arguments.pct, '{:.1f}')} ({fig.scored})"
            )
        table.add_row(escape(tag), *cells)
    return table


def distinct_cases_first(verdicts: Sequence[Verdict]) -> list[Verdict]:
    """Each case's first failed attempt, then its further repeats, each part in the given order:
    twenty repeats of one case must not hide nineteen other cases."""
    seen: set[str] = set()
    first: list[Verdict] = []
    again: list[Verdict] = []
    for v in verdicts:
        (again if v.case_id in seen else first).append(v)
        seen.add(v.case_id)
    return first + again


def failures_table(result: RunResult, limit: int = 20) -> Table:
    shown = distinct_cases_first(result.failures)[:limit]
    cases = len({v.case_id for v in shown})
    """The first failed attempts; at 80 columns the reason keeps half the width: the tool and
    arguments verdicts share one column, one under the other, and no box is drawn."""
    table = Table(title=f"attempts not fully right (first {len(shown)}, {cases} distinct "
                        "case(s), each case's first failure first)", title_justify="left",
                  box=box.SIMPLE_HEAD, show_edge=False)
    table.add_column("case", overflow="fold", max_width=24)
    table.add_column("rep", justify="right")
    table.add_column("tool / arguments", no_wrap=True)
    table.add_column("reason", overflow="fold", ratio=1, min_width=20)
    for v in shown:
        verdicts: str = v.tool or v.status
        if v.arguments and v.arguments != "not_applicable":
            verdicts += f"\n{v.arguments}"
        table.add_row(escape(v.case_id), str(v.repeat), verdicts, escape(v.reason))
    return table


def print_run(result: RunResult, console: Console | None = None) -> None:
    console = console or Console()
    label = f"{agent_label(result.agent or result.model, result.model)} @ {result.release}"
    console.print(scores_table(f"{result.suite.name}: {label}", [(label, result.scores)]))
    console.print(tags_table([(label, result.scores)]))
    for line in bfcl_lines(result):
        console.print(escape(line))
    for line in policy_lines(result.scores):
        console.print(escape(line), highlight=False)
    for kind, share in (result.scores.recovery or {}).items():  # docs/faults.md
        console.print(escape(f"recovery after {kind}: {_share(share)} of {share.n} faulted "
                             "attempts"))
    if result.failures:
        console.print(failures_table(result))
    if result.missing:
        console.print(
            f"[yellow]{len(result.missing)} case(s) had no response: "
            f"{escape(', '.join(result.missing[:10]))}[/yellow]"
        )


def bfcl_lines(result: RunResult) -> list[str]:
    """BFCL's own summary figures, for a suite imported from BFCL (docs/bfcl.md)."""
    from callgate.importers.bfcl import summary, writing

    if not writing.imported_from_bfcl(result.suite.path / "suite.json"):
        return []
    by_tag = {tag: (f.right_arguments.successes, f.right_arguments.n)
              for tag, f in result.scores.by_tag.items()}
    return summary.summary_lines(summary.category_counts(by_tag))


# --------------------------------------------------------------------------- the gate

OUTCOME_WORDS = {
    "pass": "PASS", "first_release": "PASS (first release, recorded)",
    "regression": "FAIL: regression", "inconclusive": "INCONCLUSIVE",
}


def _share(share: Share) -> str:
    return "–" if share.pct is None else f"{share.pct:.1f} [{share.low:.1f}–{share.high:.1f}]"


def _points(value: float | None) -> str:
    return "–" if value is None else f"{value:.1f}"


def _p(value: float | None) -> str:
    return "–" if value is None else f"{value:.3g}"


def gate_lines(decision: GateDecision, fix: bool = True) -> list[str]:
    """The decision and its explanation as plain lines (shared by text and Markdown); `fix`:
    with what to fix first (the Markdown leads with its own)."""
    d = decision
    head = (f"gate {OUTCOME_WORDS[d.outcome]}: {agent_label(d.agent, d.model)} {d.release} on "
            f"{d.suite_name}"
            + (f" vs {d.baseline_release} ({d.baseline_source})" if d.baseline_release else ""))
    lines = [head, *(fix_headline(d) if fix else []), *d.messages]
    if d.baseline_release:
        lines.append(f"paired cases: {d.shared_cases}; excluded attempts now: "
                     f"{d.excluded_share:.1%}")
    if d.added_cases or d.removed_cases:
        lines.append(f"suite changed: {len(d.added_cases)} case(s) added "
                     f"({', '.join(d.added_cases[:10])}), {len(d.removed_cases)} removed "
                     f"({', '.join(d.removed_cases[:10])})")
    lines += [f"warning: {w}" for w in d.warnings]
    return lines


def gate_table(decision: GateDecision) -> Table:
    """One column per figure, one row per measure: fits 80 columns, nothing cut."""
    table = Table(title="figures on the paired cases", title_justify="left")
    table.add_column("", style="bold", overflow="fold")
    for c in decision.checks:
        table.add_column(c.name.replace("_", " "), justify="right", overflow="fold")
    rows = [
        ("baseline % [95% CI]", [_share(c.baseline) for c in decision.checks]),
        ("now % [95% CI]", [_share(c.current) for c in decision.checks]),
        ("change (points)", [("[red]" if c.failed else "") + _points(c.change)
                             for c in decision.checks]),
        ("McNemar p", [_p(c.mcnemar_p) for c in decision.checks]),
        ("p, drop ≤ allowed", [_p(c.p_margin) + ("" if c.gated else " (not gated)")
                               for c in decision.checks]),
        ("cases worse / better", [f"{c.flipped_worse} / {c.flipped_better}"
                                  for c in decision.checks]),
        ("detectable drop, paired", [f"{_points(c.detectable_drop_paired)} pts"
                                     for c in decision.checks]),
        ("detectable drop, unpaired", [f"{_points(c.detectable_drop_unpaired)} pts"
                                       for c in decision.checks]),
    ]
    for name, cells in rows:
        table.add_row(name, *cells)
    return table


def print_gate(decision: GateDecision, console: Console | None = None) -> None:
    console = console or Console()
    style = {"regression": "red", "inconclusive": "yellow"}.get(decision.outcome, "green")
    lines = gate_lines(decision)
    console.print(f"[bold {style}]{escape(lines[0])}[/]", highlight=False)
    for text in lines[1:]:
        console.print(f"  {escape(text)}", highlight=False)
    if decision.checks:
        console.print(gate_table(decision))
    print_fix(decision, console)
    from callgate.report.surface_section import print_surface  # the gate's own, loaded here

    print_surface(decision, console)
    if decision.worse:
        console.print(f"[bold]passed in {escape(decision.baseline_release or '')}, fail now "
                      f"({len(decision.worse)}):[/bold]")
        # a terminal shows the first ones (printing 17,000 lines took seconds); --json, the
        # Markdown summary and the release page list them all
        for change in decision.worse[:TERMINAL_CASES]:
            console.print(f"  [red]-[/red] {escape(change.case_id)}: {escape(change.reason)}",
                          highlight=False)
        if len(decision.worse) > TERMINAL_CASES:
            console.print(f"  ... and {len(decision.worse) - TERMINAL_CASES} more (--json or "
                          "--markdown lists them all)", highlight=False)
    if decision.better:
        shown = ", ".join(c.case_id for c in decision.better[:TERMINAL_CASES])
        more = len(decision.better) - TERMINAL_CASES
        console.print(f"[bold]failed in {escape(decision.baseline_release or '')}, pass now "
                      f"({len(decision.better)}):[/bold] " + escape(shown)
                      + (f" ... and {more} more" if more > 0 else ""), highlight=False)


TERMINAL_CASES = 100


def gate_markdown(decision: GateDecision) -> str:
    """For a CI step summary or a pull-request comment."""
    lines = gate_lines(decision, fix=False)
    out = [f"### callgate: {lines[0]}", "", *fix_markdown_lead(decision)]
    out += [f"- {text}" for text in lines[1:]]
    if decision.checks:
        out += ["", "| figure | baseline % [95% CI] | now % [95% CI] | change (pts) | "
                    "McNemar p | detectable drop, paired (pts) |",
                "|---|---|---|---|---|---|"]
        for c in decision.checks:
            mark = " ❌" if c.failed else ""
            out.append(f"| {c.name.replace('_', ' ')} | {_share(c.baseline)} | "
                       f"{_share(c.current)} | {_points(c.change)}{mark} | {_p(c.mcnemar_p)} | "
                       f"{_points(c.detectable_drop_paired)} |")
    out += fix_markdown(decision)
    from callgate.report.surface_section import surface_markdown  # the gate's own

    out += surface_markdown(decision)
    if decision.worse:
        out += ["", f"**Passed in {decision.baseline_release}, fail now "
                    f"({len(decision.worse)})**", ""]
        out += [f"- `{c.case_id}`: {c.reason}" for c in decision.worse]
    if decision.better:
        out += ["", f"**Failed in {decision.baseline_release}, pass now:** "
                    + ", ".join(f"`{c.case_id}`" for c in decision.better)]
    return "\n".join(out) + "\n"


def gate_junit(decision: GateDecision, current: ReleaseScores) -> str:
    """JUnit XML: one testcase per case (failures carry the verdict reason), plus the gate:
    one testcase per figure checked, an error when the decision is inconclusive, and a failure
    when it is a regression that no figure check shows (an audited estimate fell)."""
    root = ET.Element("testsuites", name="callgate")
    cases = ET.SubElement(root, "testsuite", name=f"{current.suite_name}.cases")
    worse = {c.case_id for c in decision.worse}
    failures = skipped = 0
    for case_id, record in sorted(current.cases.items()):
        element = ET.SubElement(cases, "testcase", name=case_id,
                                classname=f"callgate.{current.suite_name}")
        if record.trials == 0:
            skipped += 1
            ET.SubElement(element, "skipped", message="every attempt was excluded")
        elif not record.passed:
            failures += 1
            label = "regressed: " if case_id in worse else ""
            failure = ET.SubElement(element, "failure", type="tool_call",
                                    message=f"{label}{record.reason}")
            failure.text = (f"{record.right_arguments} of {record.trials} scored attempts fully "
                            f"right; first failure: {record.reason}")
    cases.set("tests", str(len(current.cases)))
    cases.set("failures", str(failures))
    cases.set("skipped", str(skipped))
    gate = ET.SubElement(root, "testsuite", name=f"{current.suite_name}.gate")
    gate_failures = 0
    for check in decision.checks or []:
        element = ET.SubElement(gate, "testcase", name=check.name, classname=JUNIT_CLASS)
        if check.failed:
            gate_failures += 1
            ET.SubElement(element, "failure", type="regression",
                          message=f"{check.name} fell {-(check.change or 0.0):.1f} points, "
                                  f"more than {decision.max_drop:g}")
    gate_failures += fix_junit(gate, decision)
    from callgate.report.surface_section import surface_junit  # the gate's own, loaded here

    surface_junit(gate, decision)
    if decision.outcome == "inconclusive":  # no result: an error, never a passing test
        element = ET.SubElement(gate, "testcase", name="inconclusive",
                                classname=JUNIT_CLASS)
        error = ET.SubElement(element, "error", type="inconclusive",
                              message="; ".join(decision.messages))
        error.text = "\n".join(gate_lines(decision))
    elif decision.outcome == "regression" and not gate_failures:  # e.g. an audited estimate
        gate_failures += 1
        element = ET.SubElement(gate, "testcase", name="regression",
                                classname=JUNIT_CLASS)
        ET.SubElement(element, "failure", type="regression",
                      message="; ".join(decision.messages)).text = "\n".join(
                          gate_lines(decision))
    elif not decision.checks:
        ET.SubElement(gate, "testcase", name="first_release", classname=JUNIT_CLASS)
    gate.set("tests", str(len(gate.findall("testcase"))))
    gate.set("failures", str(gate_failures))
    gate.set("errors", str(int(decision.outcome == "inconclusive")))
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


# --------------------------------------------------------------------------- calibration


def _rate(value: float | None, interval: tuple[float, float] | None) -> str:
    if value is None:
        return "–"
    ci = f" [{interval[0]:.2f}–{interval[1]:.2f}]" if interval else ""
    return f"{value:.3f}{ci}"


def print_calibration(certificate: Certificate, disagreements: Sequence[Disagreement],
                      judged: int, cert_path: Any, console: Console | None = None) -> None:
    from callgate.judging.calibration import kappa_text

    console = console or Console()
    table = Table(title=f"judge {escape(certificate.judge)} on the test split "
                        f"({certificate.test_items} of {certificate.items} items; "
                        f"{judged} judged now, the rest from the cache)", title_justify="left")
    # One column per dimension, one row per measure: fits 80 columns, nothing cut.
    dims = list(certificate.dimensions.items())
    table.add_column("", style="bold", overflow="fold")
    for dim, _ in dims:
        table.add_column(escape(dim), justify="right", overflow="fold")
    measures: list[tuple[str, Callable[[DimensionReport], str]]] = [
        ("TPR [95% CI]", lambda r: _rate(r.tpr, r.tpr_ci)),
        ("TNR [95% CI]", lambda r: _rate(r.tnr, r.tnr_ci)),
        ("accuracy", lambda r: _num(r.accuracy, "{:.3f}")),
        ("Cohen's kappa", lambda r: kappa_text(r.kappa, r.confusion.rated, "{:.3f}")),
        ("TP / FN / TN / FP", lambda r: f"{r.confusion.tp} / {r.confusion.fn} / "
                                        f"{r.confusion.tn} / {r.confusion.fp}"),
        ("judge errors", lambda r: str(r.confusion.judge_error)),
        ("pass / fail items", lambda r: f"{r.m1} / {r.m0}"),
        ("meets thresholds", lambda r: "yes" if r.passed else f"[red]no[/red]: "
                                                               f"{escape(r.why_not or '')}"),
    ]
    for name, cell in measures:
        table.add_row(name, *(cell(r) for _, r in dims))
    console.print(table)
    if disagreements:
        dis = Table(title=f"disagreements ({len(disagreements)}, both splits)",
                    title_justify="left")
        for name in ("item", "split", "dimension", "person", "judge", "judge's reason"):
            dis.add_column(name, overflow="fold")
        for d in disagreements:
            dis.add_row(escape(d.item), d.split, d.dimension, d.person, d.judge, escape(d.reason))
        console.print(dis)
    if certificate.certified:
        console.print(f"[green]certified[/green]: fingerprint {certificate.fingerprint[:12]}; "
                      f"certificate written to {cert_path}", highlight=False)
    else:
        console.print(f"[red]not certified[/red]: {escape(certificate.why_not)}. Fingerprint "
                      f"{certificate.fingerprint[:12]} may not score runs (use --uncalibrated "
                      "to score anyway)", highlight=False)
        if Path(cert_path).is_file():
            console.print(f"{escape(str(cert_path))} now records this failed calibration: the "
                          "earlier certificate is void", highlight=False)
