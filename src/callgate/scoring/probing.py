"""The probe of a suite (checks/probe.py) with the oracle values its match rules need (an
imported BFCL suite's come from BFCL's possible answers), and its findings kept with a suite
the first time it is scored, so the gate can warn about cases that cannot gate."""

from __future__ import annotations

from collections.abc import Callable

from callgate.checks.probe import ProbeReport, probe_suite
from callgate.store.db import Store
from callgate.suites.suite import Suite

# Above this many cases a suite is not probed while it is scored (about 700 cases a second):
# `callgate suite check --probe` probes it on demand.
PROBE_WHEN_SCORED = 2000


def probe(suite: Suite, progress: Callable[[int], None] | None = None) -> ProbeReport:
    arguments = None
    if suite.match.values == "bfcl":
        from callgate.importers.bfcl.answers import answer_arguments  # only for BFCL's

        arguments = answer_arguments
    return probe_suite(suite, arguments=arguments, progress=progress)


def keep_probe(store: Store, suite: Suite) -> None:
    """Probe a suite not probed before (small enough, and without an environment: every made-up
    answer would run the suite's own code or call its MCP server, in the scoring process) and
    keep what it found with the suite."""
    if len(suite.cases) > PROBE_WHEN_SCORED or suite.environment is not None:
        return
    if store.suite_probe(suite.fingerprint) is not None:
        return
    store.set_suite_probe(suite.fingerprint, probe(suite).reasons())
