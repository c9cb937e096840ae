"""BFCL entries and possible answers as callgate cases, and one category as a suite's files.

Line references are to bfcl-eval 2026.3.23 (Apache-2.0): `ast_checker.py` is
bfcl_eval/eval_checker/ast_eval/ast_checker.py, `handler utils` is
bfcl_eval/model_handler/utils.py. docs/bfcl.md states every mapping decision.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from callgate.checks.bfcl_types import READ_AS_TEXT
from callgate.errors import InputError
from callgate.importers.bfcl.multi_turn import case_state, environment_spec
from callgate.importers.bfcl.records import (
    ALL_CATEGORIES,
    BfclAnswer,
    BfclEntry,
    BfclFunction,
    CategoryData,
    language_of,
)
from callgate.importers.bfcl.tools import (
    Catalogue,
    build_catalogue,
    convert_function,
    openai_name,
    source_types,
)
from callgate.reading import canonical_json

# The rules an imported suite carries so that callgate's verdicts equal BFCL's (docs/bfcl.md).
MATCH_RULES: dict[str, str] = {
    "values": "bfcl",
    "unlisted_args": "reject",
    "pairing": "first_fit",
    "schema": "top_level",
}


def match_rules(types: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """suite.json's `match`: BFCL's rules, and the Java and JavaScript types of each tool that
    has them (the model is sent those parameters as strings; docs/bfcl.md)."""
    rules: dict[str, Any] = dict(MATCH_RULES)
    if types:
        rules["source_types"] = dict(sorted(types.items()))
    return rules


@dataclass(frozen=True)
class NeverRight:
    """A case BFCL's own checker can never pass: imported, marked, and always wrong."""

    id: str
    reason: str


def _never_as_text(values: Sequence[Any], source: Mapping[str, str]) -> bool:
    """Whether no possible answer can come out of BFCL's converter for this parameter, which
    yields text (or, for a list, the text given or a list of texts): no answer is text, nor
    a list of texts. Only these certain cases are found; "" (left out) is not a value."""
    as_text = READ_AS_TEXT[source["language"]]
    if source["type"] not in as_text and source.get("items") not in as_text:
        return False
    texts = source["type"] not in as_text  # a list of texts, where the items are text
    return not any(
        type(v) is str or (texts and type(v) is list and all(type(i) is str for i in v))
        for v in values if v != "")


def _as_text_reason(source: Mapping[str, str]) -> str:
    kind = source["type"] + (f" of {source['items']}" if "items" in source else "")
    return (f"BFCL's {source['language']} converter reads a {kind} as text (or a list of "
            "texts), and no possible answer is one")


def _expected_call(
    fn_name: str,
    answer: Mapping[str, Any],
    doc: BfclFunction,
    tool: str,
    sources: Mapping[str, Mapping[str, str]],
) -> tuple[dict[str, Any], str | None]:
    """A callgate expected call from one BFCL ground-truth call, and why BFCL never passes it
    (if it never does: then the call keeps what can be expressed of the answer). `sources`
    holds the Java or JavaScript types of the doc's parameters (`source_types`)."""
    properties = doc.parameters.get("properties", {})
    required = doc.parameters.get("required", [])
    why: str | None = None
    for name in required:
        if name not in answer:
            # Required, so it must be given; not in the answer, so giving it is rejected.
            why = why or f"{fn_name}: required parameter {name!r} has no possible answer"
    args: dict[str, Any] = {}
    for param, values in answer.items():
        if not isinstance(values, list):
            raise ValueError(f"{fn_name}.{param}: a possible answer must be a list")
        optional = "" in values
        if param not in properties:
            if not optional:
                why = why or f"{fn_name}: {param!r} must be given but is not a parameter of the doc"
            continue  # may be left out, and giving it is an unknown parameter: same verdicts
        if not values:
            why = why or f"{fn_name}.{param}: the possible-answer list is empty"
            continue
        if (not optional or param in required) and param in sources and _never_as_text(
                values, sources[param]):
            why = why or f"{fn_name}.{param}: {_as_text_reason(sources[param])}"
        accepted = [v for v in values if v != ""] or [""]
        spec: dict[str, Any] = {"one_of": accepted}
        if optional:
            spec["optional"] = True
        args[param] = spec
    return {"tool": tool, "args": args}, why


