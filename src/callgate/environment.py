"""Tool results for multi-turn cases: scripted per case, or a Python environment with state.

An environment is a class named in `suite.json` as `module:Class` with a constructor taking the
case's initial state, a `state()` method, and one method per tool. A method raises `ToolError`
for a domain error, which the model receives as the tool's answer; any other exception is an
environment error, never counted against the model.
"""

from __future__ import annotations

import copy
import hashlib
import importlib
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from callgate.errors import InputError


class ToolError(Exception):
    """A domain error a real tool would answer with (unknown order, not cancellable, ...)."""


class EnvironmentError_(Exception):  # not the builtin EnvironmentError (an OSError alias)
    """The environment itself failed: a bug or bad state, not something the model did."""


class Environment(Protocol):
    def state(self) -> dict[str, Any]: ...


EnvironmentFactory = Callable[[dict[str, Any]], Environment]


def load_environment(spec: str, suite_dir: Path, source: Path) -> EnvironmentFactory:
    """Import `module:Class`, with the suite directory on the import path."""
    module_name, _, class_name = spec.partition(":")
    if not module_name or not class_name:
        raise InputError(source, f"{spec!r} is not of the form module:Class",
                         field="environment")
    path = str(suite_dir.resolve())
    added = path not in sys.path
    if added:
        sys.path.insert(0, path)
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise InputError(source, f"cannot import {module_name}: {exc}",
                         field="environment") from None
    finally:
        if added:
            sys.path.remove(path)
    factory = getattr(module, class_name, None)
    if factory is None or not callable(factory):
        raise InputError(source, f"{module_name} has no class {class_name}", field="environment")
    if not callable(getattr(factory, "state", None)):
        raise InputError(source, f"{spec} has no state() method", field="environment")
    return factory


def state_hash(state: Any) -> str:
    return hashlib.sha256(json.dumps(state, sort_keys=True, separators=(",", ":"),
                                     ensure_ascii=False).encode()).hexdigest()


def fresh(factory: EnvironmentFactory, state: Mapping[str, Any]) -> Environment:
    try:
        return factory(copy.deepcopy(dict(state)))
    except Exception as exc:
        raise EnvironmentError_(f"the environment could not start: {exc!r}") from exc


def call_tool(env: Environment, name: str, arguments: Mapping[str, Any]) -> Any:
    """Run one call; a ToolError becomes the tool's answer, anything else is the env's fault."""
    method = getattr(env, name, None)
    if method is None or name.startswith("_") or name == "state":
        return {"error": f"unknown tool {name}"}
    try:
        return method(**arguments)
    except ToolError as exc:
        return {"error": str(exc)}
    except TypeError as exc:
        # Arguments the method does not take: the model's call is at fault, as with a real API.
        if "argument" in str(exc):
            return {"error": str(exc)}
        raise EnvironmentError_(f"{name} failed: {exc!r}") from exc
    except Exception as exc:
        raise EnvironmentError_(f"{name} failed: {exc!r}") from exc


def snapshot(env: Environment) -> dict[str, Any]:
    try:
        state = env.state()
        json.dumps(state)
    except Exception as exc:
        raise EnvironmentError_(f"state() failed or is not JSON: {exc!r}") from exc
    return state


def replay(factory: EnvironmentFactory, state: Mapping[str, Any],
           calls: Sequence[tuple[str, Mapping[str, Any]]]) -> dict[str, Any]:
    """The final state after running `calls` on a fresh environment."""
    env = fresh(factory, state)
    for name, arguments in calls:
        call_tool(env, name, arguments)
    return snapshot(env)


def state_difference(expected: Any, got: Any, path: str = "") -> str | None:
    """The first place two states differ, as `orders.ord_1.status: expected .., got ..`."""
    if isinstance(expected, dict) and isinstance(got, dict):
        for key in sorted(set(expected) | set(got), key=str):
            where = f"{path}.{key}" if path else str(key)
            if key not in got:
                return f"{where}: missing (expected {json.dumps(expected[key])[:60]})"
            if key not in expected:
                return f"{where}: unexpected {json.dumps(got[key])[:60]}"
            found = state_difference(expected[key], got[key], where)
            if found:
                return found
        return None
    if isinstance(expected, list) and isinstance(got, list) and len(expected) == len(got):
        for index, (a, b) in enumerate(zip(expected, got, strict=True)):
            found = state_difference(a, b, f"{path}[{index}]")
            if found:
                return found
        return None
    if json.dumps(expected, sort_keys=True) != json.dumps(got, sort_keys=True):
        return (f"{path or 'state'}: expected {json.dumps(expected)[:60]}, "
                f"got {json.dumps(got)[:60]}")
    return None


@dataclass(frozen=True)
class ScriptedResult:
    tool: str
    matches: Callable[[Mapping[str, Any]], bool]
    result: Any


def scripted_answer(results: Sequence[ScriptedResult], name: str,
                    arguments: Mapping[str, Any]) -> Any:
    for entry in results:
        if entry.tool == name and entry.matches(arguments):
            return entry.result
    return {"error": "no result scripted for this call"}
