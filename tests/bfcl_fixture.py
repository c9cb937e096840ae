"""BFCL's vendored checker and the harness around it (tests/fixtures/bfcl), loaded once under
the name `bfcl_harness`, for the tests and for the benchmarks that compare with BFCL."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).parent / "fixtures" / "bfcl"


def load_harness() -> Any:
    """tests/fixtures/bfcl/harness.py as a module (registered before it runs: its dataclasses
    look themselves up in sys.modules)."""
    if "bfcl_harness" in sys.modules:
        return sys.modules["bfcl_harness"]
    spec = importlib.util.spec_from_file_location("bfcl_harness", FIXTURES / "harness.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bfcl_harness"] = module
    spec.loader.exec_module(module)
    return module
