"""What changed in the tool surface between a baseline's suite and a release's, and the words
the gate says it in: tools added, removed or renamed (same parameters schema, new name),
descriptions changed (a word diff), parameters added, removed or retyped, enums and required
lists changed, the system prompt, an MCP snapshot's server version. Apart from it, the cases
whose *expectation* changed (the checker, not the release): those are not compared."""

from __future__ import annotations

import difflib
from collections.abc import Collection, Iterator, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from callgate.reading import canonical_json
from callgate.suites.surface import SurfaceTool, ToolSurface

CONTEXT_WORDS = 3


class ToolChange(BaseModel):
    """One tool's changes, under its name now (`was`: its name in the baseline, if renamed),
    with the compared cases that expect it and how many of them flipped."""

    model_config = ConfigDict(frozen=True)
    tool: str
    was: str | None = None
    description: str | None = None  # the word diff, when the description changed
    parameters: list[str] = Field(default_factory=list)
    cases: int = 0  # cases of both suites that expect the tool now, expectation unchanged
    worse: int = 0
    better: int = 0


class SurfaceDiff(BaseModel):
    model_config = ConfigDict(frozen=True)
    baseline_release: str
    added: list[str] = Field(default_factory=list)
    removed: list[str] = Field(default_factory=list)
    tools: list[ToolChange] = Field(default_factory=list)  # renamed or changed
    system: str | None = None  # the word diff of the system prompt, when it changed
    mcp_server: str | None = None  # "name 1.0 → name 1.1"
    expectation_changed: list[str] = Field(default_factory=list)  # not compared
    unrecorded: str | None = None  # why no diff could be made (a release without a surface)

    @property
    def surface_changed(self) -> bool:
        return bool(self.added or self.removed or self.tools or self.system
                    or self.mcp_server)


def word_diff(before: str, after: str, context: int = CONTEXT_WORDS) -> str:
    """The words that changed, `[-gone-]` and `{+new+}`, each run of changes with up to
    `context` words around it; hunks apart joined with `…`."""
    old, new = before.split(), after.split()
    matcher = difflib.SequenceMatcher(a=old, b=new, autojunk=False)
    parts: list[str] = []
    for group in matcher.get_grouped_opcodes(context):
        words: list[str] = []
        for op, a1, a2, b1, b2 in group:
            if op == "equal":
                words += old[a1:a2]
                continue
            if a2 > a1:
                words.append(f"[-{' '.join(old[a1:a2])}-]")
            if b2 > b1:
                words.append(f"{{+{' '.join(new[b1:b2])}+}}")
        lead = "… " if group[0][1] > 0 else ""
        tail = " …" if group[-1][2] < len(old) else ""
        parts.append(lead + " ".join(words) + tail)
    return " ".join(parts) if parts else "(whitespace only)"


def _type(schema: Mapping[str, Any]) -> str:
    kind = schema.get("type")
    if kind is None:
        return "any" if "enum" not in schema else "enum"
    return "|".join(map(str, kind)) if isinstance(kind, list) else str(kind)


def _properties(schema: Mapping[str, Any], prefix: str = ""
                ) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """Every parameter by dotted path (an array's items as `name[]`), nested objects too."""
    for name, sub in (schema.get("properties") or {}).items():
        if not isinstance(sub, Mapping):
            continue
        path = f"{prefix}{name}"
        yield path, sub
        yield from _properties(sub, path + ".")
        items = sub.get("items")
        if isinstance(items, Mapping):
            yield from _properties(items, path + "[].")


def _objects(schema: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, list[Any]]]:
    """Each object's required list, by the path of the object ("" for the top)."""
    yield prefix.rstrip("."), list(schema.get("required") or [])
    for path, sub in _properties(schema, prefix):
        if "properties" in sub:
            yield path, list(sub.get("required") or [])


def _values(values: Any) -> str:
    return ", ".join(canonical_json(v) for v in values)


