"""Recorded answers that would be misread in silence are refused (issue 32, point 9): a Gemini part
of a kind the reader does not know, a repeat that is not an integer, a field given twice in one
line, an error kind callgate does not know. Each is one line naming file, line and field, exit 2,
and nothing is stored."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import factories
import pytest
from factories import calls, case, message, write_lines, write_suite
from typer.testing import CliRunner

from callgate.cli.main import app
from callgate.errors import InputError
from callgate.suites.responses import ERROR_KINDS, read_response_lines, read_responses

GOOD = {"role": "assistant", "content": None, "tool_calls": [
    {"id": "c1", "type": "function",
     "function": {"name": "lookup_order", "arguments": '{"order_id": "ord_1"}'}}]}
FIRST = json.dumps({"case_id": "ord", "response": GOOD})


def _gemini(part: dict[str, Any]) -> str:
    return json.dumps({"case_id": "ord", "repeat": 1, "response": {"candidates": [{
        "content": {"role": "model", "parts": [{"text": "Looking it up."}, part]},
        "finishReason": "STOP"}]}})


REFUSED = [
    (_gemini({"toolCall": {"name": "lookup_order", "args": {"order_id": "ord_1"}}}),
     "response.candidates[0].content.parts[1].toolCall: not a kind of Gemini part"),
    (_gemini({"functionCalls": [{"name": "lookup_order"}]}),
     "response.candidates[0].content.parts[1].functionCalls: not a kind of Gemini part"),
    ('{"case_id": "ord", "repeat": "0", "response": {"role": "assistant", "content": "x"}}',
     "repeat: "),
    ('{"case_id": "ord", "repeat": true, "response": {"role": "assistant", "content": "x"}}',
     "repeat: "),
    ('{"case_id": "ord", "repeat": 1.0, "response": {"role": "assistant", "content": "x"}}',
     "repeat: "),
    ('{"case_id": "nope", "case_id": "ord", "repeat": 1, "response": {"role": "assistant"}}',
     "case_id: given twice in one line"),
    ('{"case_id": "ord", "case\\u005fid": "x", "repeat": 1, "response": {"role": "assistant"}}',
     "case_id: given twice in one line"),
    (f'{{"case_id": "ord", "repeat": 1, "response": {json.dumps(GOOD)}, '
     '"response": {"role": "assistant", "content": "no"}}',
     "response: given twice in one line"),
    ('{"case_id": "ord", "repeat": 1, "error": {"kind": "bogus", "message": "x"}}',
     "error.kind: "),
]


@pytest.mark.parametrize(("line", "named"), REFUSED, ids=range(len(REFUSED)))
def test_a_line_that_would_be_misread_is_refused(tmp_path: Path, line: str, named: str) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text(FIRST + "\n" + line + "\n")
    with pytest.raises(InputError) as raised:
        list(read_responses(path))
    assert raised.value.line == 2, str(raised.value)
    assert str(raised.value).startswith(f"{path}:2: {named}"), str(raised.value)


def test_score_refuses_with_one_line_and_stores_nothing(tmp_path: Path) -> None:
    suite = write_suite(tmp_path / "suite", [case("ord", calls(("lookup_order", {})))])
    for line, named in REFUSED:
        responses = tmp_path / "r.jsonl"
        responses.write_text(FIRST + "\n" + line + "\n")
        result = CliRunner().invoke(app, ["score", str(suite), "-r", str(responses), "-m", "m",
                                          "--release", "1", "--db", str(tmp_path / "c.db")])
        assert result.exit_code == 2, result.output
        lines = result.output.strip().splitlines()
        assert len(lines) == 1 and f"r.jsonl:2: {named}" in lines[0], result.output
    assert not (tmp_path / "c.db").exists() or _runs(tmp_path / "c.db") == 0


def _runs(db: Path) -> int:
    import sqlite3

    with sqlite3.connect(db) as conn:
        return int(conn.execute("select count(*) from runs").fetchone()[0])


def test_what_is_right_is_still_read(tmp_path: Path) -> None:
    """Known part kinds, the same text twice inside a value, a key escaped once, every error
    kind callgate records: read as before."""
    lines = [_gemini({"text": "more", "thoughtSignature": "abc"}),
             json.dumps({"case_id": "ord", "repeat": 2, "response": {
                 "role": "assistant", "content": '"case_id": "x", "case_id": "y"'}}),
             '{"case\\u005fid": "ord", "repeat": 3, "response": {"role": "assistant"}}',
             *(json.dumps({"case_id": "ord", "repeat": 4 + i, "error": {"kind": kind}})
               for i, kind in enumerate(sorted(ERROR_KINDS)))]
    path = tmp_path / "r.jsonl"
    path.write_text("\n".join([FIRST, *lines]) + "\n")
    read = list(read_responses(path))
    assert [r.repeat for r in read] == [0, 1, 2, 3, *range(4, 4 + len(ERROR_KINDS))]
    assert read[1].message is not None and read[1].message.content == "Looking it up.more"
    assert read[2].message is not None and read[2].message.content is not None


def test_every_kind_a_run_records_is_known() -> None:
    from callgate.models.replies import FATAL, RETRYABLE, classify_status
    from callgate.running.targets.session import TARGET_ERROR

    kinds = {*RETRYABLE, *FATAL, TARGET_ERROR, "refused",
             *(classify_status(status) for status in range(400, 600))}
    assert kinds <= ERROR_KINDS


class _OnlyLookups(Mapping[str, Any]):
    """The cases with user turns as scoring hands them over: built one at a time when looked
    up. Sizing or walking it would build every case of the suite, once per line."""

    def __getitem__(self, case_id: str) -> Any:
        raise KeyError(case_id)

    def __iter__(self) -> Iterator[str]:
        raise AssertionError("the reader walked every case")

    def __len__(self) -> int:
        raise AssertionError("the reader sized the mapping (built every case)")


def test_the_reader_looks_up_the_cases_with_user_turns_and_never_walks_them(
        tmp_path: Path) -> None:
    """Regression: `user_turns or {}` called len() on the lazy mapping for every line, which
    built all cases each time (1,400 cases: 60 s instead of 0.1 s)."""
    path = write_lines(tmp_path / "r.jsonl",
                       [factories.line(f"c{i}", message(content="hi")) for i in range(3)])
    read = list(read_response_lines(path, user_turns=_OnlyLookups()))
    assert [response.case_id for response, _ in read] == ["c0", "c1", "c2"]
