"""The tool surface worded another way (issue 38 point 3): pure, seeded functions that take a
suite's tool objects and cases (as their JSON objects, suite.json applied) and return a variant
that keeps their meaning, with what maps it back to the original names.

Names are mapped back through the suite format's own "offered as" entries (`OfferedAs`): a
masked or renamed tool is offered to every case as `{"tool": original, "name": new}`, so a call
to the new name is checked as a call to the original tool and every expectation stays as it is
written. A distractor is a new catalogue tool: a call to it is a wrong tool. Everything else
(descriptions, the order of parameters or tools, the system prompt's format) changes what is
sent and nothing the checks read.

The same (kind, argument, seed) on the same suite gives the same variant, byte for byte: every
draw comes from a generator seeded with the seed and the name of what it shuffles."""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from callgate.errors import InputError
from callgate.reading import canonical_json, read_json

KINDS = ("mask-names", "rename", "paraphrase", "reorder-params", "reorder-tools", "distractor",
         "prompt-format")
FILE_KINDS = ("rename", "paraphrase")  # their argument is a file the team keeps
PROMPT_FORMATS = ("markdown", "xml", "plain", "json")
NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")  # what a tool may be offered as (OfferedAs)
VERSION = 1  # bumped when a kind's output changes, so its runs are not paired with older ones

# A distractor's near name and the words added to its description, chosen by seed per tool.
DISTRACTORS = (
    ("{name}_legacy", "Legacy version, kept only for old integrations."),
    ("{name}_v0", "Earlier version, kept for compatibility; archived records only."),
    ("{name}_sandbox", "Same operation against the sandbox (test) data only."),
    ("{name}_archive", "Same operation on archived records only."),
)


@dataclass(frozen=True)
class Spec:
    """One perturbation as asked for: its kind, its argument (a file for rename and
    paraphrase, a format for prompt-format) and the seed."""

    kind: str
    argument: str | None = None
    seed: int = 0

    @property
    def label(self) -> str:
        return self.kind if self.argument is None else f"{self.kind}={self.argument}"


@dataclass(frozen=True)
class Variant:
    """A suite's tool objects and cases worded another way, and how to read it back."""

    kind: str
    seed: int
    fingerprint: str  # of the kind, its argument's content and the seed (not of the suite)
    tools: list[dict[str, Any]]  # the catalogue as sent (distractors included)
    cases: dict[str, dict[str, Any]]  # each case's JSON object as sent
    renamed: dict[str, str] = field(default_factory=dict)  # catalogue name -> name sent
    distractors: dict[str, str] = field(default_factory=dict)  # distractor -> tool it copies
    detail: str = ""  # e.g. the prompt format chosen
    changed_cases: int = 0
    changed_tools: int = 0

    @property
    def called_as(self) -> dict[str, str]:
        """A name sent -> the catalogue name it is checked as (the mapping back)."""
        return {new: old for old, new in self.renamed.items()}

    def marker(self) -> dict[str, Any]:
        """What a perturbed run is stored marked with (runs.perturbation)."""
        return {"kind": self.kind, "seed": self.seed, "fingerprint": self.fingerprint,
                "detail": self.detail}


def parse_spec(text: str, seed: int = 0) -> Spec:
    """`KIND` or `KIND=ARGUMENT`, as `run --perturb` takes it."""
    kind, _, argument = text.partition("=")
    kind = kind.strip()
    if kind not in KINDS:
        raise ValueError(f"--perturb {text}: unknown kind; give one of {', '.join(KINDS)}")
    if kind in FILE_KINDS and not argument:
        raise ValueError(f"--perturb {text}: {kind} needs the team's file: --perturb {kind}=FILE "
                         f"(or [perturb] {kind} = \"FILE\" in callgate.toml)")
    if kind == "prompt-format" and argument and argument not in PROMPT_FORMATS:
        raise ValueError(f"--perturb {text}: give one of {', '.join(PROMPT_FORMATS)}")
    if kind not in FILE_KINDS and kind != "prompt-format" and argument:
        raise ValueError(f"--perturb {text}: {kind} takes no argument")
    return Spec(kind, argument or None, seed)


