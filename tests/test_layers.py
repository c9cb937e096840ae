"""The packages are layered as the pipeline runs: a module may import its own package and the
layers below it, never a layer above or a sibling of its own layer. Every import counts, those
inside functions included (the CLI's lazy imports keep `callgate --help` fast; they may reach
down, never up), so no cycle can hide behind a lazy import. A class has at most one project
base, itself without one: collaborators are passed, not inherited. And every module can be
read: at most 500 lines, no function above McCabe complexity 15."""

from __future__ import annotations

import ast
import builtins
import functools
import json
import subprocess
import sys
from pathlib import Path

import callgate
from callgate.checks.kinds import CHECKS
from callgate.checks.verdict import Verdict
from callgate.store.db import VERDICT_COLUMNS
from callgate.suites.suite import Expectation

SRC = Path(callgate.__file__).parent


@functools.cache
def parsed() -> dict[Path, ast.Module]:
    """Every module of src, parsed once for all the tests here (read, never changed)."""
    return {path: ast.parse(path.read_text(), str(path)) for path in sorted(SRC.rglob("*.py"))}


@functools.cache
def walked(path: Path) -> list[ast.AST]:
    """Every node of a module, in ast.walk's order, walked once: the tests here read them
    seven times over (1.5 million nodes, most of this file's CPU)."""
    return list(ast.walk(parsed()[path]))

# Lowest first. Packages on one line are siblings: neither imports the other.
LAYERS: list[tuple[str, ...]] = [
    ("callgate.version", "callgate.errors", "callgate.toml_lines", "callgate.redaction"),
    ("callgate.reading", "callgate.stats"),
    ("callgate.store",),
    ("callgate.suites",),
    ("callgate.checks",),
    ("callgate.models", "callgate.importers"),
    ("callgate.judging",),
    ("callgate.scoring",),  # it applies the "not a result" rule, so nothing above re-decides it
    ("callgate.gating", "callgate.running", "callgate.merging"),
    ("callgate.report",),
    ("callgate.web",),
    ("callgate.cli",),
    ("callgate", "callgate.environment"),  # the public API (and a name kept for old suites)
]


def unit(module: str) -> str:
    """The layered unit a module belongs to: its stage package, or a bottom module."""
    for layer in LAYERS:
        for name in sorted(layer, key=len, reverse=True):
            if module == name or (name != "callgate" and module.startswith(name + ".")):
                return name
    raise AssertionError(f"{module} is in no layer: add it to LAYERS")


def level(name: str) -> int:
    return next(i for i, layer in enumerate(LAYERS) if name in layer)


