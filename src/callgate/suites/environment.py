"""Tool results for multi-turn cases: scripted per case, a Python environment with state, or
an MCP server.

An environment is a class named in `suite.json` as `module:Class` with a constructor taking the
case's initial state, a `state()` method, and one method per tool. A method raises `ToolError`
for a domain error, which the model receives as the tool's answer; any other exception is an
environment error, never counted against the model. `{"mcp": "command args"}` names an MCP
server instead (McpEnvironment below): one server process per environment made, its tool
errors the model's answers, the server failing the environment's error.
"""

from __future__ import annotations

import copy
import hashlib
import importlib
import importlib.util
import inspect
import json
import os
import sys
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol, cast

from pydantic import BaseModel, ConfigDict, Field

from callgate.errors import InputError
from callgate.reading import validate
from callgate.redaction import clean, secrets_in
from callgate.suites import bfcl_environment as bfcl
from callgate.suites.environment_guard import Guarded, Hung
from callgate.suites.mcp_tools import (
    DEFAULT_TIMEOUT,
    MAX_TIMEOUT,
    McpFailure,
    McpServer,
    parse_command,
)


class ToolError(Exception):
    """A domain error a real tool would answer with (unknown order, not cancellable, ...)."""


class EnvironmentError_(Exception):  # not the builtin EnvironmentError (an OSError alias)
    """The environment itself failed: a bug or bad state, not something the model did. Its
    message goes through callgate.redaction's rule: the environment is the suite's code, and
    what it raised may quote a key or hold terminal escapes."""

    def __init__(self, message: str) -> None:
        super().__init__(clean(message, secrets_in(os.environ)))


class Environment(Protocol):
    def state(self) -> dict[str, Any]: ...


EnvironmentFactory = Callable[[dict[str, Any]], Environment]


def load_environment(spec: object, suite_dir: Path, source: Path) -> EnvironmentFactory:
    """Import `module:Class`, with the suite directory on the import path, or describe the
    MCP server `{"mcp": "command args", ...}` names (started only when an environment is made).

    A module that is a file of the suite directory is loaded from that file under a name of its
    own, so two suites that both have an `env.py` never share (or reuse) each other's module.
    """
    if isinstance(spec, dict) and "bfcl" in spec:  # BFCL's classes, from its wheel
        return bfcl.BfclEnvironments(validate(bfcl.BfclSpec, spec, source, prefix="environment."),
                                     suite_dir, source)
    if isinstance(spec, dict):
        return McpEnvironments(validate(McpSpec, spec, source, prefix="environment."), suite_dir,
                               source)
    if not isinstance(spec, str) or not spec:
        raise InputError(source, 'must be a string naming module:Class, or {"mcp": "command '
                         'args"}', field="environment")
    module_name, _, class_name = spec.partition(":")
    if not module_name or not class_name:
        raise InputError(source, f"{spec!r} is not of the form module:Class",
                         field="environment")
    try:
        module = import_beside(module_name, suite_dir)
    except Exception as exc:  # a syntax error or a failing import in the module is the suite's
        raise InputError(source, f"cannot import {module_name}: {exc}",
                         field="environment") from None
    factory = getattr(module, class_name, None)
    if factory is None or not callable(factory):
        raise InputError(source, f"{module_name} has no class {class_name}", field="environment")
    if not callable(getattr(factory, "state", None)):
        raise InputError(source, f"{spec} has no state() method", field="environment")
    return cast(EnvironmentFactory, factory)  # a class with state(): checked just above


def import_beside(module_name: str, suite_dir: Path) -> ModuleType:
    """Import `module_name` with the suite directory on the import path."""
    path = str(suite_dir.resolve())
    added = path not in sys.path
    if added:
        sys.path.insert(0, path)
    try:
        return _import(module_name, suite_dir)
    finally:
        if added:
            sys.path.remove(path)


class SuiteFunctions:
    """The `module:function` predicates a suite's cases name, each imported once from beside
    the suite (as an environment is); called with a name, returns the function or raises
    ValueError saying why it cannot."""

    def __init__(self, suite_dir: Path) -> None:
        self._dir = suite_dir
        self.loaded: dict[str, Callable[[Any], Any]] = {}

    def __call__(self, spec: str) -> Callable[[Any], Any]:
        found = self.loaded.get(spec)
        if found is not None:
            return found
        module_name, _, name = spec.partition(":")
        try:
            module = import_beside(module_name, self._dir)
        except Exception as exc:  # the suite's code failing to import is the suite's error
            raise ValueError(f"cannot import {module_name}: {exc}") from None
        function = getattr(module, name, None)
        if function is None or not callable(function):
            raise ValueError(f"{module_name} has no function {name}")
        self.loaded[spec] = function
        return cast(Callable[[Any], Any], function)

    def fingerprint(self) -> dict[str, str | None]:
        """SHA-256 of the file each predicate is defined in, by name (they decide verdicts)."""
        return {spec: environment_fingerprint(function)
                for spec, function in sorted(self.loaded.items())}