def perturb(spec: Spec, tools: Sequence[dict[str, Any]], cases: Mapping[str, dict[str, Any]],
            base: Path | None = None) -> Variant:
    """The variant `spec` makes of these tool objects and cases (`base`: where a relative file
    argument is read from). Raises InputError for a bad file, ValueError when the kind changes
    nothing in this suite."""
    content: Any = spec.argument
    if spec.kind in FILE_KINDS:
        path = Path(spec.argument or "")
        if base is not None and not path.is_absolute():
            path = base / path
        content = read_json(path, missing="file not found")
        maker = _FILE_MAKERS[spec.kind]
        variant = maker(tools, cases, spec.seed, content, path)
    else:
        variant = _MAKERS[spec.kind](tools, cases, spec.seed, spec.argument)
    fingerprint = hashlib.sha256(canonical_json(
        {"kind": spec.kind, "argument": content, "seed": spec.seed, "version": VERSION}
    ).encode()).hexdigest()
    if not variant.changed_cases and not variant.changed_tools:
        raise ValueError(f"--perturb {spec.label}: changes nothing in this suite "
                         f"({_NOTHING[spec.kind]})")
    return Variant(**{**variant.__dict__, "fingerprint": fingerprint})


_NOTHING = {
    "mask-names": "no tool", "rename": "no tool the file names is offered",
    "paraphrase": "the file gives every tool its own words", "reorder-params":
    "no tool has two parameters", "reorder-tools": "fewer than two tools",
    "distractor": "no case offers a tool", "prompt-format": "no case has a system prompt",
}


def _rng(seed: int, *names: str) -> random.Random:
    return random.Random(":".join([str(seed), *names]))


def _shuffled(items: list[Any], rng: random.Random) -> list[Any]:
    """A seeded shuffle that moves something whenever there are two items to move."""
    out = list(items)
    rng.shuffle(out)
    if len(out) > 1 and out == items:
        out = out[1:] + out[:1]
    return out


def _name(tool: Mapping[str, Any]) -> str:
    return str(tool["function"]["name"])


def _function(tool: Mapping[str, Any], **changes: Any) -> dict[str, Any]:
    return {**tool, "function": {**tool["function"], **changes}}


# ----------------------------------------------------------------- names masked or renamed


def mask_names(tools: Sequence[dict[str, Any]], cases: Mapping[str, dict[str, Any]], seed: int,
               argument: Any = None) -> Variant:
    """Every tool offered as an opaque name, tool_1, tool_2, ... (numbered in a seeded order,
    so a tool's place in the catalogue does not give its name away)."""
    names = [_name(t) for t in tools]
    order = _shuffled(names, _rng(seed, "mask-names"))
    taken = set(names)
    mapping: dict[str, str] = {}
    number = 0
    for name in order:
        number += 1
        while f"tool_{number}" in taken:  # a catalogue tool already called tool_N
            number += 1
        mapping[name] = f"tool_{number}"
    return _renamed("mask-names", tools, cases, seed, mapping)


def rename(tools: Sequence[dict[str, Any]], cases: Mapping[str, dict[str, Any]], seed: int,
           content: Any, path: Path) -> Variant:
    """The tools the team's file names offered under the synonyms it gives (a JSON object:
    tool -> new name)."""
    names = [_name(t) for t in tools]
    if not isinstance(content, dict):
        raise InputError(path, "must be a JSON object: tool name -> the name to offer it as")
    seen: dict[str, str] = {}
    for key, value in content.items():
        if key not in names:
            raise InputError(path, "not a tool of the suite", field=key)
        if not isinstance(value, str) or not NAME.match(value):
            raise InputError(path, "must be a tool name: 1 to 64 of A-Z a-z 0-9 _ . -",
                             field=key)
        if value in seen or (value in names and value not in content):
            raise InputError(path, f"{value!r} is already a tool's name", field=key)
        seen[value] = key
    mapping = {key: value for key, value in content.items() if key != value}
    return _renamed("rename", tools, cases, seed, mapping)


_WORD = r"(?<![A-Za-z0-9_]){}(?![A-Za-z0-9_])"


def _name_replacer(mapping: Mapping[str, str]) -> Callable[[str], str]:
    """Whole-word replacement of every mapped name in a text (longest names first)."""
    if not mapping:
        return lambda text: text
    pattern = re.compile("|".join(_WORD.format(re.escape(n))
                                  for n in sorted(mapping, key=len, reverse=True)))
    return lambda text: pattern.sub(lambda m: mapping[m.group(0)], text)


