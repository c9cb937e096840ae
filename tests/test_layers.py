"""The packages are layered as the pipeline runs: a module may import its own package and the
layers below it, never a layer above or a sibling of its own layer. Every import counts, those
inside functions included (the CLI's lazy imports keep `callgate --help` fast; they may reach
down, never up), so no cycle can hide behind a lazy import."""

from __future__ import annotations

import ast
from pathlib import Path

import callgate
from callgate.checks.kinds import CHECKS
from callgate.checks.verdict import Verdict
from callgate.store.db import VERDICT_COLUMNS
from callgate.suites.suite import Expectation

SRC = Path(callgate.__file__).parent

# Lowest first. Packages on one line are siblings: neither imports the other.
LAYERS: list[tuple[str, ...]] = [
    ("callgate.version", "callgate.errors", "callgate.toml_lines"),
    ("callgate.reading", "callgate.stats"),
    ("callgate.store",),
    ("callgate.suites",),
    ("callgate.checks",),
    ("callgate.models", "callgate.importers"),
    ("callgate.judging",),
    ("callgate.scoring",),
    ("callgate.gating",),
    ("callgate.running",),  # live runs and merging shard stores re-check "not a result"
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


def imports(path: Path, module: str) -> set[str]:
    """Every callgate module the file imports, wherever the import statement is."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "callgate")
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                target = f"{base}.{node.module}" if node.module else base
            else:
                target = node.module or ""
            if target.split(".")[0] != "callgate":
                continue
            folder = SRC.parent / target.replace(".", "/")
            for alias in node.names:
                # `from callgate.checks import trajectory` imports a submodule
                if (folder / f"{alias.name}.py").exists() or (folder / alias.name).is_dir():
                    found.add(f"{target}.{alias.name}")
                else:
                    found.add(target)
    return found


def edges() -> list[tuple[str, str]]:
    out = []
    for path in sorted(SRC.rglob("*.py")):
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
    assert ("callgate.cli.main", "callgate.web.app") in found  # a lazy import inside a command
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
