"""The gate's "what to fix" (issue 33) for the console, Markdown and JUnit: the slices that
failed the slice rule and the calls that moved first, then the figures per expected tool and
per tag, the confusion table of expected × first-called tool, and the argument keys that went
wrong. Separate from report/console.py's figures and from the tool surface's section."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import TYPE_CHECKING

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

if TYPE_CHECKING:  # types only: `run` imports the report without the gate
    from callgate.gating.confusion import Confusion
    from callgate.gating.decision import GateDecision
    from callgate.gating.slices import SliceFigure, SliceFigures
    from callgate.gating.what_to_fix import WhatToFix

CONSOLE_COLUMNS = 8  # a wider confusion table is left to --json and --markdown
JUNIT_CLASS = "callgate.gate.slices"


def fix_of(decision: GateDecision) -> WhatToFix | None:
    return decision.what_to_fix


def fix_headline(decision: GateDecision) -> list[str]:
    """The lines that lead the explanation: failed slices, then the moved cells."""
    fix = fix_of(decision)
    return [f"what to fix: {line}" for line in fix.headline()] if fix else []


def _num(value: float | None, fmt: str = "{:.1f}") -> str:
    return "–" if value is None else fmt.format(value)


def _change(value: float | None) -> str:
    return "–" if value is None else f"{value:+.1f}"


def _p(figure: SliceFigure) -> str:
    p = figure.holm_p if figure.holm_p is not None else figure.mcnemar_p
    return "–" if p is None else f"{p:.2g}"


def _calls(s: SliceFigures) -> str:
    if s.calls_per_task is None or s.baseline_calls_per_task is None:
        return _num(s.calls_per_task, "{:.2f}")
    return f"{s.calls_per_task:.2f} ({s.calls_per_task - s.baseline_calls_per_task:+.2f})"


def _worse_better(s: SliceFigures) -> str:
    return f"{s.right_arguments.worse}/{s.right_arguments.better}"


def slice_rows(fix: WhatToFix) -> list[list[str]]:
    """Per slice: slice, paired cases, attempts now, right tool now and change and p, right
    arguments now and change and p, calls per task (change), cases worse/better (right
    arguments), the slice rule's verdict."""
    return [[s.label, str(s.cases), str(s.attempts), _num(s.right_tool.current),
             _change(s.right_tool.change), _p(s.right_tool), _num(s.right_arguments.current),
             _change(s.right_arguments.change), _p(s.right_arguments), _calls(s),
             _worse_better(s), s.verdict or ""] for s in fix.slices]


SLICE_HEADERS = ["slice", "cases", "attempts", "right tool %", "change", "p",
                 "right args %", "change", "p", "calls/task", "worse/better", "slice rule"]