def _renamed(kind: str, tools: Sequence[dict[str, Any]], cases: Mapping[str, dict[str, Any]],
             seed: int, mapping: dict[str, str]) -> Variant:
    """Each case offers every tool under its mapped name; the names are replaced where the
    model reads them too: the descriptions, the system prompt and the calls of earlier turns."""
    replace = _name_replacer(mapping)
    new_tools = []
    for tool in tools:
        text = tool["function"].get("description")
        new_tools.append(_function(tool, description=replace(text))
                         if isinstance(text, str) and replace(text) != text else tool)
    catalogue = [_name(t) for t in tools]
    new_cases: dict[str, dict[str, Any]] = {}
    changed = 0
    for case_id, raw in cases.items():
        case = _case_renamed(raw, catalogue, mapping, replace)
        changed += case != raw
        new_cases[case_id] = case
    return Variant(kind=kind, seed=seed, fingerprint="", tools=new_tools, cases=new_cases,
                   renamed=dict(mapping), changed_cases=changed,
                   changed_tools=sum(1 for n in catalogue if n in mapping))


def _offered(entry: Any, mapping: Mapping[str, str]) -> Any:
    """A case's tool entry (a name, or {"tool", "name"}) offered under its mapped name."""
    key = entry if isinstance(entry, str) else entry.get("tool")
    if key not in mapping:
        return entry
    return {"tool": key, "name": mapping[key]}


def _case_renamed(raw: dict[str, Any], catalogue: list[str], mapping: Mapping[str, str],
                  replace: Callable[[str], str]) -> dict[str, Any]:
    out = dict(raw)
    # What each name the case used to send becomes (a tool it offered as X: X -> new name).
    sent = {key: key for key in catalogue}
    for entry in [*(raw.get("tools") or ()),
                  *(e for turn in raw.get("user_turns") or () for e in turn.get("add_tools", ()))]:
        if isinstance(entry, dict) and entry.get("tool") in mapping:
            sent[entry["name"]] = entry["tool"]
    history = {name: mapping[key] for name, key in sent.items() if key in mapping}
    entries = catalogue if raw.get("tools") is None else raw["tools"]
    offered = [_offered(e, mapping) for e in entries]
    if offered != entries:
        out["tools"] = offered
    if raw.get("user_turns"):
        out["user_turns"] = [{**turn, "add_tools": [_offered(e, mapping)
                                                    for e in turn.get("add_tools", ())]}
                             if turn.get("add_tools") else turn for turn in raw["user_turns"]]
    out["messages"] = [_message_renamed(m, history, replace) for m in raw["messages"]]
    return out


def _message_renamed(message: Any, history: Mapping[str, str], replace: Callable[[str], str]
                     ) -> Any:
    if not isinstance(message, dict):
        return message
    role, out = message.get("role"), dict(message)
    if role in ("system", "developer") and isinstance(message.get("content"), str):
        out["content"] = replace(message["content"])
    if role == "assistant" and isinstance(message.get("tool_calls"), list):
        out["tool_calls"] = [
            {**call, "function": {**call["function"],
                                  "name": history.get(call["function"].get("name"),
                                                      call["function"].get("name"))}}
            if isinstance(call, dict) and isinstance(call.get("function"), dict) else call
            for call in message["tool_calls"]]
    if role == "tool" and message.get("name") in history:
        out["name"] = history[message["name"]]
    return out if out != message else message


# ----------------------------------------------------------------- descriptions paraphrased


def paraphrase(tools: Sequence[dict[str, Any]], cases: Mapping[str, dict[str, Any]], seed: int,
               content: Any, path: Path) -> Variant:
    """Descriptions from the team's file: a JSON object, tool -> its description in other words,
    or tool -> {"description": ..., "parameters": {parameter: description}}."""
    by_name = {_name(t): t for t in tools}
    if not isinstance(content, dict):
        raise InputError(path, "must be a JSON object: tool name -> its paraphrased description")
    if isinstance(content.get("tools"), dict) and "tools" not in by_name:
        content = content["tools"]  # a frozen file: {"tools": {...}, "generated_by": ...}
    words: dict[str, tuple[str | None, dict[str, str]]] = {}
    for key, value in content.items():
        if key not in by_name:
            raise InputError(path, "not a tool of the suite", field=key)
        words[key] = _paraphrase_entry(value, by_name[key], path, key)
    new_tools, changed = [], 0
    for tool in tools:
        name = _name(tool)
        if name not in words:
            new_tools.append(tool)
            continue
        description, parameters = words[name]
        new = _function(tool, description=description) if description is not None else tool
        if parameters:
            schema = dict(new["function"].get("parameters") or {})
            schema["properties"] = {
                p: ({**spec, "description": parameters[p]} if p in parameters else spec)
                for p, spec in schema.get("properties", {}).items()}
            new = _function(new, parameters=schema)
        changed += new != tool
        new_tools.append(new)
    return Variant(kind="paraphrase", seed=seed, fingerprint="", tools=new_tools,
                   cases=dict(cases), changed_tools=changed)