def parameter_changes(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    """The parameters added, removed and retyped, enums and required lists changed, and other
    schema keywords changed, in words."""
    old, new = dict(_properties(before)), dict(_properties(after))
    out = []
    for path in new.keys() - old.keys():
        out.append((path, f"parameter {path} added ({_type(new[path])})"))
    for path in old.keys() - new.keys():
        out.append((path, f"parameter {path} removed"))
    for path in old.keys() & new.keys():
        out += [(path, text) for text in _one_parameter(path, old[path], new[path])]
    then_req, now_req = dict(_objects(before)), dict(_objects(after))
    for path in then_req.keys() & now_req.keys():
        gained = [k for k in now_req[path] if k not in then_req[path]]
        lost = [k for k in then_req[path] if k not in now_req[path]]
        where = f" of {path}" if path else ""
        if gained:
            out.append((path, f"required{where}: + {', '.join(gained)}"))
        if lost:
            out.append((path, f"required{where}: − {', '.join(lost)}"))
    return [text for _, text in sorted(out)]


def hint_changes(before: Mapping[str, bool], after: Mapping[str, bool]) -> list[str]:
    """An MCP tool's hints that changed (`destructiveHint: unset → true`): a tool that now
    says it destroys is a change of what the model is told, listed with its parameters'."""
    def shown(value: bool | None) -> str:
        return "unset" if value is None else str(value).lower()

    return [f"hint {name}: {shown(before.get(name))} → {shown(after.get(name))}"
            for name in sorted(before.keys() | after.keys())
            if before.get(name) != after.get(name)]


def _one_parameter(path: str, old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    out = []
    if _type(old) != _type(new):
        out.append(f"parameter {path} retyped: {_type(old)} → {_type(new)}")
    if old.get("enum") != new.get("enum"):
        then, now = list(old.get("enum") or []), list(new.get("enum") or [])
        gained, lost = [v for v in now if v not in then], [v for v in then if v not in now]
        change = "; ".join(part for part in (gained and f"+ {_values(gained)}",
                                             lost and f"− {_values(lost)}") if part)
        out.append(f"enum of {path}: {change or 'reordered'}")
    if (old.get("description") or "") != (new.get("description") or ""):
        out.append(f"description of {path}: "
                   + word_diff(old.get("description") or "", new.get("description") or ""))
    skip = {"type", "enum", "description", "properties", "items", "required"}
    keywords = sorted(k for k in (old.keys() | new.keys()) - skip if old.get(k) != new.get(k))
    items_old, items_new = old.get("items"), new.get("items")
    if isinstance(items_old, Mapping) and isinstance(items_new, Mapping) and (
            _type(items_old) != _type(items_new)):
        out.append(f"items of {path} retyped: {_type(items_old)} → {_type(items_new)}")
    if keywords:
        out.append(f"parameter {path}: {', '.join(keywords)} changed")
    return out


def _tool_change(name: str, was: str | None, old: SurfaceTool, new: SurfaceTool
                 ) -> ToolChange | None:
    description = (word_diff(old.description, new.description)
                   if old.description != new.description else None)
    parameters = parameter_changes(old.parameters, new.parameters) + hint_changes(
        old.annotations or {}, new.annotations or {})
    if was is None and description is None and not parameters:
        return None
    return ToolChange(tool=name, was=was, description=description, parameters=parameters)


def _renames(then: ToolSurface, now: ToolSurface) -> dict[str, str]:
    """Baseline name → name now, for a tool gone whose parameters schema a new tool has (the
    one with the same description first)."""
    gone = [n for n in then.tools if n not in now.tools]
    new = [n for n in now.tools if n not in then.tools]
    found: dict[str, str] = {}
    for same_description in (True, False):
        for old in gone:
            if old in found:
                continue
            for candidate in new:
                if candidate in found.values():
                    continue
                a, b = then.tools[old], now.tools[candidate]
                if a.parameters == b.parameters and (
                        not same_description or a.description == b.description):
                    found[old] = candidate
                    break
    return found


def expectations_changed(then: ToolSurface | None, now: ToolSurface | None) -> list[str]:
    """The cases in both whose expectation differs (a tool renamed counts as the same)."""
    if then is None or now is None:
        return []
    renames = _renames(then, now)
    out = []
    for case_id, key in now.expectations.items():
        before = then.expectations.get(case_id)
        if before is None:
            continue
        if before[0] != key[0] or [renames.get(n, n) for n in before[1:]] != key[1:]:
            out.append(case_id)
    return sorted(out)


def surface_diff(then: ToolSurface | None, now: ToolSurface | None, baseline_release: str
                 ) -> SurfaceDiff:
    """What changed from `then` (the baseline's) to `now`."""
    if then is None or now is None:
        which = "the baseline's" if then is None else "this release's"
        return SurfaceDiff(baseline_release=baseline_release,
                           unrecorded=f"{which} tool surface was not recorded (scored by an older "
                                      "callgate): what changed in it is not named")
    renames = _renames(then, now)
    renamed_to = set(renames.values())
    changes = []
    for name, tool in now.tools.items():
        was = next((old for old, new in renames.items() if new == name), None)
        before = then.tools.get(was or name)
        if before is not None:
            change = _tool_change(name, was, before, tool)
            if change is not None:
                changes.append(change)
    mcp = None
    if then.mcp_server != now.mcp_server:
        def server(info: Mapping[str, str] | None) -> str:
            if not info:
                return "none"
            return " ".join(v for v in (info.get("name"), info.get("version")) if v) or "?"
        mcp = f"{server(then.mcp_server)} → {server(now.mcp_server)}"
    return SurfaceDiff(
        baseline_release=baseline_release,
        added=[n for n in now.tools if n not in then.tools and n not in renamed_to],
        removed=[n for n in then.tools if n not in now.tools and n not in renames],
        tools=changes,
        system=(word_diff(then.system or "", now.system or "")
                if (then.system or "") != (now.system or "") else None),
        mcp_server=mcp,
        expectation_changed=expectations_changed(then, now),
    )


def with_flips(diff: SurfaceDiff, now: ToolSurface | None, compared: Collection[str],
               worse: Collection[str], better: Collection[str]) -> SurfaceDiff:
    """The diff with, for each tool it touches, the compared cases that expect the tool now
    and how many of them passed before and fail now (`worse`), and the other way."""
    if now is None or not diff.tools:
        return diff
    worse_set, better_set = set(worse), set(better)
    expecting: dict[str, list[str]] = {change.tool: [] for change in diff.tools}
    for case_id, key in now.expectations.items():
        if case_id not in compared:
            continue
        for name in set(key[1:]):
            if name in expecting:
                expecting[name].append(case_id)
    tools = [change.model_copy(update={
        "cases": len(expecting[change.tool]),
        "worse": sum(c in worse_set for c in expecting[change.tool]),
        "better": sum(c in better_set for c in expecting[change.tool])})
        for change in diff.tools]
    return diff.model_copy(update={"tools": tools})


def summary(diff: SurfaceDiff) -> str:
    """One clause for the "the suite changed" warning."""
    if diff.unrecorded:
        return diff.unrecorded
    parts = []
    renamed = sum(1 for t in diff.tools if t.was)
    described = sum(1 for t in diff.tools if t.description)
    schemas = sum(1 for t in diff.tools if t.parameters)
    for count, what in ((len(diff.added), "added"), (len(diff.removed), "removed"),
                        (renamed, "renamed"), (described, "with a new description"),
                        (schemas, "with parameters changed")):
        if count:
            parts.append(f"{count} tool(s) {what}")
    if diff.system:
        parts.append("the system prompt changed")
    if diff.mcp_server:
        parts.append(f"MCP server {diff.mcp_server}")
    surface = ("tool surface: " + ", ".join(parts)) if parts else "the tool surface is the same"
    if diff.expectation_changed:
        surface += (f"; {len(diff.expectation_changed)} case(s) changed their expectation "
                    "(not compared)")
    return surface


def surface_lines(diff: SurfaceDiff | None, limit: int = 20) -> list[str]:
    """The diff in words, one line a change (shared by the console and Markdown)."""
    if diff is None:
        return []
    if diff.unrecorded:
        return [diff.unrecorded]
    lines = [f"tool added: {name}" for name in diff.added]
    lines += [f"tool removed: {name}" for name in diff.removed]
    for change in diff.tools:
        head = f"{change.was} renamed {change.tool}" if change.was else change.tool
        entries = []
        if change.was:
            same = "" if change.description or change.parameters else " (same schema)"
            entries.append(f"tool renamed: {change.was} → {change.tool}{same}")
        if change.description:
            entries.append(f"{head}: description: {change.description}")
        entries += [f"{head}: {text}" for text in change.parameters]
        entries[0] += (f" [{change.cases} compared case(s) expect it: {change.worse} worse, "
                       f"{change.better} better]")
        lines += entries
    if diff.system:
        lines.append(f"system prompt: {diff.system}")
    if diff.mcp_server:
        lines.append(f"MCP server: {diff.mcp_server}")
    if diff.expectation_changed:
        shown = ", ".join(diff.expectation_changed[:limit])
        more = len(diff.expectation_changed) - limit
        lines.append(f"expectation changed, not compared ({len(diff.expectation_changed)}): "
                     + shown + (f" … and {more} more" if more > 0 else ""))
    return lines
