"""Wording a person reads: the failed attempts shown first are distinct cases."""

from __future__ import annotations

from pathlib import Path

import pytest
from console80 import cli80
from factories import calls, case, line, message, tool_call, write_lines, write_suite


@pytest.mark.slow
def test_failures_show_distinct_cases_before_repeats(tmp_path: Path) -> None:
    ids = ["a-many", "b", "c", "d"]
    root = write_suite(tmp_path / "suite", [
        case(case_id, calls(("lookup_order", {"order_id": "ord_1"}))) for case_id in ids])
    wrong = message(tool_call("lookup_order", {"order_id": "ord_2"}))
    # 60 failed repeats of one case come first: more than the 50 kept and the 20 shown.
    lines = [line("a-many", wrong, repeat=r) for r in range(60)]
    lines += [line(case_id, wrong) for case_id in ids[1:]]
    write_lines(tmp_path / "r.jsonl", lines)
    result = cli80("score", str(root), "-r", "r.jsonl", "-m", "m", "--release", "1", "--db",
                   "c.db", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "first 20, 4 distinct case(s)" in out
    table = out[out.index("attempts not fully right"):]
    body = table.split("─\n", 1)[1].splitlines()  # the lines under the header's rule
    # a wrapped reason continues on lines with no case
    rows = [row.split()[0] for row in body if row[:1] == " " and row[1:2].strip()]
    assert rows[:4] == ids and rows[4:] == ["a-many"] * 16
