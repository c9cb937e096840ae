"""Server-side time of `callgate serve`, and `callgate gate`, at 100,000 attempts.

Usage: uv run python benchmarks/serve_latency.py [ATTEMPTS] [REQUESTS]

Two stores, each with two releases (r1, the baseline, then r2) of ATTEMPTS attempts, scored
and gated before anything is timed:

- repeats: the bundled example's responses cycled with new repeat indices (few cases, many
  repeats each, as in score_throughput.py);
- flips: ATTEMPTS cases of one attempt each (the example's cases copied under new ids, as in
  score_memory.py), r1 answered as the example's 2026.10 and r2 as its 2026.11, so many
  cases flip.

Timed: `callgate gate` on r2 (the installed CLI, wall time, run twice: the first decides and
stores, the second decides again); then every page and API route, each cold (the first
request to a fresh server process) and warm (the median of REQUESTS more), by the app's own
Server-Timing header (wall and CPU: on a busy machine the wall time is mostly waiting for a
CPU); the server's peak RSS. The references, measured in the same run:
sqlite3 reading both releases' verdict rows, and r2's verdict rows and response lines alone
(what the attempt filters choose from). Goals (issue 23): every page under 300 ms
cold, `gate` under 1 s, server RSS under 150 MB.
"""

from __future__ import annotations

import json
import os
import resource
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import quote, urlencode

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from score_memory import make_suite
from score_throughput import write_responses
from webserver import Server, callgate_script

from callgate.cli.demo import example_path
from callgate.scoring.pipeline import score_file
from callgate.store.db import Store
from callgate.suites.suite import load_suite


def app_ms(url: str) -> tuple[float, float]:
    """(wall, CPU) milliseconds the app spent on a request, from its Server-Timing header."""
    try:
        with urllib.request.urlopen(url, timeout=300) as response:
            response.read()
            timing = response.headers["server-timing"]
    except urllib.error.HTTPError as exc:
        raise SystemExit(f"{url}: {exc.code} {exc.read()[:300]!r}") from None
    wall, cpu = (float(part.split("dur=")[1]) for part in timing.split(","))
    return wall, cpu


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def repeats_store(tmp: Path, attempts: int) -> tuple[Path, str]:
    db = tmp / "repeats.db"
    responses = tmp / "repeats.jsonl"
    write_responses(responses, attempts)
    suite = load_suite(example_path())
    with Store(db) as store:
        for release in ("r1", "r2"):
            score_file(suite, responses, store, model="bench", release=release,
                       keep_verdicts=False)
    return db, suite.name


def flips_store(tmp: Path, cases: int) -> tuple[Path, str]:
    db = tmp / "flips.db"
    plan = make_suite(tmp / "flips-suite", cases)
    suite = load_suite(tmp / "flips-suite")
    with Store(db) as store:
        for release, pick in (("r1", 0), ("r2", -1)):  # 2026.10's answer, then 2026.11's
            responses = tmp / f"flips-{release}.jsonl"
            with responses.open("w") as out:
                for case_id, texts in plan:
                    if texts:
                        item = json.loads(texts[pick])
                        item["case_id"], item["repeat"] = case_id, 0
                        out.write(json.dumps(item) + "\n")
            score_file(suite, responses, store, model="bench", release=release,
                       keep_verdicts=False)
    return db, suite.name