def module_name(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_from(node: ast.ImportFrom, package: str) -> str:
    """The module a `from ... import` statement of `package` reads, relative levels resolved."""
    if not node.level:
        return node.module or ""
    base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
    return f"{base}.{node.module}" if node.module else base


def imports(path: Path, module: str) -> set[str]:
    """Every callgate module the file imports, wherever the import statement is."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in walked(path):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "callgate")
        elif isinstance(node, ast.ImportFrom):
            target = imported_from(node, package)
            if target.split(".")[0] != "callgate":
                continue
            folder = SRC.parent / target.replace(".", "/")
            for alias in node.names:
                # `from callgate.checks import matching` imports a submodule
                if (folder / f"{alias.name}.py").exists() or (folder / alias.name).is_dir():
                    found.add(f"{target}.{alias.name}")
                else:
                    found.add(target)
    return found


@functools.cache
def edges() -> list[tuple[str, str]]:
    out = []
    for path in parsed():
        if "examples" in path.relative_to(SRC).parts:
            continue  # example suites' environments, not callgate's code
        module = module_name(path)
        out.extend((module, target) for target in sorted(imports(path, module)))
    return out


def test_every_import_goes_down_the_layers() -> None:
    wrong = []
    for source, target in edges():
        src_unit, dst_unit = unit(source), unit(target)
        if src_unit == dst_unit:
            continue
        if level(dst_unit) >= level(src_unit):
            wrong.append(f"{source} imports {target} ({src_unit} may not import {dst_unit})")
    assert not wrong, "\n".join(wrong)


def test_the_graph_is_read() -> None:
    """The test above sees real edges (a parser that found none would pass it)."""
    found = set(edges())
    assert ("callgate.scoring.pipeline", "callgate.checks.check") in found
    assert ("callgate.cli.serving", "callgate.web.app") in found  # a lazy import inside a command
    assert unit("callgate.checks.kinds.no_call") == "callgate.checks"


def test_no_import_cycle_between_modules() -> None:
    graph: dict[str, set[str]] = {}
    for source, target in edges():
        graph.setdefault(source, set()).add(target)
    # Importing a package runs its __init__: an edge to a submodule is also one to its parents.
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in graph.get(node, ()):
            if state.get(nxt) == 1:
                cycle = [*stack[stack.index(nxt):], nxt]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in list(graph):
        if node not in state:
            visit(node)


def test_every_expectation_kind_has_one_handler() -> None:
    kinds = {member.model_fields["type"].annotation.__args__[0]
             for member in Expectation.__args__[0].__args__}
    assert kinds == set(CHECKS)


def test_the_verdict_columns_are_the_verdicts_fields() -> None:
    assert VERDICT_COLUMNS[0] == "run"
    assert set(VERDICT_COLUMNS[1:]) <= set(Verdict.model_fields)


# Classes deeper than the rule allows, each with the change that takes it apart; the test fails
# when one of them is no longer too deep, so the list cannot outlive its reason.
KNOWN_DEEP: dict[str, str] = {
    "callgate.store.db.Store": "its record mixins on StoreBase (issue 25: typed store rows)",
}


def _names(path: Path, module: str) -> dict[str, str]:
    """What each name bound by the module's imports and classes refers to, fully qualified."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    bound: dict[str, str] = {}
    for node in walked(path):
        if isinstance(node, ast.ClassDef):
            bound[node.name] = f"{module}.{node.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    bound[alias.asname] = alias.name
        elif isinstance(node, ast.ImportFrom):
            source = imported_from(node, package)
            for alias in node.names:
                bound[alias.asname or alias.name] = f"{source}.{alias.name}"
    return bound


def _dotted(node: ast.expr) -> str | None:
    """`Name`, `a.b.Name` or `Name[...]` as a dotted name; None for anything else."""
    if isinstance(node, ast.Subscript):
        return _dotted(node.value)
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        head = _dotted(node.value)
        return f"{head}.{node.attr}" if head else None
    return None


def _qualified(dotted: str, bound: dict[str, str]) -> str:
    head, _, rest = dotted.partition(".")
    name = bound.get(head, head)
    return f"{name}.{rest}" if rest else name


@functools.cache
def class_bases() -> dict[str, list[str]]:
    """Every class in src (those inside functions included), by qualified name, with its bases:
    a project class's qualified name, or a library base's name as written."""
    names: dict[str, dict[str, str]] = {}
    written: dict[str, list[str]] = {}
    for path in parsed():
        if "examples" in path.relative_to(SRC).parts:
            continue
        module = module_name(path)
        names[module] = bound = _names(path, module)
        for node in walked(path):
            if isinstance(node, ast.ClassDef):
                written[f"{module}.{node.name}"] = [
                    _qualified(dotted, bound) for dotted in map(_dotted, node.bases) if dotted
                ]

    def resolve(name: str) -> str:
        """A re-exported name followed to the module that defines the class."""
        for _ in range(10):
            if name in written:
                return name
            module, _, attr = name.rpartition(".")
            if module not in names or attr not in names[module]:
                return name
            name = names[module][attr]
        return name

    return {cls: [resolve(base) for base in bases] for cls, bases in written.items()}


def project_bases(bases: dict[str, list[str]], cls: str) -> list[str]:
    return [base for base in bases[cls] if base in bases]


def is_error(bases: dict[str, list[str]], cls: str) -> bool:
    """An exception class: its bases are the categories an `except` catches, not shared code."""
    for base in bases[cls]:
        if base in bases:
            if is_error(bases, base):
                return True
            continue
        last = base.rsplit(".", 1)[-1]
        builtin = getattr(builtins, last, None)
        if (isinstance(builtin, type) and issubclass(builtin, BaseException)) or last.endswith(
            ("Error", "Exception")
        ):
            return True
    return False


def test_no_class_is_more_than_one_project_class_deep() -> None:
    bases = class_bases()
    deep = {}
    for cls in bases:
        if is_error(bases, cls):
            continue
        above = project_bases(bases, cls)
        grand = [g for base in above for g in project_bases(bases, base)]
        if len(above) > 1 or grand:
            deep[cls] = above + grand
    wrong = [f"{cls} is built on {', '.join(chain)}" for cls, chain in sorted(deep.items())
             if cls not in KNOWN_DEEP]
    assert not wrong, "pass collaborators instead:\n" + "\n".join(wrong)
    fixed = sorted(set(KNOWN_DEEP) - set(deep))
    assert not fixed, f"no longer too deep, take them off KNOWN_DEEP: {fixed}"


def test_the_class_bases_are_read() -> None:
    """The test above sees real bases, re-exports and library bases told apart."""
    bases = class_bases()
    assert bases["callgate.store.opening.StoreLocked"] == ["callgate.store.opening.StoreError"]
    assert bases["callgate.running.run.OfflineMiss"] == ["callgate.errors.CallgateError"]
    assert bases["callgate.suites.cases.Case"] == ["callgate.suites.cases._Strict"]
    assert bases["callgate.suites.cases._Strict"] == ["pydantic.BaseModel"]
    assert "callgate.store.judging.JudgeRecords" in bases["callgate.store.db.Store"]
    assert is_error(bases, "callgate.store.opening.StoreLocked")
    assert not is_error(bases, "callgate.suites.cases.Case")


# --------------------------------------------------------------------------- size


MAX_LINES = 500
MAX_COMPLEXITY = 15
# Places allowed over the limits, with the reason; none today (issue 25 item 5 split them all).
# The tests also fail when a listed one no longer needs its place, so the lists cannot go stale.
KNOWN_LONG: frozenset[str] = frozenset()
KNOWN_COMPLEX: frozenset[str] = frozenset()


def module_lines() -> dict[str, int]:
    return {str(path.relative_to(SRC.parent)): len(path.read_text().splitlines())
            for path in sorted(SRC.rglob("*.py"))}


def test_no_module_is_over_500_lines() -> None:
    lines = module_lines()
    long = {path for path, n in lines.items() if n > MAX_LINES}
    wrong = [f"{path}: {lines[path]} lines" for path in sorted(long - KNOWN_LONG)]
    assert not wrong, f"split these below {MAX_LINES} lines:\n" + "\n".join(wrong)
    fixed = sorted(KNOWN_LONG - long)
    assert not fixed, f"no longer over {MAX_LINES} lines, take them off KNOWN_LONG: {fixed}"


def complex_functions() -> set[str]:
    """Every function in src above MAX_COMPLEXITY, as ruff's C901 counts it (the config's
    ignores left out, so the allow-list here is checked on its own)."""
    done = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--isolated", "--select", "C901",
         "--config", f"lint.mccabe.max-complexity={MAX_COMPLEXITY}",
         "--output-format", "json", "--exit-zero", str(SRC)],
        capture_output=True, text=True, check=True)
    found = set()
    for finding in json.loads(done.stdout):
        name = finding["message"].split("`")[1]  # "`decide` is too complex (29 > 15)"
        found.add(f"{Path(finding['filename']).relative_to(SRC.parent)}:{name}")
    return found