def offered_tools(tool_names: Mapping[str, str]) -> list[str | dict[str, str]]:
    """A case's `tools`: each doc under the name BFCL sends, whatever its catalogue key."""
    return [
        key if key == openai_name(name) else {"tool": key, "name": openai_name(name)}
        for name, key in tool_names.items()
    ]


def convert_entry(
    category: str,
    entry: BfclEntry,
    answer: BfclAnswer | None,
    tool_names: Mapping[str, str],
) -> tuple[dict[str, Any], NeverRight | None]:
    """One BFCL entry as a callgate case (a JSON object for cases.jsonl), and whether BFCL's
    checker can never pass it."""
    kind = ALL_CATEGORIES[category]
    if kind == "multi_turn":
        raise InputError(entry.id, "a multi-turn entry is converted by multi_turn_case")
    if len(entry.question) != 1:
        raise InputError(entry.id, "multi-turn entries are not supported")
    # The category is the tag its figures are read under; no generic `parallel` tag, which
    # would pool four categories under the name of one.
    tags = [category]
    if category.startswith("live_"):
        tags.append("live")
    expect: dict[str, Any]
    never: str | None = None
    if kind == "irrelevance":
        tags.append("no-tool")
        expect = {"type": "no_call"}
    elif kind == "relevance":
        expect = {"type": "any_call"}
    else:
        assert answer is not None
        docs = {f.name: f for f in entry.function}
        calls = []
        for ground in answer.ground_truth:
            if len(ground) != 1:
                raise InputError(entry.id, "each ground-truth call must name one function")
            ((fn_name, params),) = ground.items()
            if fn_name not in docs:
                raise InputError(entry.id, f"ground truth calls {fn_name!r}, which is not offered")
            call, why = _expected_call(fn_name, params, docs[fn_name], tool_names[fn_name],
                                       source_types(docs[fn_name], language_of(category)))
            never = never or why
            calls.append(call)
        # ast_checker.py:41-61: "parallel" categories match in any order, others one call.
        mode = "unordered" if "parallel" in category else "strict"
        expect = {"type": "calls", "mode": mode, "calls": calls}
    case: dict[str, Any] = {
        "id": entry.id,
        "messages": entry.question[0],
        "tools": offered_tools(tool_names),
        "tags": tags,
        "expect": expect,
    }
    if never is None:
        return case, None
    case["never_right"] = f"BFCL's possible answer cannot be met ({never})"
    return case, NeverRight(entry.id, never)


def held_docs(data: CategoryData, entry_id: str) -> list[BfclFunction]:
    """A multi-turn entry's held-back docs (miss_func), in turn order."""
    held = data.multi_turn.held_out.get(entry_id, {}) if data.multi_turn else {}
    return [BfclFunction.model_validate(doc) for turn in sorted(held) for doc in held[turn]]


# BFCL's step limit per turn is 20 (bfcl_eval/constants/default_prompts.py, MAXIMUM_STEP_LIMIT),
# counted after each step with calls: a 21st reply that still calls is forced to quit.
MULTI_TURN_MAX_TURNS = 21


def multi_turn_case(data: CategoryData, entry: BfclEntry, tool_names: Mapping[str, str],
                    held_keys: Sequence[str]) -> dict[str, Any]:
    """A multi-turn entry as a case: BFCL's first turn as `messages`, the later ones as
    `user_turns` (a turn that only adds functions gets BFCL's prompt for it), the docs held
    back added at their turn, and BFCL's ground truth to check against."""
    extra = data.multi_turn
    assert extra is not None
    raw = entry.model_dump()
    ground = extra.answers[entry.id].ground_truth
    if len(ground) != len(entry.question):
        raise InputError(entry.id, f"{len(entry.question)} turns but {len(ground)} in the "
                         "ground truth")
    held = extra.held_out.get(entry.id, {})
    keys = iter(held_keys)
    added = {turn: [key if key == doc["name"] else {"tool": key, "name": doc["name"]}
                    for doc, key in zip(docs, keys, strict=False)]
             for turn, docs in sorted(held.items())}
    if 0 in added:
        raise InputError(entry.id, "missed_function holds back docs at turn 0")
    later = [{"messages": turn or [{"role": "user", "content": extra.added_turn_prompt}],
              **({"add_tools": added[index]} if index in added else {})}
             for index, turn in enumerate(entry.question) if index > 0]
    if not entry.question[0]:
        raise InputError(entry.id, "the first turn has no message")
    case: dict[str, Any] = {
        "id": entry.id,
        "messages": entry.question[0],
        "tools": offered_tools(tool_names),
        "tags": [data.category, "multi_turn"],
        "state": case_state(data.category, raw),
        "max_turns": MULTI_TURN_MAX_TURNS,
        "expect": {"type": "bfcl_multi_turn", "ground_truth": ground},
    }
    if later:
        case["user_turns"] = later
    return case


