"""Time strict trajectory matching on inputs that made the old subset search exponential.

Usage: uv run python benchmarks/trajectory_speed.py

Cases, for n same-name calls: the issue 13 reproduction (n weather calls expected one per
turn, then a booking; the model books in the same turn as n-1 of them) and one turn of n
parallel calls with distinct arguments in reverse order. The reference, measured in the same
run on the same input, is `unordered` matching (one plain bipartite matching): strict should
stay within a small factor of it at every n. The old search took 6.7 s at n = 16 and 174 s
and 1.9 GB at n = 22 on the reproduction.
"""

from __future__ import annotations

import time
from functools import partial

from callgate.checks.matching import Call, ReferenceStepCall, match_trajectory


def reproduction(n: int) -> tuple[list[Call], list[ReferenceStepCall], str]:
    expected = [ReferenceStepCall("gw", {}, i) for i in range(n)]
    expected += [ReferenceStepCall("book", {}, n)]
    actual = [Call("gw", {}, 0) for _ in range(n - 1)] + [Call("book", {}, 0), Call("gw", {}, 1)]
    return actual, expected, "ignore"


def parallel_turn(n: int) -> tuple[list[Call], list[ReferenceStepCall], str]:
    expected = [ReferenceStepCall("w", {"city": f"c{i}"}, i // 10) for i in range(n)]
    actual = [Call("w", {"city": f"c{i}"}, 0) for i in reversed(range(n))]
    return actual, expected, "key"


def best_of(repeats: int, run) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    print(f"{'case':<14}{'n':>5}{'strict ms':>12}{'unordered ms':>14}{'ratio':>8}  verdict")
    for name, build in (("reproduction", reproduction), ("parallel turn", parallel_turn)):
        for n in (16, 22, 50, 100, 200):
            actual, expected, rule = build(n)
            strict = best_of(3, partial(match_trajectory, actual, expected, "strict", args=rule))
            plain = best_of(3, partial(match_trajectory, actual, expected, "unordered", args=rule))
            verdict = match_trajectory(actual, expected, "strict", args=rule).ok
            print(
                f"{name:<14}{n:>5}{strict * 1e3:>12.2f}{plain * 1e3:>14.2f}"
                f"{strict / plain:>8.2f}  {'pass' if verdict else 'fail'}"
            )


if __name__ == "__main__":
    main()
