"""Instructions per check: callgate's `check_response` beside BFCL's decode + `ast_checker`.

Usage: uv run python benchmarks/check_instructions.py [PASSES]

On a shared machine CPU time is noise; instruction counts are not. Each figure is valgrind's
callgrind count ("Collected") of a child process that builds the responses of
`score_throughput.bfcl_workload` (the BFCL fixture cases answered right, and with BFCL's
perturbations mixed in) and runs one side PASSES times over them, divided by the checks
made. Instrumentation is off while the child imports and builds (`--instr-atstart=no`) and
is switched on around the passes only, by callgrind's client requests from a tiny C helper
compiled here (needs valgrind, its headers and a C compiler). BFCL's side deep-copies its
inputs before the passes (its checker may change them), outside the count. PYTHONHASHSEED
is fixed so that runs repeat.

The child: check_instructions.py --child {right,mix} {callgate,bfcl} PASSES HELPER
"""

from __future__ import annotations

import copy
import ctypes
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

HELPER = """#include <valgrind/callgrind.h>
void cg_start(void) { CALLGRIND_ZERO_STATS; CALLGRIND_START_INSTRUMENTATION; }
void cg_stop(void) { CALLGRIND_STOP_INSTRUMENTATION; }
"""


def child(workload: str, side: str, passes: int, helper: str) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from score_throughput import _bfcl_decode, bfcl_workload, load_harness

    from callgate.checks.check import check_response

    harness = load_harness()
    ast_checker = harness.load_ast_checker()
    counter = ctypes.CDLL(helper)
    with tempfile.TemporaryDirectory() as tmp:
        ours, theirs, _ = bfcl_workload(Path(tmp), workload == "right", harness, ast_checker)
        if side == "callgate":
            counter.cg_start()
            for _ in range(passes):
                for case, response, (schemas, validators, rules) in ours:
                    check_response(case, response, schemas, validators, rules=rules)
            counter.cg_stop()
            checks = len(ours)
        else:
            batches = [copy.deepcopy(theirs) for _ in range(passes)]
            language, model = harness.Language.PYTHON, harness.MODEL
            counter.cg_start()
            for batch in batches:
                for functions, names, message, truth, category in batch:
                    decoded = _bfcl_decode(harness, names, message)
                    ast_checker(functions, decoded, truth, language, category, model)
            counter.cg_stop()
            checks = len(theirs)
        print(f"checks {checks}")


def counted(helper: Path, *args: str) -> tuple[int, int]:
    """(instructions, checks made) of one child run under callgrind."""
    run = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
         "--instr-atstart=no", sys.executable, __file__, "--child", *args, str(helper)],
        capture_output=True, text=True, check=True, env={**os.environ, "PYTHONHASHSEED": "0"},
    )
    found = re.search(r"Collected : (\d+)", run.stderr)
    checks = re.search(r"checks (\d+)", run.stdout)
    assert found and checks, run.stderr[-2000:]
    return int(found.group(1)), int(checks.group(1))


def main() -> None:
    passes = sys.argv[1] if len(sys.argv) > 1 else "20"
    with tempfile.TemporaryDirectory() as tmp:
        source, helper = Path(tmp) / "cg.c", Path(tmp) / "libcg.so"
        source.write_text(HELPER)
        subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", str(helper), str(source)],
                       check=True)
        for workload, label in (("right", "right answers"), ("mix", "right and perturbed")):
            ours, ours_checks = counted(helper, workload, "callgate", passes)
            theirs, theirs_checks = counted(helper, workload, "bfcl", passes)
            ours_per, theirs_per = ours / (int(passes) * ours_checks), theirs / (
                int(passes) * theirs_checks)
            print(f"BFCL {label} ({ours_checks} responses, {theirs_checks} reach BFCL's "
                  f"checker; {passes} passes):")
            print(f"  callgate check_response  : {ours_per:,.0f} instructions per check")
            print(f"  BFCL decode + ast_checker: {theirs_per:,.0f} instructions per check")
            print(f"  ratio (BFCL / callgate)  : {theirs_per / ours_per:.2f}  "
                  f"(goal >= {1.0 if workload == 'right' else 0.5})")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5])
    else:
        main()
