"""The tool surface worded another way (suites/perturb.py): each kind keeps the suite's meaning,
maps names back exactly (a call to a masked name is checked as the original tool, and the
checks of the perturbed suite decide as the clean suite's), is seeded and stable, and refuses a
bad team file with its file and field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from factories import CANCEL_ORDER, LOOKUP_ORDER, TRACK_SHIPMENT, calls, line, message, tool_call

from callgate.checks.check import check
from callgate.errors import InputError
from callgate.suites.perturb import KINDS, Spec, formatted, parse_spec, perturb
from callgate.suites.perturbed import perturbed_suite
from callgate.suites.responses import parse_response
from callgate.suites.suite import Suite, load_suite

SYSTEM = "You help with orders. Use lookup_order to find an order.\nNever cancel_order unasked."
TOOLS = [LOOKUP_ORDER, TRACK_SHIPMENT, CANCEL_ORDER]


def _cases() -> list[dict[str, Any]]:
    def one(case_id: str, expect: dict[str, Any], **extra: Any) -> dict[str, Any]:
        return {"id": case_id, "expect": expect, **extra,
                "messages": [{"role": "system", "content": SYSTEM},
                             {"role": "user", "content": f"[{case_id}] where is ord_1?"}]}

    return [
        one("look", calls(("lookup_order", {"order_id": "ord_1"}))),
        one("track", calls(("track_shipment", {"order_id": "ord_1"}))),
        one("hours", {"type": "no_call"}),
        # offers two tools, one of them under its own other name
        one("only", calls(("cancel_order", {"order_id": "ord_1"})),
            tools=["lookup_order", {"tool": "cancel_order", "name": "cancel"}]),
    ]


@pytest.fixture
def suite(tmp_path: Path) -> Suite:
    root = tmp_path / "suite"
    root.mkdir()
    (root / "tools.json").write_text(json.dumps(TOOLS))
    (root / "cases.jsonl").write_text("".join(json.dumps(c) + "\n" for c in _cases()))
    return load_suite(root)


def _verdict(suite: Suite, case_id: str, name: str | None, args: dict[str, Any]) -> Any:
    response = message(tool_call(name, args)) if name else message(content="Nine to five.")
    return check(suite, parse_response(line(case_id, response)))


def _as(suite: Suite, case_id: str, tool: str | None) -> str | None:
    """The name a case sends a catalogue tool as."""
    return None if tool is None else suite.cases[case_id].sent_names().get(tool, tool)


def _sent(suite: Suite, case_id: str) -> list[str]:
    return [t["function"]["name"] for t in suite.offered_tools(suite.cases[case_id])]


def test_mask_names_offers_opaque_names_and_maps_calls_back_exactly(suite: Suite) -> None:
    masked, variant = perturbed_suite(suite, Spec("mask-names", seed=4))
    assert sorted(variant.renamed.values()) == ["tool_1", "tool_2", "tool_3"]
    assert {variant.called_as[sent]: sent for sent in variant.called_as} == variant.renamed
    assert sorted(_sent(masked, "look")) == ["tool_1", "tool_2", "tool_3"]
    assert _sent(masked, "only") == [variant.renamed["lookup_order"],
                                     variant.renamed["cancel_order"]]
    for case_id, tool in (("look", "lookup_order"), ("track", "track_shipment"),
                          ("only", "cancel_order")):
        args = {"order_id": "ord_1", **({"reason": "other"} if tool == "cancel_order" else {})}
        right = _verdict(masked, case_id, variant.renamed[tool], args)
        assert right.right_arguments, case_id
        assert right.first_tool == tool  # counted under the catalogue's name
        # the original name is no longer offered: calling it is not the right tool
        assert not _verdict(masked, case_id, tool, args).right_tool
    wrong = _verdict(masked, "look", variant.renamed["track_shipment"], {"order_id": "ord_1"})
    assert wrong.tool == "wrong_tool"
    assert _verdict(masked, "hours", None, {}).right_tool
    # the names are masked where the model reads them: the system prompt names tools too
    system = masked.raw_cases["look"]["messages"][0]["content"]
    assert "lookup_order" not in system and variant.renamed["lookup_order"] in system
    assert masked.cases["look"].expect == suite.cases["look"].expect  # expectations unchanged


def test_every_kind_checks_as_the_clean_suite_does(suite: Suite, tmp_path: Path) -> None:
    """For each kind, every answer (right, wrong tool, wrong value, no call) gets the same
    verdicts on the perturbed suite, its names translated, as on the clean one."""
    (tmp_path / "names.json").write_text(json.dumps({"lookup_order": "find_order"}))
    (tmp_path / "words.json").write_text(json.dumps(
        {"lookup_order": {"description": "Find one order from its id.",
                          "parameters": {"order_id": "The order's id, ord_ then digits."}}}))
    answers = [("lookup_order", {"order_id": "ord_1"}), ("lookup_order", {"order_id": "ord_9"}),
               ("track_shipment", {"order_id": "ord_1"}), ("cancel_order", {"order_id": 1}),
               ("cancel_order", {"order_id": "ord_1", "reason": "other"}),
               (None, {})]
    for kind in KINDS:
        argument = {"rename": "names.json", "paraphrase": "words.json"}.get(kind)
        other, _ = perturbed_suite(suite, Spec(kind, argument, seed=1), base=tmp_path)
        assert other.fingerprint != suite.fingerprint
        for case_id in suite.cases:
            for name, args in answers:
                clean = _verdict(suite, case_id, _as(suite, case_id, name), args)
                got = _verdict(other, case_id, _as(other, case_id, name), args)
                assert (got.tool, got.arguments, got.right_tool, got.right_arguments) == (
                    clean.tool, clean.arguments, clean.right_tool, clean.right_arguments), (
                    kind, case_id, name, args)


def test_each_kind_is_seeded_and_stable(suite: Suite, tmp_path: Path) -> None:
    raw = {case_id: suite.raw_cases[case_id] for case_id in suite.cases}
    for kind in ("mask-names", "reorder-params", "reorder-tools", "distractor", "prompt-format"):
        first = perturb(Spec(kind, seed=7), suite.raw_tools, raw)
        again = perturb(Spec(kind, seed=7), suite.raw_tools, raw)
        assert json.dumps([first.tools, first.cases]) == json.dumps([again.tools, again.cases])
        assert first.fingerprint == again.fingerprint
        assert first.fingerprint != perturb(Spec(kind, seed=8), suite.raw_tools, raw).fingerprint
    # a seed changes the draw: over a few seeds the masked numbering differs
    numbering = {tuple(sorted(perturb(Spec("mask-names", seed=s), suite.raw_tools, raw)
                              .renamed.items())) for s in range(6)}
    assert len(numbering) > 1


def test_reorders_move_things_and_keep_them(suite: Suite) -> None:
    raw = {case_id: suite.raw_cases[case_id] for case_id in suite.cases}
    params = perturb(Spec("reorder-params", seed=0), suite.raw_tools, raw)
    before = LOOKUP_ORDER["function"]["parameters"]
    after = params.tools[0]["function"]["parameters"]
    assert list(after["properties"]) == list(reversed(before["properties"]))
    assert after["properties"] == before["properties"]  # same schema, other order
    assert params.changed_tools == 2  # track_shipment's one parameter cannot move
    tools = perturb(Spec("reorder-tools", seed=0), suite.raw_tools, raw)
    assert [t["function"]["name"] for t in tools.tools] != [
        t["function"]["name"] for t in suite.raw_tools]
    assert sorted(map(json.dumps, tools.tools)) == sorted(map(json.dumps, suite.raw_tools))


def test_a_distractor_is_a_look_alike_and_calling_it_is_a_wrong_tool(suite: Suite) -> None:
    other, variant = perturbed_suite(suite, Spec("distractor", seed=2))
    near = {copied: name for name, copied in variant.distractors.items()}
    assert set(near) == {"lookup_order", "track_shipment", "cancel_order"}
    assert _sent(other, "look") == ["lookup_order", near["lookup_order"], "track_shipment",
                                    "cancel_order"]
    assert _sent(other, "only") == ["lookup_order", "cancel", near["cancel_order"]]
    copy = next(t for t in other.raw_tools if t["function"]["name"] == near["lookup_order"])
    assert copy["function"]["parameters"] == LOOKUP_ORDER["function"]["parameters"]
    assert copy["function"]["description"].startswith(LOOKUP_ORDER["function"]["description"])
    hit = _verdict(other, "look", near["lookup_order"], {"order_id": "ord_1"})
    assert hit.tool == "wrong_tool" and hit.first_tool == near["lookup_order"]


def test_prompt_formats_keep_the_words() -> None:
    for style in ("markdown", "xml", "plain", "json"):
        text = formatted(SYSTEM, style)
        assert text != SYSTEM
        words = [w.strip('"{}:-#').lower() for w in text.split()]
        assert all(w.lower() in " ".join(words) for w in ("lookup_order", "never", "unasked."))
    assert formatted(SYSTEM, "markdown").splitlines()[2:] == [
        "- You help with orders. Use lookup_order to find an order.",
        "- Never cancel_order unasked."]


def test_bad_team_files_and_specs_are_refused_with_file_and_field(suite: Suite,
                                                                  tmp_path: Path) -> None:
    raw = {case_id: suite.raw_cases[case_id] for case_id in suite.cases}
    bad = {"names.json": {"lookup_orders": "x"}, "clash.json": {"lookup_order": "cancel_order"},
           "ugly.json": {"lookup_order": "find order"}}
    for name, content in bad.items():
        (tmp_path / name).write_text(json.dumps(content))
        with pytest.raises(InputError) as refused:
            perturb(Spec("rename", name), suite.raw_tools, raw, tmp_path)
        assert str(refused.value).startswith(f"{tmp_path / name}: lookup_order"), name
    (tmp_path / "words.json").write_text(json.dumps({"lookup_order": {"parameters": {"id": "x"}}}))
    with pytest.raises(InputError, match=r"words.json: lookup_order.parameters.id: not a param"):
        perturb(Spec("paraphrase", "words.json"), suite.raw_tools, raw, tmp_path)
    with pytest.raises(InputError, match="file not found"):
        perturb(Spec("paraphrase", "gone.json"), suite.raw_tools, raw, tmp_path)
    for text, said in (("shuffle", "unknown kind"), ("rename", "needs the team's file"),
                       ("prompt-format=yaml", "markdown, xml"), ("mask-names=x", "no argument")):
        with pytest.raises(ValueError, match=said):
            parse_spec(text)
    one = {"hours": raw["hours"]}
    with pytest.raises(ValueError, match="changes nothing"):
        perturb(Spec("reorder-params"), [TRACK_SHIPMENT], one)


def test_the_fingerprint_follows_the_file_content(suite: Suite, tmp_path: Path) -> None:
    raw = {case_id: suite.raw_cases[case_id] for case_id in suite.cases}
    path = tmp_path / "words.json"
    path.write_text(json.dumps({"lookup_order": "Find an order."}))
    first = perturb(Spec("paraphrase", str(path)), suite.raw_tools, raw)
    assert first.tools[0]["function"]["description"] == "Find an order."
    path.write_text(json.dumps({"lookup_order": "Find one order."}))
    assert perturb(Spec("paraphrase", str(path)), suite.raw_tools, raw).fingerprint != (
        first.fingerprint)