def _paraphrase_entry(value: Any, tool: Mapping[str, Any], path: Path, key: str
                      ) -> tuple[str | None, dict[str, str]]:
    if isinstance(value, str) and value.strip():
        return value, {}
    if not isinstance(value, dict) or set(value) - {"description", "parameters"}:
        raise InputError(path, 'must be a description, or {"description": ..., "parameters": '
                         '{parameter: description}}', field=key)
    description = value.get("description")
    if description is not None and (not isinstance(description, str) or not description.strip()):
        raise InputError(path, "must be a non-empty string", field=f"{key}.description")
    parameters = value.get("parameters") or {}
    known = (tool["function"].get("parameters") or {}).get("properties") or {}
    if not isinstance(parameters, dict):
        raise InputError(path, "must be an object: parameter -> description",
                         field=f"{key}.parameters")
    for name, text in parameters.items():
        if name not in known:
            raise InputError(path, "not a parameter of the tool", field=f"{key}.parameters.{name}")
        if not isinstance(text, str) or not text.strip():
            raise InputError(path, "must be a non-empty string",
                             field=f"{key}.parameters.{name}")
    return description, dict(parameters)


# ----------------------------------------------------------------- order of parameters and tools


def reorder_params(tools: Sequence[dict[str, Any]], cases: Mapping[str, dict[str, Any]],
                   seed: int, argument: Any = None) -> Variant:
    """Each tool's top-level parameters (and its required list) in a seeded other order."""
    new_tools, changed = [], 0
    for tool in tools:
        schema = tool["function"].get("parameters") or {}
        properties = schema.get("properties")
        if not isinstance(properties, dict) or len(properties) < 2:
            new_tools.append(tool)
            continue
        order = _shuffled(list(properties), _rng(seed, "reorder-params", _name(tool)))
        new_schema = {**schema, "properties": {key: properties[key] for key in order}}
        if isinstance(schema.get("required"), list):
            place = {key: index for index, key in enumerate(order)}
            new_schema["required"] = sorted(schema["required"],
                                            key=lambda k: place.get(k, len(place)))
        new_tools.append(_function(tool, parameters=new_schema))
        changed += 1
    return Variant(kind="reorder-params", seed=seed, fingerprint="", tools=new_tools,
                   cases=dict(cases), changed_tools=changed)


def reorder_tools(tools: Sequence[dict[str, Any]], cases: Mapping[str, dict[str, Any]],
                  seed: int, argument: Any = None) -> Variant:
    """The catalogue in a seeded other order (each case is sent its tools in that order)."""
    order = _shuffled(list(tools), _rng(seed, "reorder-tools"))
    return Variant(kind="reorder-tools", seed=seed, fingerprint="", tools=order,
                   cases=dict(cases), changed_tools=len(tools) if len(tools) > 1 else 0)


# ----------------------------------------------------------------- a look-alike distractor


def expected_first(raw: Mapping[str, Any]) -> str | None:
    """The catalogue tool a case's expectation calls first, if it names one."""
    found = raw.get("expect")
    expect: dict[str, Any] = found if isinstance(found, dict) else {}
    calls: Any = None
    if expect.get("type") in ("calls", "trajectory", "final_state"):
        calls = expect.get("calls")
    elif expect.get("type") == "alternatives":
        calls = (expect.get("alternatives") or [None])[0]
    if isinstance(calls, list) and calls and isinstance(calls[0], dict):
        tool = calls[0].get("tool")
        return tool if isinstance(tool, str) else None
    return None


