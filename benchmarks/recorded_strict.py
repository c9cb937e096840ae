"""What refusing a field given twice costs when reading recorded responses.

    uv run python benchmarks/recorded_strict.py [N]

Writes N recorded lines (default 100,000; half plain ASCII, half with non-ASCII text that
json.dumps writes as \\u escapes, each with a tool call) and reads them with `read_responses`
twice, in the same run: as callgate reads them (every line's text is looked at for a field
given twice, and a line naming one twice or a key spelled with an escape is parsed again), and
as the reference, with that look switched off. Prints lines per second for both and the
overhead, best of 5 runs of each, alternated.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

from callgate.suites import responses


def write_lines(path: Path, n: int) -> None:
    with path.open("w", encoding="utf-8") as handle:
        for index in range(n):
            text = "Grüße aus Köln, Bestellung " if index % 2 else "Looking up order "
            arguments = json.dumps({"order_id": f"ord_{index}", "note": text * 3})
            handle.write(json.dumps({"case_id": f"c{index % 500}", "repeat": index // 500,
                                     "response": {"role": "assistant", "content": text * 4,
                                                  "tool_calls": [{
                                                      "id": "call_1", "type": "function",
                                                      "function": {"name": "lookup_order",
                                                                   "arguments": arguments}}]},
                                     "latency_ms": 812.5}) + "\n")


def seconds(path: Path, n: int) -> float:
    started = time.perf_counter()
    count = sum(1 for _ in responses.read_responses(path))
    assert count == n
    return time.perf_counter() - started


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    original = responses.twice_given
    checked, reference = float("inf"), float("inf")
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "responses.jsonl"
        write_lines(path, n)
        for _ in range(5):  # alternated, so that a busy machine slows both alike
            checked = min(checked, seconds(path, n))
            responses.twice_given = lambda text, keys: None  # type: ignore[assignment]
            try:
                reference = min(reference, seconds(path, n))
            finally:
                responses.twice_given = original
    print(f"{n:,} lines, half with \\u escapes, best of 5 alternated")
    print(f"  read, fields given twice refused:    {n / checked:,.0f} lines/s")
    print(f"  read, without that look (reference): {n / reference:,.0f} lines/s")
    print(f"  overhead: {100 * (checked / reference - 1):.1f}%")


if __name__ == "__main__":
    main()
