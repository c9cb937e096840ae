"""BFCL's multi-turn environments, loaded from the `bfcl-eval` wheel the suite was imported
from (docs/bfcl.md, "Multi-turn"): callgate carries none of BFCL's classes.

suite.json names the wheel, `{"bfcl": "PATH", "sha256": "..."}`; the wheel is a zip of pure
Python, so it is put on the import path as it is (zipimport) and BFCL's modules are imported
from it under their own names. A case's `state` says which classes it involves and their
initial configuration, as BFCL's entry does. The environment does what BFCL's
`execute_multi_turn_func_call` (bfcl_eval/eval_checker/multi_turn_eval/multi_turn_utils.py)
does, without its `eval`: each involved class instantiated and given its scenario, a call
dispatched by name to the method of that name, and its result or error rendered as text as
BFCL renders it.
"""

from __future__ import annotations

import ast
import copy
import functools
import hashlib
import importlib
import inspect
import json
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from callgate.errors import InputError
from callgate.suites.tool_messages import ToolText

# multi_turn_utils.py refuses these names before it evaluates a call.
FORBIDDEN = ("kill", "exit", "quit", "remove", "unlink", "popen", "Popen", "run")
_MAPPING_MODULE = "bfcl_eval.constants.executable_backend_config"
# The modules of the package, dropped before a wheel is imported if another copy is loaded.
_PACKAGE = "bfcl_eval"
_IMPORTING = threading.Lock()  # sys.path and sys.modules are changed while importing
# BFCL's classes keep state beyond their instances (MathAPI sets mpmath's process-wide
# precision, long-context VehicleControl fills a module-level dict), and environments run on
# threads of their own: one BFCL call (or set-up) at a time, its result rendered inside.
_RUNNING = threading.RLock()


class BfclFailure(Exception):
    """BFCL's classes could not be loaded or started: the environment's fault, never the
    model's (suites.environment.fresh makes it an environment error)."""


class BfclSpec(BaseModel):
    """suite.json's `"environment": {"bfcl": WHEEL, "sha256": HEX}`."""

    model_config = ConfigDict(extra="forbid")
    bfcl: str = Field(min_length=1)  # the wheel's path, relative to the suite directory or not
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")


class BfclState(BaseModel):
    """A case's `state`: BFCL's `involved_classes` and `initial_config`, and whether the
    classes load their long-context scenario (BFCL's `long_context` categories)."""

    model_config = ConfigDict(extra="forbid")
    involved_classes: list[str] = Field(default_factory=list)  # none: a single-turn case
    initial_config: dict[str, Any] = Field(default_factory=dict)
    long_context: bool = False


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def copied(value: Any) -> Any:
    """A deep copy of `value`; JSON's values (what a case's state and a call's arguments are)
    copied without copy.deepcopy's bookkeeping, anything else by it."""
    kind = type(value)
    if kind is dict:
        return {key: copied(item) for key, item in value.items()}
    if kind is list:
        return [copied(item) for item in value]
    if kind is tuple:  # a call's positional arguments
        return tuple(copied(item) for item in value)
    if kind is str or kind is int or kind is float or kind is bool or value is None:
        return value
    return copy.deepcopy(value)


def _loaded_from(module: ModuleType | None) -> str:
    return str(getattr(module, "__file__", "") or "")


def import_from_wheel(wheel: Path, module_name: str) -> ModuleType:
    """`module_name` imported from `wheel` (and never from another copy of bfcl_eval)."""
    with _IMPORTING:
        return _import_from_wheel(wheel, module_name)


def _import_from_wheel(wheel: Path, module_name: str) -> ModuleType:
    where = str(wheel)
    package = sys.modules.get(_PACKAGE)
    if package is not None and not _loaded_from(package).startswith(where):
        for name in [n for n in sys.modules if n == _PACKAGE or n.startswith(_PACKAGE + ".")]:
            del sys.modules[name]
    sys.path.insert(0, where)
    try:
        module = importlib.import_module(module_name)
    finally:
        sys.path.remove(where)
    if not _loaded_from(module).startswith(where):
        raise ImportError(f"{module_name} was not loaded from {wheel}")
    return module