def test_no_function_is_above_complexity_15() -> None:
    found = complex_functions()
    wrong = sorted(found - KNOWN_COMPLEX)
    assert not wrong, f"split these below complexity {MAX_COMPLEXITY}:\n" + "\n".join(wrong)
    fixed = sorted(KNOWN_COMPLEX - found)
    assert not fixed, f"no longer too complex, take them off KNOWN_COMPLEX: {fixed}"


# --------------------------------------------------------------------------- SQL


# SQL spelt in a string, or a call that runs it: only the store package may hold either.
SQL_MARKS = ("execute(", "executemany(", "executescript(", ".query(", "SELECT ", "INSERT ",
             "UPDATE ", "DELETE FROM", "CREATE TABLE", " WHERE ")
# Modules outside store/ allowed to hold SQL, with the reason; none today.
KNOWN_SQL: frozenset[str] = frozenset()


def sql_outside_the_store() -> dict[str, list[str]]:
    """Each module outside callgate/store/ with a line holding one of SQL_MARKS (in code or
    a string; comments and docstrings, which name SQL in words, left out)."""
    found: dict[str, list[str]] = {}
    for path in parsed():
        if path.is_relative_to(SRC / "store"):
            continue
        docstrings = {id(node.body[0].value) for node in walked(path)
                      if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef
                                    | ast.AsyncFunctionDef)
                      and node.body and isinstance(node.body[0], ast.Expr)}
        texts = [node.value for node in walked(path) if isinstance(node, ast.Constant)
                 and isinstance(node.value, str) and id(node) not in docstrings]
        calls = [ast.unparse(node.func) + "(" for node in walked(path)
                 if isinstance(node, ast.Call)]
        hits = sorted({mark for mark in SQL_MARKS for text in [*texts, *calls] if mark in text})
        if hits:
            found[str(path.relative_to(SRC.parent))] = hits
    return found


def test_no_module_outside_the_store_holds_sql() -> None:
    found = sql_outside_the_store()
    wrong = [f"{path}: {', '.join(marks)}" for path, marks in sorted(found.items())
             if path not in KNOWN_SQL]
    assert not wrong, "move the SQL into callgate/store/:\n" + "\n".join(wrong)
    fixed = sorted(KNOWN_SQL - set(found))
    assert not fixed, f"no SQL left, take them off KNOWN_SQL: {fixed}"