def _import(module_name: str, suite_dir: Path) -> ModuleType:
    file = suite_dir / f"{module_name}.py"
    if "." in module_name or not file.is_file():
        return importlib.import_module(module_name)
    text = file.read_bytes()
    digest = hashlib.sha256(str(file.resolve()).encode() + b"\0" + text).hexdigest()[:16]
    unique = f"_callgate_env_{module_name}_{digest}"
    if unique in sys.modules:  # the same file with the same content: the same module
        return sys.modules[unique]
    found = importlib.util.spec_from_file_location(unique, file)
    if found is None or found.loader is None:
        raise ImportError(f"cannot load {file}")
    module = importlib.util.module_from_spec(found)
    sys.modules[unique] = module  # classes defined in it (dataclasses, ...) look themselves up
    try:
        found.loader.exec_module(module)
    except BaseException:
        del sys.modules[unique]
        raise
    return module


def spec_fingerprinted(spec: object) -> object:
    """What of `environment` in suite.json the fingerprint covers: all of it, but where a
    BFCL wheel lies (its sha256 says what it is), so the suite is the same at any path."""
    if isinstance(spec, dict) and "bfcl" in spec:
        return {key: value for key, value in spec.items() if key != "bfcl"}
    return spec


def environment_fingerprint(factory: Callable[..., Any]) -> str | None:
    """SHA-256 of the file the environment (or a predicate) is defined in: its behaviour
    decides verdicts."""
    if isinstance(factory, McpEnvironments):
        return factory.source_fingerprint()
    if isinstance(factory, bfcl.BfclEnvironments):
        return factory.source_fingerprint()  # the wheel's sha256
    try:
        file = inspect.getsourcefile(factory)
    except TypeError:
        return None
    if file is None:
        return None
    try:
        return hashlib.sha256(Path(file).read_bytes()).hexdigest()
    except OSError:
        return None


def state_hash(state: Any) -> str:
    return hashlib.sha256(json.dumps(state, sort_keys=True, separators=(",", ":"),
                                     ensure_ascii=False).encode()).hexdigest()


def fresh(factory: EnvironmentFactory, state: Mapping[str, Any]) -> Environment:
    """A new environment in the state given. A Python environment is made (and later called)
    on a thread of its own, each step bounded by `environment_guard.TIMEOUT`."""
    try:
        if isinstance(factory, McpEnvironments | bfcl.BfclEnvironments):
            return factory(copy.deepcopy(dict(state)))
        return Guarded(factory, copy.deepcopy(dict(state)))
    except EnvironmentError_:
        raise
    except Hung as exc:
        raise EnvironmentError_(f"the environment could not start: {exc}") from None
    except Exception as exc:
        raise EnvironmentError_(f"the environment could not start: {exc!r}") from exc


def _tool_of(env: Environment, name: str) -> Callable[..., Any] | None:
    """The callable a call to `name` runs, or None for a tool the environment lacks. An MCP
    server's tools are its own (so a tool named `close` is the server's, never the adapter's
    method); a Python environment's are its public methods but `state`."""
    if isinstance(env, McpEnvironment):
        return None if name == env.state_tool else partial(env.call, name)
    if isinstance(env, bfcl.BfclEnvironment):  # every name is answered, as BFCL answers it
        return partial(env.call, name)
    if isinstance(env, Guarded):
        env = env.inner
    method = getattr(env, name, None)
    if method is None or name.startswith("_") or name == "state" or not callable(method):
        return None
    return cast(Callable[..., Any], method)


def call_tool(env: Environment, name: str, arguments: Mapping[str, Any]) -> Any:
    """Run one call; a ToolError becomes the tool's answer, anything else is the env's fault.

    Arguments the method does not take are the call's fault, as with a real API: the model gets
    an error back. The answer must be JSON, since it goes back to the model as JSON.
    """
    method = _tool_of(env, name)
    if method is None:
        return {"error": f"unknown tool {name}"}
    arguments = copy.deepcopy(dict(arguments))  # the environment may keep what it is given
    try:
        inspect.signature(method).bind(**arguments)
    except TypeError as exc:
        return {"error": f"{name}: {exc}"}
    except ValueError:  # no signature to read (a builtin): let the call itself decide
        pass
    try:
        answer = (env.run(method, arguments, name) if isinstance(env, Guarded)
                  else method(**arguments))
    except ToolError as exc:
        return {"error": str(exc)}
    except EnvironmentError_:
        raise
    except Hung as exc:
        raise EnvironmentError_(str(exc)) from None
    except Exception as exc:
        raise EnvironmentError_(f"{name} failed: {exc!r}") from exc
    try:
        json.dumps(answer)
    except (TypeError, ValueError) as exc:
        raise EnvironmentError_(f"{name} returned something that is not JSON: {exc}") from exc
    return answer


def snapshot(env: Environment) -> dict[str, Any]:
    """A copy of the state as JSON reads it back (state() may hand out its live object)."""
    try:
        state: dict[str, Any] = json.loads(json.dumps(env.state()))
        return state
    except Hung as exc:
        raise EnvironmentError_(str(exc)) from None
    except Exception as exc:
        raise EnvironmentError_(f"state() failed or is not JSON: {exc!r}") from exc