class BfclEnvironments:
    """The factory of a suite's BFCL environments: checks at load time that the wheel is there
    and is the one the suite was imported from; imports BFCL's modules when first needed."""

    # Only the cases with a state (BFCL's multi-turn ones) are played against it: a suite's
    # single-turn BFCL cases are asked once, as BFCL asks them (Suite.loops).
    state_only = True

    def __init__(self, spec: BfclSpec, suite_dir: Path, source: Path) -> None:
        wheel = Path(spec.bfcl)
        wheel = (wheel if wheel.is_absolute() else suite_dir / wheel).resolve()
        if not wheel.is_file():
            raise InputError(source, f"the bfcl-eval wheel {wheel} is missing: BFCL's "
                             "environment classes are loaded from it (give it back, or import "
                             "the suite again from another)", field="environment.bfcl")
        found = file_sha256(wheel)
        if found != spec.sha256:
            raise InputError(source, f"{wheel} is not the wheel the suite was imported from "
                             f"(sha256 {found[:12]}, the suite's {spec.sha256[:12]}); import "
                             "the suite again from it", field="environment.bfcl")
        self.wheel = wheel
        self.sha256 = found
        self._classes: dict[str, type] = {}
        self._mapping: tuple[dict[str, str], list[str]] | None = None
        # Per class, the names of its instances' public methods (as inspect.getmembers finds
        # them on the first instance: the same for every instance of a class).
        self._method_names: dict[str, list[str]] = {}

    def _module_of(self, class_name: str) -> tuple[str, bool]:
        """BFCL's module of a class, and whether the class is stateless (no scenario)."""
        if self._mapping is None:
            constants = import_from_wheel(self.wheel, _MAPPING_MODULE)
            self._mapping = (dict(constants.CLASS_FILE_PATH_MAPPING),
                             list(constants.STATELESS_CLASSES))
        modules, stateless = self._mapping
        if class_name not in modules:
            raise BfclFailure(f"BFCL has no environment class {class_name!r}")
        return modules[class_name], class_name in stateless

    def new_instance(self, class_name: str, config: Mapping[str, Any], long_context: bool
                     ) -> Any:
        """One class instantiated as multi_turn_utils does: `_load_scenario` with a deep copy
        of the class's initial configuration, unless the class is stateless."""
        module_name, stateless = self._module_of(class_name)
        if class_name not in self._classes:
            module = import_from_wheel(self.wheel, module_name)
            self._classes[class_name] = getattr(module, class_name)
        with _RUNNING:
            instance = self._classes[class_name]()
            if not stateless:
                instance._load_scenario(copied(dict(config.get(class_name, {}))),
                                        long_context=long_context)
        return instance

    def methods(self, class_name: str, instance: Any) -> list[tuple[str, Callable[..., Any]]]:
        """The instance's public methods, by name in name order (inspect.getmembers' order),
        the names found once per class."""
        names = self._method_names.get(class_name)
        if names is None:
            names = [name for name, _ in inspect.getmembers(instance, predicate=inspect.ismethod)
                     if not name.startswith("_")]
            self._method_names[class_name] = names
        return [(name, getattr(instance, name)) for name in names]

    def __call__(self, state: dict[str, Any]) -> BfclEnvironment:
        return BfclEnvironment(self, state)

    def source_fingerprint(self) -> str:
        return self.sha256


def _why_not_started(class_name: str, exc: Exception) -> str:
    """Why a BFCL class could not start; a package its module imports that is not installed
    is named, with how to install it (callgate depends on mpmath, MathAPI's)."""
    missing = exc.name if isinstance(exc, ModuleNotFoundError) else None
    if missing and not missing.startswith(_PACKAGE):
        package = missing.partition(".")[0]
        return (f"BFCL's {class_name} needs the Python package {package!r}, not installed beside "
                f"callgate: install it into callgate's environment (`pip install {package}`; "
                "callgate's own install brings mpmath, which MathAPI needs; docs/bfcl.md)")
    return f"BFCL's {class_name} could not start: {exc!r}"


def render(result: Any) -> str:
    """A method's result as BFCL hands it on: text as it is, a dict as JSON (else its str),
    anything else as its str."""
    if type(result) is str:
        return result
    if type(result) is dict:
        try:
            return json.dumps(result)
        except Exception:  # BFCL falls back to str() on any failure
            return str(result)
    return str(result)


