"""BFCL's own summary figures, computed from per-category accuracies as BFCL computes them
(bfcl_eval/eval_checker/eval_runner_helper.py, `generate_leaderboard_csv`, bfcl-eval 2026.3.23).

A category not given counts as 0 in BFCL's overall figures and is shown "N/A" in its summary
columns; here such a figure is computed the same way and the categories it lacks are listed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

# (correct, total) of each category
Counts = Mapping[str, tuple[int, int]]


@dataclass(frozen=True)
class SummaryFigure:
    name: str
    pct: float  # 0-100
    lacking: tuple[str, ...]  # categories it needs that were not given (counted as 0)


def _accuracy(counts: Counts, category: str) -> float:
    correct, total = counts.get(category, (0, 0))
    return correct / total if total else 0.0


def _unweighted(parts: Sequence[float]) -> float:
    """calculate_unweighted_accuracy: the plain mean of the parts."""
    return sum(parts) / len(parts)


def _weighted(counts: Counts, categories: Sequence[str]) -> float:
    """calculate_weighted_accuracy: pooled over the categories' cases (a category not given
    adds no cases here; BFCL adds its full count at accuracy 0)."""
    total = sum(counts.get(c, (0, 0))[1] for c in categories)
    correct = sum(counts.get(c, (0, 0))[0] for c in categories)
    return correct / total if total else 0.0


NON_LIVE_SIMPLE = ("simple_python", "simple_java", "simple_javascript")
NON_LIVE = ("multiple", "parallel", "parallel_multiple")
LIVE = ("live_simple", "live_multiple", "live_parallel", "live_parallel_multiple")
IRRELEVANCE = ("irrelevance", "live_irrelevance")
MULTI_TURN = ("multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param",
              "multi_turn_long_context")
AGENTIC = ("web_search_base", "web_search_no_snippet", "memory_kv", "memory_vector",
           "memory_rec_sum")
# total_overall_accuracy: non-live, live, irrelevance, multi-turn, agentic, weights 10:10:10:30:40.
OVERALL_WEIGHTS = (10, 10, 10, 30, 40)


def bfcl_summary(counts: Counts) -> list[SummaryFigure]:
    """Non-live AST, live AST, irrelevance, multi-turn and overall accuracy, in points."""

    def lacking(categories: Sequence[str]) -> tuple[str, ...]:
        return tuple(c for c in categories if c not in counts)

    simple = _unweighted([_accuracy(counts, c) for c in NON_LIVE_SIMPLE])
    non_live = _unweighted([simple, *(_accuracy(counts, c) for c in NON_LIVE)])
    live = _weighted(counts, LIVE)
    irrelevance = _unweighted([_accuracy(counts, c) for c in IRRELEVANCE])
    multi_turn = _unweighted([_accuracy(counts, c) for c in MULTI_TURN])
    web = _unweighted([_accuracy(counts, c) for c in AGENTIC[:2]])
    memory = _unweighted([_accuracy(counts, c) for c in AGENTIC[2:]])
    agentic = _unweighted([web, memory])
    parts = (non_live, live, irrelevance, multi_turn, agentic)
    overall = sum(p * w for p, w in zip(parts, OVERALL_WEIGHTS, strict=True)) / sum(
        OVERALL_WEIGHTS)
    every = (*NON_LIVE_SIMPLE, *NON_LIVE, *LIVE, *IRRELEVANCE, *MULTI_TURN, *AGENTIC)
    return [
        SummaryFigure("non-live AST", 100 * non_live, lacking((*NON_LIVE_SIMPLE, *NON_LIVE))),
        SummaryFigure("live AST", 100 * live, lacking(LIVE)),
        SummaryFigure("irrelevance", 100 * irrelevance, lacking(IRRELEVANCE)),
        SummaryFigure("multi-turn", 100 * multi_turn, lacking(MULTI_TURN)),
        SummaryFigure("overall", 100 * overall, lacking(every)),
    ]


def summary_lines(counts: Counts) -> list[str]:
    """The summary as plain lines, when any BFCL category was scored."""
    if not counts:
        return []
    lines = ["BFCL summary (as BFCL computes it; a category not scored counts as 0):"]
    for figure in bfcl_summary(counts):
        named = ", ".join(figure.lacking) if len(figure.lacking) <= 4 else (
            f"{len(figure.lacking)} categories")
        note = f"  (without {named})" if figure.lacking else ""
        lines.append(f"  {figure.name}: {figure.pct:.2f}{note}")
    return lines


def category_counts(right_by_tag: Mapping[str, tuple[int, int]]) -> dict[str, tuple[int, int]]:
    """The (right arguments, scored) of each BFCL category among a run's per-tag figures."""
    every = {*NON_LIVE_SIMPLE, *NON_LIVE, *LIVE, *IRRELEVANCE, "live_relevance", *MULTI_TURN,
             *AGENTIC}
    return {tag: counts for tag, counts in right_by_tag.items() if tag in every}
