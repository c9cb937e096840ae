"""Server-side time of `callgate serve` for a release of 10,000 attempts.

Usage: uv run python benchmarks/serve_latency.py [ATTEMPTS] [REQUESTS]

Two releases of ATTEMPTS attempts each (the bundled example's responses cycled with new repeat
indices, as in score_throughput.py) are scored into a fresh store, not timed. Then the real
server (`callgate serve`, uvicorn on 127.0.0.1) is asked REQUESTS times for the second
release's page (figures, per-tag table, the gate's decision against the first release, flipped
cases, the first 100 attempts) and for its attempts API (100 a page, and filtered). The time is
the app's own, from its Server-Timing header; the first request of the release page, which
computes the gate decision (then cached, since a finished run never changes), is shown apart.
The reference, measured in the same run: reading the release's verdict rows with sqlite3.
Goal: median under 300 ms.
"""

from __future__ import annotations

import sqlite3
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from score_throughput import write_responses
from webserver import Server

from callgate.cli.demo import example_path
from callgate.scoring.pipeline import score_file
from callgate.store.db import Store
from callgate.suites.suite import load_suite


def app_ms(url: str) -> float:
    with urllib.request.urlopen(url, timeout=60) as response:
        response.read()
        timing = response.headers["server-timing"]
    return float(timing.split("dur=")[1])


def main() -> None:
    attempts = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
    requests = int(sys.argv[2]) if len(sys.argv) > 2 else 30
    suite = load_suite(example_path())
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "bench.db"
        responses = Path(tmp) / "responses.jsonl"
        write_responses(responses, attempts)
        with Store(db) as store:
            for release in ("r1", "r2"):
                result = score_file(suite, responses, store, model="bench", release=release,
                                    keep_verdicts=False)
        run_id = result.run_id

        start = time.perf_counter()
        for _ in range(requests):
            with sqlite3.connect(db) as conn:
                rows = conn.execute("SELECT * FROM verdicts WHERE run = ?", [run_id]).fetchall()
        reference = (time.perf_counter() - start) / requests * 1000
        assert len(rows) == attempts

        server = Server(db)
        try:
            page = f"{server.base}/runs/{run_id}"
            first = app_ms(page)
            timings = {
                "release page": [app_ms(page) for _ in range(requests)],
                "attempts API (100)": [app_ms(f"{server.base}/api/runs/{run_id}/attempts")
                                       for _ in range(requests)],
                "attempts API, verdict=fail, tag=clean": [
                    app_ms(f"{server.base}/api/runs/{run_id}/attempts?verdict=fail&tag=clean")
                    for _ in range(requests)],
                "attempts API, tool=cancel_order": [
                    app_ms(f"{server.base}/api/runs/{run_id}/attempts?tool=cancel_order")
                    for _ in range(requests)],
                "release page, attempts 5001–5100": [
                    app_ms(f"{server.base}/runs/{run_id}?offset=5000") for _ in range(requests)],
            }
        finally:
            server.stop()
    print(f"release of {attempts} attempts (baseline of {attempts}), {requests} requests each; "
          "server-side time (Server-Timing)")
    print(f"  release page, first request (computes the gate decision): {first:8.1f} ms")
    for name, values in timings.items():
        median = statistics.median(values)
        print(f"  {name:<42} median {median:7.1f} ms  max {max(values):7.1f} ms  "
              f"({median / reference:.1f}× the reference)")
    print(f"  reference: sqlite3 reading the release's {attempts} verdict rows: "
          f"{reference:.1f} ms")
    print("  goal: median under 300 ms")


if __name__ == "__main__":
    main()
