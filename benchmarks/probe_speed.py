"""CPU per case of the suite probe, before (tests/checks/probe_reference.py, the probe as it
was) and after (checks/probe.py with checks/probe_fast.py), in the same run, on the 1,350-case
suite of tests/gating/test_what_to_fix.py and the bundled example. CPU time (user+sys), each
probe run on a freshly loaded suite, alternated, best of `--rounds`.

    uv run python benchmarks/probe_speed.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).parents[1]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tests" / "checks"), str(ROOT / "tests" / "gating")]

import probe_reference  # noqa: E402
import test_what_to_fix  # noqa: E402

from callgate.checks import probe  # noqa: E402
from callgate.suites.suite import load_suite  # noqa: E402


def _cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_SELF)
    return used.ru_utime + used.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    rounds = parser.parse_args().rounds
    with tempfile.TemporaryDirectory() as tmp:
        suites = {"what_to_fix": test_what_to_fix.project(Path(tmp))[0],
                  "example": ROOT / "src" / "callgate" / "examples" / "order_support"}
        for name, path in suites.items():
            best = {"old": float("inf"), "new": float("inf")}
            cases = 0
            for _ in range(rounds):
                for label, run in (("old", probe_reference.probe_suite),
                                   ("new", probe.probe_suite)):
                    suite = load_suite(path)
                    cases = len(suite.cases)
                    start = _cpu()
                    run(suite)
                    best[label] = min(best[label], _cpu() - start)
            old, new = (best[k] / cases * 1000 for k in ("old", "new"))
            print(f"{name}: {cases} cases, old {old:.3f} ms CPU/case, new {new:.3f} ms "
                  f"CPU/case, {old / new:.2f}x")


if __name__ == "__main__":
    main()