def replay(factory: EnvironmentFactory, state: Mapping[str, Any],
           calls: Sequence[tuple[str, Mapping[str, Any]]]) -> dict[str, Any]:
    """The final state after running `calls` on a fresh environment."""
    env = fresh(factory, state)
    for name, arguments in calls:
        call_tool(env, name, arguments)
    return snapshot(env)


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= 60 else text[:57] + "..."


def state_difference(expected: Any, got: Any, path: str = "") -> str | None:
    """The first place two states differ, as `orders.ord_1.status: expected .., got ..`."""
    if isinstance(expected, dict) and isinstance(got, dict):
        for key in sorted(set(expected) | set(got), key=str):
            where = f"{path}.{key}" if path else str(key)
            if key not in got:
                return f"{where}: missing (expected {_short(expected[key])})"
            if key not in expected:
                return f"{where}: unexpected {_short(got[key])}"
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
    # The same text as state_hash reads, so equal here means the same hash.
    if json.dumps(expected, sort_keys=True) != json.dumps(got, sort_keys=True):
        return f"{path or 'state'}: expected {_short(expected)}, got {_short(got)}"
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


class McpSpec(BaseModel):
    """suite.json's `"environment": {"mcp": "command args", "state": TOOL, "timeout": S}`."""

    model_config = ConfigDict(extra="forbid")
    mcp: str = Field(min_length=1)
    state: str | None = Field(None, min_length=1)  # the tool that returns the server's state
    # Seconds; bounded, since 1e400 reads as infinity and a thread's wait refuses that much.
    timeout: float = Field(DEFAULT_TIMEOUT, gt=0, le=MAX_TIMEOUT, allow_inf_nan=False)


class McpEnvironments:
    """The factory of a suite's MCP environments: each one a server process of its own, so
    every attempt (and every replay of its calls) starts from the case's state."""

    def __init__(self, spec: McpSpec, suite_dir: Path, source: Path) -> None:
        try:
            self.command = parse_command(spec.mcp)
        except ValueError as exc:
            raise InputError(source, f"cannot read the command: {exc}",
                             field="environment.mcp") from None
        self.spec = spec
        self.suite_dir = suite_dir

    @property
    def reads_state(self) -> bool:
        return self.spec.state is not None

    def __call__(self, state: dict[str, Any]) -> McpEnvironment:
        return McpEnvironment(self, state)

    def source_fingerprint(self) -> str | None:
        """SHA-256 of the command's files inside the suite directory (`server.py` in
        `python server.py`): like a Python environment's file, they decide results."""
        digest = hashlib.sha256()
        found = False
        for word in self.command:
            file = self.suite_dir / word
            if file.is_file() and file.resolve().is_relative_to(self.suite_dir.resolve()):
                digest.update(word.encode() + b"\0" + file.read_bytes())
                found = True
        return digest.hexdigest() if found else None


class McpEnvironment:
    """One MCP server over stdio as an environment: its tools are this object's methods.

    The case's initial state reaches the server as JSON in the CALLGATE_STATE variable; its
    state is what the tool suite.json names as `state` returns (JSON text). A result with
    isError is the tool's answer (`{"error": text}`), the server failing or not answering in
    time is an environment error. The process ends when the object is dropped or at exit."""

    def __init__(self, factory: McpEnvironments, state: dict[str, Any]) -> None:
        self._factory = factory
        server = McpServer(factory.command, cwd=factory.suite_dir,
                           env={"CALLGATE_STATE": json.dumps(state)},
                           timeout=factory.spec.timeout)
        try:
            server.start()
        except McpFailure as exc:
            hint = "; raise the environment's \"timeout\" in suite.json" if exc.slow_start else ""
            raise EnvironmentError_(f"MCP server {factory.spec.mcp!r}: {exc}{hint}") from None
        self._server = server
        weakref.finalize(self, server.close)

    @property
    def state_tool(self) -> str | None:
        return self._factory.spec.state

    def call(self, name: str, /, **arguments: Any) -> Any:
        """The server's tool `name` on these arguments (the server checks them)."""
        return self._call(name, arguments)

    def _call(self, name: str, arguments: Mapping[str, Any]) -> Any:
        try:
            reply = self._server.call_tool(name, arguments)
        except McpFailure as exc:
            raise EnvironmentError_(f"MCP server {self._factory.spec.mcp!r}: {exc}") from None
        if reply.is_error:
            raise ToolError(reply.text)
        try:  # a tool answering JSON text is read back, so the model sees what it sent
            return json.loads(reply.text)
        except ValueError:
            return reply.text

    def state(self) -> dict[str, Any]:
        reader = self._factory.spec.state
        if reader is None:
            return {}  # final_state cases are refused without a reader (case_checks)
        try:
            found = self._call(reader, {})
        except ToolError as exc:
            raise EnvironmentError_(f"the state tool {reader} answered an error: {exc}") from None
        if not isinstance(found, dict):
            raise EnvironmentError_(f"the state tool {reader} did not answer a JSON object")
        return found

    def close(self) -> None:
        self._server.close()
