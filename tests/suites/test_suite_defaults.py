"""suite.json's shared `system` message and default `tools`: applied to every case without its
own, kept in the fingerprint, refused with the field named, and sent over the wire."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from conftest import KEY_ENV, lookup_case, no_call_case
from conftest import write_suite as write_cli_suite
from factories import calls, case, write_suite
from loopback import Loopback

from callgate.errors import InputError
from callgate.suites.case_table import CaseTable
from callgate.suites.suite import load_suite

PROMPT = "You are the order desk of Acme. Use a tool when one fits."
OWN = {"role": "system", "content": "The case's own prompt."}


def with_meta(root: Path, meta: dict[str, Any]) -> Path:
    (root / "suite.json").write_text(json.dumps(meta))
    return root


def cases() -> list[dict[str, Any]]:
    return [
        case("plain", calls(("lookup_order", {"order_id": "ord_1"}))),
        {**case("own", calls(("lookup_order", {"order_id": "ord_2"}))),
         "messages": [OWN, {"role": "user", "content": "where is ord_2?"}]},
        {**case("dev", {"type": "no_call"}),
         "messages": [{"role": "developer", "content": "dev"}, {"role": "user", "content": "hi"}]},
        case("tracked", calls(("track_shipment", {"order_id": "ord_3"})),
             tools=["track_shipment"]),
    ]


def test_the_shared_system_message_goes_first_in_every_case_without_one(tmp_path: Path) -> None:
    suite = load_suite(with_meta(write_suite(tmp_path / "s", cases()), {"system": PROMPT}))
    plain = suite.raw_cases["plain"]["messages"]
    assert plain[0] == {"role": "system", "content": PROMPT} and plain[1]["role"] == "user"
    assert suite.cases["plain"].messages[0].role == "system"
    assert suite.raw_cases["own"]["messages"][0] == OWN  # its own prompt, not the suite's
    assert len(suite.raw_cases["own"]["messages"]) == 2
    assert suite.raw_cases["dev"]["messages"][0]["content"] == "dev"
    assert suite.defaults is not None and suite.defaults.system is not None


def test_a_system_message_object_is_taken_as_it_is(tmp_path: Path) -> None:
    message = {"role": "developer", "content": PROMPT, "name": "desk"}
    suite = load_suite(with_meta(write_suite(tmp_path / "s", cases()), {"system": message}))
    assert suite.raw_cases["plain"]["messages"][0] == message


def test_default_tools_are_offered_to_every_case_without_its_own(tmp_path: Path) -> None:
    suite = load_suite(with_meta(write_suite(tmp_path / "s", cases()),
                                 {"tools": ["lookup_order", "cancel_order"]}))
    offered = [t["function"]["name"] for t in suite.offered_tools(suite.cases["plain"])]
    assert offered == ["lookup_order", "cancel_order"]
    assert suite.raw_cases["plain"]["tools"] == ["lookup_order", "cancel_order"]
    own = [t["function"]["name"] for t in suite.offered_tools(suite.cases["tracked"])]
    assert own == ["track_shipment"]


def test_an_expected_tool_the_default_tools_leave_out_is_refused_on_the_case(
        tmp_path: Path) -> None:
    root = with_meta(write_suite(tmp_path / "s", cases()), {"tools": ["cancel_order"]})
    with pytest.raises(InputError) as info:
        load_suite(root)
    assert info.value.path.endswith("cases.jsonl") and info.value.line == 1
    assert "'lookup_order' is expected but not offered in this case" in str(info.value)


def test_the_fingerprint_covers_the_shared_prompt_and_tools(tmp_path: Path) -> None:
    bare = load_suite(write_suite(tmp_path / "a", cases())).fingerprint
    prompted = load_suite(with_meta(write_suite(tmp_path / "b", cases()),
                                    {"system": PROMPT})).fingerprint
    again = load_suite(with_meta(write_suite(tmp_path / "c", cases()),
                                 {"system": PROMPT})).fingerprint
    other = load_suite(with_meta(write_suite(tmp_path / "d", cases()),
                                 {"system": PROMPT + "!"})).fingerprint
    tooled = load_suite(with_meta(write_suite(tmp_path / "e", cases()),
                                  {"tools": ["lookup_order", "track_shipment"]})).fingerprint
    assert prompted == again
    assert len({bare, prompted, other, tooled}) == 4


def test_a_case_built_again_still_carries_the_shared_prompt(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(CaseTable, "CACHE", 1)
    suite = load_suite(with_meta(write_suite(tmp_path / "s", cases()), {"system": PROMPT}))
    assert suite.cases["own"].messages[0].content == OWN["content"]  # type: ignore[attr-defined]
    rebuilt = suite.cases["plain"]  # evicted by the line above, built from its text again
    assert [m.role for m in rebuilt.messages] == ["system", "user"]


@pytest.mark.parametrize(("meta", "field", "words"), [
    ({"system": ""}, "system", "non-empty string"),
    ({"system": 5}, "system", "must be a JSON object"),
    ({"system": {"role": "user", "content": "x"}}, "system", "role system or developer"),
    ({"tools": "lookup_order"}, "tools", "list"),
    ({"tools": ["nope"]}, "tools[0]", "unknown tool 'nope'"),
    ({"tools": ["lookup_order", {"tool": "cancel_order", "name": "lookup_order"}]}, "tools[1]",
     "two tools offered as 'lookup_order'"),
    ({"sytem": PROMPT}, "sytem", "did you mean 'system'?"),
])
def test_a_bad_shared_prompt_or_tool_list_names_the_field(tmp_path: Path, meta: dict,
                                                          field: str, words: str) -> None:
    with pytest.raises(InputError) as info:
        load_suite(with_meta(write_suite(tmp_path / "s", cases()), meta))
    assert info.value.path.endswith("suite.json")
    assert info.value.field == field and words in str(info.value), str(info.value)


@pytest.mark.slow
def test_the_shared_prompt_is_what_the_model_is_sent(
        loopback: Loopback, tmp_path: Path, callgate_exe: str, cli_env: dict[str, str]) -> None:
    root = write_cli_suite(tmp_path / "suite", [lookup_case("own"), no_call_case("plain")])
    with_meta(root, {"system": PROMPT})
    done = subprocess.run(
        [callgate_exe, "run", str(root), "-m", "openai/local-model", "--api-base",
         loopback.base_url, "--api-key-env", KEY_ENV, "--no-cache", "--db", "c.db", "--json"],
        env=cli_env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode in (0, 1), done.stderr
    sent = {seen.marker.split(" ")[0]: seen.body["messages"] for seen in loopback.requests}
    assert sent["[plain]"][0] == {"role": "system", "content": PROMPT}
    assert sent["[own]"][0] == {"role": "system", "content": "You help with orders."}
    assert len(sent["[own]"]) == 2
