"""The kind of answer a no-call case needs (issue 37, point 1, its deterministic part): the
suite format takes `"answer": "ask" | "cannot" | "answer" | "any"`, a call is never any of
them, and the unwarranted-call rate (attempts of no-call cases that called a tool) is a figure
of the scores, kept with the release."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from factories import calls, case, line, message, tool_call, write_lines, write_suite
from multiturn import score

from callgate.errors import InputError
from callgate.gating.release import gate_release
from callgate.scoring.pipeline import score_file
from callgate.store.db import Store
from callgate.suites.suite import load_suite

LOOKUP = calls(("lookup_order", {"order_id": "ord_1"}))


def no_call(kind: str | None = None) -> dict[str, Any]:
    return {"type": "no_call"} if kind is None else {"type": "no_call", "answer": kind}


def text(case_id: str, content: str, repeat: int = 0) -> dict[str, Any]:
    return line(case_id, {"role": "assistant", "content": content}, repeat=repeat,
                finish_reason="stop")


def called(case_id: str, repeat: int = 0) -> dict[str, Any]:
    return line(case_id, message(tool_call("lookup_order", {"order_id": "ord_1"})),
                repeat=repeat)


@pytest.mark.parametrize("kind", ["ask", "cannot", "answer", "any"])
def test_every_kind_is_accepted_and_a_call_is_never_one_of_them(tmp_path: Path,
                                                                 kind: str) -> None:
    suite = load_suite(write_suite(tmp_path / "s", [case("n", no_call(kind))]))
    assert suite.cases["n"].expect.answer == kind  # type: ignore[union-attr]
    result = score(tmp_path, suite, [called("n"), text("n", "Which order?", repeat=1)])
    made, answered = sorted(result.verdicts, key=lambda v: v.repeat)
    assert made.tool == "unexpected_call" and not made.right_tool
    assert answered.right_tool and answered.right_arguments  # its kind is not decided here
    if kind == "ask":
        assert made.tool_reason == ("no call was expected (a follow-up question: answer "
                                    "'ask'); called lookup_order")
    if kind == "any":
        assert made.tool_reason == "no call was expected; called lookup_order"


def test_an_unknown_kind_is_refused_naming_line_and_field(tmp_path: Path) -> None:
    root = write_suite(tmp_path / "s", [case("a", LOOKUP), case("n", no_call("refuse"))])
    with pytest.raises(InputError) as raised:
        load_suite(root)
    assert raised.value.line == 2 and raised.value.field is not None
    assert raised.value.field.endswith("answer")


def test_the_unwarranted_call_rate_counts_no_call_cases_only(tmp_path: Path) -> None:
    root = write_suite(tmp_path / "s", [case("n1", no_call("ask")), case("n2", no_call()),
                                        case("c", LOOKUP)])
    suite = load_suite(root)
    lines = [called("n1"), text("n1", "Which order?", repeat=1), text("n2", "Hello!"),
             text("n2", "Hi!", repeat=1), called("c"), called("c", repeat=1)]
    path = write_lines(tmp_path / "r.jsonl", lines)
    with Store(tmp_path / "c.db") as store:
        result = score_file(suite, path, store, model="m", release="r1")
        _, kept = gate_release(store, "m", "r1", suite=suite.name)
    rate = result.scores.unwarranted_calls
    assert rate is not None and (rate.successes, rate.n, rate.pct) == (1, 4, 25.0)
    assert kept.unwarranted_calls == rate  # kept with the release
    assert json.loads(kept.to_json())["unwarranted_calls"]["pct"] == 25.0


def test_a_suite_without_no_call_cases_has_no_unwarranted_call_rate(tmp_path: Path) -> None:
    result = score(tmp_path, load_suite(write_suite(tmp_path / "s", [case("c", LOOKUP)])),
                   [called("c")])
    assert result.scores.unwarranted_calls is None