def gate_seconds(db: Path, release: str) -> tuple[float, float, int]:
    """(wall, CPU) seconds of `callgate gate` and its exit code."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run([callgate_script(), "gate", "--model", "bench", "--release", release,
                           "--db", str(db)], capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in (0, 1, 3):
        raise SystemExit(f"callgate gate failed: {done.stderr}")
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return wall, cpu, done.returncode


def measure(name: str, db: Path, suite: str, requests: int) -> None:
    with sqlite3.connect(db) as conn:
        ids = dict(conn.execute("SELECT release, id FROM runs"))
        rows = conn.execute("SELECT COUNT(*) FROM verdicts WHERE run = ?", [ids["r2"]]
                            ).fetchone()[0]
        first_case, first_repeat = conn.execute(
            "SELECT case_id, repeat FROM verdicts WHERE run = ? ORDER BY case_id, repeat "
            "LIMIT 1", [ids["r2"]]).fetchone()
    start = time.perf_counter()
    for _ in range(requests):
        with sqlite3.connect(db) as conn:
            read = conn.execute("SELECT * FROM verdicts WHERE run IN (?, ?)",
                                [ids["r1"], ids["r2"]]).fetchall()
    reference = (time.perf_counter() - start) / requests * 1000
    assert len(read) == 2 * rows
    # the rows the attempt filters choose from: r2's verdicts, and its response lines (which
    # the tool filter read before the marks)
    one_run = {}
    for label, sql in (("verdict rows", "SELECT * FROM verdicts WHERE run = ?"),
                       ("response lines", "SELECT case_id, repeat, body FROM responses "
                                          "WHERE run = ?")):
        start = time.perf_counter()
        for _ in range(requests):
            with sqlite3.connect(db) as conn:
                assert len(conn.execute(sql, [ids["r2"]]).fetchall()) == rows
        one_run[label] = (time.perf_counter() - start) / requests * 1000

    gate_seconds(db, "r1")
    gate_first, gate_first_cpu, outcome = gate_seconds(db, "r2")
    gate_again, gate_again_cpu, _ = gate_seconds(db, "r2")
    with sqlite3.connect(db) as conn:
        flipped = json.loads(conn.execute("SELECT gate FROM runs WHERE id = ?", [ids["r2"]]
                                          ).fetchone()[0])
    run = ids["r2"]
    model_suite = urlencode({"model": "bench", "suite": suite})
    pages = {
        "/": "/",
        "/releases": f"/releases?{model_suite}",
        "/runs/ID": f"/runs/{run}",
        "/runs/ID, flipped cases 1001-1100": f"/runs/{run}?worse=1000",
        "/runs/ID, attempts 5001-5100": f"/runs/{run}?offset=5000",
        "/runs/ID/attempts/CASE/REPEAT":
            f"/runs/{run}/attempts/{quote(first_case, safe='')}/{first_repeat}",
        "/compare?run=r1&run=r2": "/compare?" + urlencode({"run": [ids["r1"], run]},
                                                          doseq=True),
        "/compare?suite": "/compare?" + urlencode({"suite": suite}),
        "/api/releases?model": "/api/releases?model=bench",
        "/api/releases?model&suite": f"/api/releases?{model_suite}",
        "/api/runs/ID": f"/api/runs/{run}",
        "/api/runs/ID/attempts": f"/api/runs/{run}/attempts",
        "/api/runs/ID/attempts?verdict": f"/api/runs/{run}/attempts?verdict=wrong_tool",
        "/api/runs/ID/attempts?verdict&tag": f"/api/runs/{run}/attempts?verdict=fail&tag=clean",
        "/api/runs/ID/attempts?tool": f"/api/runs/{run}/attempts?tool=cancel_order",
        "/api/gate": "/api/gate?model=bench&release=r2",
    }
    cold: dict[str, tuple[float, float]] = {}
    warm: dict[str, tuple[float, float]] = {}
    rss = 0.0
    for label, path in pages.items():
        server = Server(db, probe="/static/app.css")
        try:
            cold[label] = app_ms(server.base + path)
            timings = [app_ms(server.base + path) for _ in range(requests)]
            warm[label] = (statistics.median(t[0] for t in timings),
                           statistics.median(t[1] for t in timings))
            rss = max(rss, peak_rss_mb(server.process.pid))
        finally:
            server.stop()
    server = Server(db, probe="/static/app.css")  # one process over every page: its peak RSS
    try:
        for path in pages.values():
            for _ in range(3):
                app_ms(server.base + path)
        rss_all = peak_rss_mb(server.process.pid)
    finally:
        server.stop()

    print(f"\n{name}: r2 of {rows:,} attempts against r1 of {rows:,} "
          f"(gate exit {outcome}: {flipped['outcome']})")
    print(f"  callgate gate r2: {gate_first:.2f} s wall, {gate_first_cpu:.2f} s CPU (first); "
          f"{gate_again:.2f} s wall, {gate_again_cpu:.2f} s CPU (again)   goal < 1 s")
    print(f"  reference: sqlite3 reading both releases' {2 * rows:,} verdict rows: "
          f"{reference:.1f} ms")
    for label, ms in one_run.items():
        print(f"  reference: sqlite3 reading r2's {rows:,} {label}: {ms:.1f} ms")
    print(f"  {'page (ms: wall / CPU)':<40} {'cold':>15} {'warm':>15}")
    for label in pages:
        print(f"  {label:<40} {cold[label][0]:7.1f} /{cold[label][1]:6.1f} "
              f"{warm[label][0]:7.1f} /{warm[label][1]:6.1f}")
    print(f"  slowest cold: {max(c[0] for c in cold.values()):.1f} ms wall, "
          f"{max(c[1] for c in cold.values()):.1f} ms CPU   goal < 300 ms")
    print(f"  server peak RSS: {rss:.0f} MB one page a process, {rss_all:.0f} MB every page in "
          "one process   goal < 150 MB")


def main() -> None:
    if os.environ.get("PYTHONDONTWRITEBYTECODE"):
        print("note: PYTHONDONTWRITEBYTECODE is set: without .pyc files every process compiles "
              "its imports (seconds of CPU), as an installed callgate would not")
    print(f"load average at start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs "
          "(wall times grow with it; CPU times do not)")
    attempts = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    requests = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    with tempfile.TemporaryDirectory() as tmp:
        db, suite = repeats_store(Path(tmp), attempts)
        measure("repeats", db, suite, requests)
        db, suite = flips_store(Path(tmp), attempts)
        measure("flips", db, suite, requests)


if __name__ == "__main__":
    main()
