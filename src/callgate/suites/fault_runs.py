"""A run's fault plan (`callgate run --faults FILE`, `callgate score --faults FILE`) put on a
loaded suite: read, its tools checked against the suite's catalogue, refused naming the file,
the line and the field (docs/faults.md)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from callgate.errors import InputError
from callgate.reading import names_lines
from callgate.suites.faults import ANY_TOOL, RunFaults, read_fault_plan
from callgate.suites.suite import Suite


@names_lines
def with_fault_plan(suite: Suite, path: Path | str) -> Suite:
    """`suite` with the plan of the file `path` on its tool results' seam."""
    source = Path(path)
    plan = read_fault_plan(source)
    for index, rule in enumerate(plan.faults):
        if rule.tool != ANY_TOOL and rule.tool not in suite.tools:
            raise InputError(source, f"{rule.tool!r} is not a tool of suite {suite.name} (a "
                             "catalogue name, or * for every tool)",
                             field=f"faults[{index}].tool")
    fallback = plan.after_fault.fallback if plan.after_fault is not None else None
    if fallback is not None and fallback not in suite.tools:
        raise InputError(source, f"{fallback!r} is not a tool of suite {suite.name}",
                         field="after_fault.fallback")
    return dataclasses.replace(suite, faults=RunFaults(plan))
