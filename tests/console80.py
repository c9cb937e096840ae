"""The installed CLI in an 80-column terminal without colour, as CI logs show it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

CALLGATE = str(Path(sys.executable).with_name("callgate"))


def cli80(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "80", "NO_COLOR": "1"}
    env.pop("CALLGATE_DB", None)
    return subprocess.run([CALLGATE, *args], capture_output=True, text=True, cwd=cwd, env=env,
                          timeout=120)