def slices_tables(fix: WhatToFix) -> list[Table]:
    """One table per kind of slice (expected tool, tag), narrow enough for 80 columns: the
    name folds, the figures do not (attempts, and the figures then, are in --json)."""
    gated = fix.slice_gate is not None
    tables = []
    for kind, title in (("tool", "per expected tool"), ("tag", "per tag")):
        slices = [s for s in fix.slices if s.kind == kind]
        if not slices:
            continue
        table = Table(title=f"{title}, on the paired cases: % now and change; p: exact "
                            "McNemar" + (", Holm-adjusted where gated" if gated else "")
                            + "; -/+: cases worse / better (right arguments)",
                      title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
        table.add_column(kind, overflow="fold", min_width=14)
        for name in ("cases", "right tool", "p", "right args", "p", "calls", "-/+"):
            table.add_column(name, justify="right", no_wrap=True)
        for s in slices:
            name = s.name + (f" [{s.verdict}]" if s.verdict else "")
            table.add_row(escape(name), str(s.cases), _now_change(s.right_tool), _p(s.right_tool),
                          _now_change(s.right_arguments), _p(s.right_arguments),
                          _num(s.calls_per_task, "{:.2f}"), _worse_better(s),
                          style="red" if s.verdict == "failed" else "")
        tables.append(table)
    return tables


def _now_change(figure: SliceFigure) -> str:
    return f"{_num(figure.current)} {_change(figure.change)}"


def _cell(table: Confusion, expected: str, called: str) -> str:
    for cell in table.cells:
        if cell.expected == expected and cell.called == called:
            return f"{cell.current} ({cell.baseline})" if table.known else str(cell.current)
    return ""


def confusion_rows(table: Confusion) -> list[list[str]]:
    return [[expected, *(_cell(table, expected, called) for called in table.columns)]
            for expected in table.rows]


def confusion_table(table: Confusion) -> Table:
    out = Table(title="expected tool (rows) × tool called first (columns): attempts now "
                      + ("(baseline)" if table.known else "(this release only)"),
                title_justify="left")
    out.add_column("expected", overflow="fold")
    for called in table.columns:
        out.add_column(escape(called), justify="right", overflow="fold")
    for row in confusion_rows(table):
        out.add_row(*map(escape, row))
    return out


def argument_lines(table: Confusion) -> list[str]:
    # A final state's row names the state's path (gating.confusion.FINAL_STATE), not a tool's.
    return [(f"final state at {p.key}: differs in" if p.how == "final state" else
             f"{p.tool}.{p.key}: {p.how} in") + f" {p.current} attempt(s) (baseline {p.baseline})"
            for p in table.arguments]


def print_fix(decision: GateDecision, console: Console) -> None:
    """The figures per slice, the confusion table and the argument problems, on a console."""
    fix = fix_of(decision)
    if fix is None:
        return
    for table_ in slices_tables(fix):
        console.print(table_)
    table = fix.confusion
    if table is not None and table.cells:
        if len(table.columns) <= CONSOLE_COLUMNS:
            console.print(confusion_table(table))
        else:
            console.print(f"confusion table: {len(table.rows)} × {len(table.columns)} (--json "
                          "or --markdown shows it)", highlight=False)
    if table is not None and table.arguments:
        console.print("[bold]argument keys that went wrong most (right tool, per tool):[/bold]")
        for line in argument_lines(table):
            console.print(f"  {escape(line)}", highlight=False)
    for note in fix.notes:
        console.print(f"  note: {escape(note)}", highlight=False)


def _md_row(cells: list[str]) -> str:
    return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"


def fix_markdown_lead(decision: GateDecision) -> list[str]:
    """What a pull request's summary leads with: failed slices and moved calls."""
    fix = fix_of(decision)
    if fix is None or not fix.headline():
        return []
    return ["**What to fix**", "", *(f"- {line}" for line in fix.headline()), ""]


def fix_markdown(decision: GateDecision) -> list[str]:
    """The slice table, the confusion table and the argument problems, in Markdown."""
    fix = fix_of(decision)
    if fix is None:
        return []
    out: list[str] = []
    if fix.slices:
        headers = SLICE_HEADERS if fix.slice_gate else SLICE_HEADERS[:-1]
        out += ["", "**Per expected tool and per tag** (paired cases; p: exact McNemar"
                + (", Holm-adjusted where gated)" if fix.slice_gate else ")"), "",
                _md_row(headers), "|" + "---|" * len(headers)]
        out += [_md_row(row if fix.slice_gate else row[:-1]) for row in slice_rows(fix)]
    table = fix.confusion
    if table is not None and table.cells:
        out += ["", "**Expected tool × tool called first** (attempts now"
                + (" (baseline))" if table.known else ", this release only)"), "",
                _md_row(["expected", *table.columns]), "|" + "---|" * (len(table.columns) + 1)]
        out += [_md_row(row) for row in confusion_rows(table)]
    if table is not None and table.arguments:
        out += ["", "**Argument keys that went wrong most** (right tool)", ""]
        out += [f"- `{line.split(':', 1)[0]}`:{line.split(':', 1)[1]}"
                for line in argument_lines(table)]
    out += [f"- note: {note}" for note in fix.notes]
    return out


def fix_junit(gate: ET.Element, decision: GateDecision) -> int:
    """One testcase per gated slice in the gate's suite (failed: a failure; cannot tell:
    skipped); the failures added."""
    fix = fix_of(decision)
    if fix is None or fix.slice_gate is None:
        return 0
    failures = 0
    for s in fix.slices:
        if not s.gated:
            continue
        element = ET.SubElement(gate, "testcase", name=s.label, classname=JUNIT_CLASS)
        if s.verdict == "failed":
            failures += 1
            ET.SubElement(element, "failure", type="slice_regression",
                          message=f"{s.label}: right tool {_change(s.right_tool.change)}, right "
                                  f"arguments {_change(s.right_arguments.change)} points "
                                  f"(Holm p {_p(s.right_tool)}, {_p(s.right_arguments)}); "
                                  + fix.slice_gate.statement)
        elif s.verdict == "cannot tell":
            ET.SubElement(element, "skipped",
                          message=f"{s.label}: cannot tell: {s.cases} paired cases cannot see "
                                  f"a drop of {decision.max_drop:g} points")
    return failures