def _jsonable(value: Any, above: frozenset[int] = frozenset()) -> Any:
    """An instance attribute as JSON, for `state()`: objects by their public attributes; an
    object met again below itself (a directory's parent) as a mark, not again."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if id(value) in above or len(above) > 100:
        return f"<{type(value).__name__} above>"
    inner = above | {id(value)}
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v, inner) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        items = sorted(value, key=repr) if isinstance(value, set | frozenset) else value
        return [_jsonable(v, inner) for v in items]
    if hasattr(value, "__dict__"):
        return {k: _jsonable(v, inner) for k, v in vars(value).items() if not k.startswith("_")}
    return repr(value)


def public_attributes(instance: Any) -> dict[str, Any]:
    """What BFCL's state checker compares: the attributes not starting with `_`."""
    return {k: v for k, v in vars(instance).items() if not k.startswith("_")}


def parse_source_call(text: str) -> tuple[str, list[Any], dict[str, Any]]:
    """A ground-truth call as BFCL writes it, `cd(folder='document')`, read without running
    it: the name, and the positional and keyword arguments (Python literals only)."""
    name, args, kwargs = _read_call(text)
    return name, copied(args), copied(kwargs)


@functools.lru_cache(maxsize=16384)
def _read_call(text: str) -> tuple[str, list[Any], dict[str, Any]]:
    """parse_source_call's reading, once per text (a suite's ground truth repeats its calls:
    BFCL's 800 multi-turn entries make 4,625 calls of 712 texts). Never handed out as it is:
    parse_source_call copies it, and a call copies its arguments before they are run."""
    try:
        node = ast.parse(text.strip(), mode="eval").body
    except SyntaxError as exc:
        raise ValueError(f"{text!r} is not a call: {exc.msg}") from None
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
        raise ValueError(f"{text!r} is not a call of a function by name")
    try:
        args = [ast.literal_eval(arg) for arg in node.args]
        kwargs = {kw.arg: ast.literal_eval(kw.value) for kw in node.keywords if kw.arg}
    except ValueError:
        raise ValueError(f"{text!r}: an argument is not a Python literal") from None
    if any(kw.arg is None for kw in node.keywords):
        raise ValueError(f"{text!r}: **arguments are not read")
    return node.func.id, args, kwargs


class BfclEnvironment:
    """One BFCL conversation's instances (one per involved class). A call is answered as
    BFCL's `execute_multi_turn_func_call` answers it, always with text; `results` keeps every
    answer given, in order."""

    def __init__(self, factory: BfclEnvironments, state: Mapping[str, Any]) -> None:
        try:
            config = BfclState.model_validate(state)
        except Exception as exc:  # pydantic's error, said as the env's failure
            raise BfclFailure(f"the case's state is not BFCL's: {exc}") from None
        self.instances: dict[str, Any] = {}
        self._methods: dict[str, Callable[..., Any]] = {}
        for class_name in config.involved_classes:
            try:
                instance = factory.new_instance(class_name, config.initial_config,
                                                config.long_context)
            except BfclFailure:
                raise
            except Exception as exc:
                raise BfclFailure(_why_not_started(class_name, exc)) from exc
            self.instances[class_name] = instance
            # A later class's method of the same name wins, as in BFCL's mapping.
            self._methods.update(factory.methods(class_name, instance))

    def call(self, name: str, /, *args: Any, **kwargs: Any) -> ToolText:
        """The model's (or a reference) call `name(*args, **kwargs)`, answered as BFCL does:
        in text, which the model reads as it is."""
        if name in FORBIDDEN:
            return ToolText(f"Error during execution: Function call {name} is not allowed.")
        method = self._methods.get(name)
        if method is None:  # what `eval` says of a name no involved class has
            return ToolText(f"Error during execution: name '{name}' is not defined")
        with _RUNNING:
            try:
                result = method(*copied(args), **copied(kwargs))
            except Exception as exc:  # BFCL answers every exception as text
                return ToolText(f"Error during execution: {exc}")
            return ToolText(render(result))

    def call_source(self, text: str) -> str:
        """A ground-truth call as BFCL writes it (`parse_source_call`), answered."""
        name, args, kwargs = _read_call(text)  # copied by call()
        return self.call(name, *args, **kwargs)

    def run_all(self, calls: Sequence[tuple[str, Mapping[str, Any]]]) -> list[str]:
        return [self.call(name, **dict(arguments)) for name, arguments in calls]

    def state(self) -> dict[str, Any]:
        """The instances' public attributes, as JSON (objects by their own attributes)."""
        return {name: _jsonable(public_attributes(instance))
                for name, instance in self.instances.items()}