@dataclass(frozen=True)
class Converted:
    tools: list[dict[str, Any]]  # tools.json
    cases: list[dict[str, Any]]  # cases.jsonl, one object a line
    meta: dict[str, Any]  # suite.json
    catalogue: Catalogue
    never_right: list[NeverRight]


def suite_name(categories: Sequence[str]) -> str:
    return f"bfcl-{categories[0]}" if len(categories) == 1 else "bfcl"


def convert_categories(datas: Sequence[CategoryData]) -> Converted:
    """Tools, cases and suite.json for one or more categories, in one catalogue. Pure: nothing
    is written."""
    entries = [(data, entry) for data in datas for entry in data.entries]
    per_entry: list[list[dict[str, Any]]] = []
    for data, entry in entries:
        language = language_of(data.category)
        converted = [convert_function(f, entry.id, language) for f in entry.function]
        converted += [convert_function(f, entry.id, language, hint=False)
                      for f in held_docs(data, entry.id)]
        names = [tool["function"]["name"] for tool in converted]
        if len(set(names)) != len(names):
            raise InputError(entry.id, "two functions share one name once '.' becomes '_'")
        per_entry.append(converted)
    catalogue = build_catalogue(per_entry)
    cases: list[dict[str, Any]] = []
    never_right: list[NeverRight] = []
    seen: set[str] = set()
    types: dict[str, dict[str, dict[str, str]]] = {}
    for (data, entry), converted in zip(entries, per_entry, strict=True):
        if entry.id in seen:
            raise InputError(data.origin, f"case id {entry.id!r} occurs twice")
        seen.add(entry.id)
        tool_names = {
            f.name: catalogue.names[canonical_json(tool)]
            for f, tool in zip(entry.function, converted, strict=False)
        }
        for function in entry.function:
            declared = source_types(function, language_of(data.category))
            if declared:
                # The sent doc names each type in words, so one doc has one set of types.
                types[tool_names[function.name]] = declared
        try:
            if data.multi_turn is not None:
                held = [catalogue.names[canonical_json(tool)]
                        for tool in converted[len(entry.function):]]
                case, never = multi_turn_case(data, entry, tool_names, held), None
            else:
                case, never = convert_entry(
                    data.category, entry, data.answers.get(entry.id), tool_names
                )
        except ValueError as exc:
            raise InputError(entry.id, str(exc)) from None
        if never is not None:
            never_right.append(never)
        cases.append(case)
    categories = [data.category for data in datas]
    wheels = {(d.multi_turn.wheel, d.multi_turn.sha256) for d in datas if d.multi_turn}
    meta: dict[str, Any] = {
        "name": suite_name(categories),
        "description": "Berkeley Function Calling Leaderboard, categories "
        f"{', '.join(categories)}, imported by callgate (see docs/bfcl.md).",
        "match": match_rules(types),
        "source": {
            "benchmark": "bfcl",
            "categories": categories,
            "package_version": datas[0].version,
            "files": [data.origin for data in datas],
            "license": "Apache-2.0",
            # Listed again here for people; each case carries its own `never_right`.
            "never_right": [{"id": n.id, "reason": n.reason} for n in never_right],
        },
    }
    if wheels:  # one wheel, since every category is read from one source
        meta["environment"] = environment_spec(*sorted(wheels)[0])
    return Converted(catalogue.tools, cases, meta, catalogue, never_right)


def convert_category(data: CategoryData) -> Converted:
    """`convert_categories` for one category."""
    return convert_categories([data])