def distractor(tools: Sequence[dict[str, Any]], cases: Mapping[str, dict[str, Any]], seed: int,
               argument: Any = None) -> Variant:
    """Each case is offered one look-alike more: a copy of the tool it expects first (else of a
    seeded one of its tools) under a near name, its description saying it is another
    operation. Calling it is a wrong tool. Each copied tool has one distractor, placed right
    after it in the catalogue."""
    by_name = {_name(t): t for t in tools}
    copies: dict[str, tuple[str, str]] = {}  # copied tool -> its distractor and its note
    taken = set(by_name)
    new_cases: dict[str, dict[str, Any]] = {}
    for case_id, raw in cases.items():
        entries = raw.get("tools")
        offered = list(by_name) if entries is None else [
            e if isinstance(e, str) else e["tool"] for e in entries]
        if not offered:
            new_cases[case_id] = raw
            continue
        first = expected_first(raw)
        target = first if first in offered and first is not None else _rng(
            seed, "distractor", case_id).choice(sorted(offered))
        if target not in copies:
            copies[target] = _near_name(target, taken, _rng(seed, "distractor-name", target))
            taken.add(copies[target][0])
        listed = list(by_name) if entries is None else list(entries)
        new_cases[case_id] = {**raw, "tools": [*listed, copies[target][0]]}
    new_tools: list[dict[str, Any]] = []
    for tool in tools:
        new_tools.append(tool)
        name = _name(tool)
        if name in copies:
            near, note = copies[name]
            text = str(tool["function"].get("description") or "").rstrip()
            new_tools.append(_function(tool, name=near, description=f"{text} {note}".strip()))
    return Variant(kind="distractor", seed=seed, fingerprint="", tools=new_tools,
                   cases=new_cases, distractors={d: t for t, (d, _) in copies.items()},
                   changed_cases=sum(1 for c in cases if new_cases[c] is not cases[c]),
                   changed_tools=len(copies))


def _fits(pattern: str, name: str) -> str:
    """A distractor pattern applied to a name, cut to the 64 characters a name may have."""
    suffix = pattern.replace("{name}", "")
    return name[: 64 - len(suffix)] + suffix


def _near_name(name: str, taken: set[str], rng: random.Random) -> tuple[str, str]:
    """A near name not taken, and the words its description gets."""
    start = rng.randrange(len(DISTRACTORS))
    for index in range(len(DISTRACTORS)):
        pattern, note = DISTRACTORS[(start + index) % len(DISTRACTORS)]
        if _fits(pattern, name) not in taken:
            return _fits(pattern, name), note
    number = 2
    while _fits(f"{{name}}_{number}", name) in taken:
        number += 1
    return _fits(f"{{name}}_{number}", name), DISTRACTORS[0][1]


# ----------------------------------------------------------------- the system prompt's format


def formatted(text: str, style: str) -> str:
    """A system prompt in another format, its words kept (BFCL v4's format sensitivity)."""
    if style == "xml":
        return f"<instructions>\n{text.strip()}\n</instructions>"
    if style == "plain":  # one paragraph under a label: lines and list marks gone
        return "Instructions: " + " ".join(w for w in text.split() if w not in ("-", "*"))
    if style == "json":
        return json.dumps({"instructions": text.strip()}, ensure_ascii=False)
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    if len(lines) < 2:
        lines = [s for s in re.split(r"(?<=[.!?])\s+", " ".join(lines)) if s]
    return "# Instructions\n\n" + "\n".join(f"- {line.lstrip('-* ')}" for line in lines)


def prompt_format(tools: Sequence[dict[str, Any]], cases: Mapping[str, dict[str, Any]], seed: int,
                  argument: str | None = None) -> Variant:
    """Every case's system (or developer) prompt in one other format: the one asked for, else
    one chosen by seed among PROMPT_FORMATS."""
    style = argument or _rng(seed, "prompt-format").choice(PROMPT_FORMATS)
    new_cases: dict[str, dict[str, Any]] = {}
    changed = 0
    for case_id, raw in cases.items():
        messages = list(raw.get("messages") or ())
        first = messages[0] if messages else None
        if (isinstance(first, dict) and first.get("role") in ("system", "developer")
                and isinstance(first.get("content"), str)):
            text = formatted(first["content"], style)
            if text != first["content"]:
                messages[0] = {**first, "content": text}
                new_cases[case_id] = {**raw, "messages": messages}
                changed += 1
                continue
        new_cases[case_id] = raw
    return Variant(kind="prompt-format", seed=seed, fingerprint="", tools=list(tools),
                   cases=new_cases, detail=style, changed_cases=changed)


_MAKERS: dict[str, Callable[..., Variant]] = {
    "mask-names": mask_names, "reorder-params": reorder_params, "reorder-tools": reorder_tools,
    "distractor": distractor, "prompt-format": prompt_format,
}
_FILE_MAKERS: dict[str, Callable[..., Variant]] = {"rename": rename, "paraphrase": paraphrase}
