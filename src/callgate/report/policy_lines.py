"""The policy figures and the unwarranted-call rate of a run, as plain lines for the terminal
(docs/policies.md)."""

from __future__ import annotations

from callgate.scoring.scores import Scores


def policy_lines(scores: Scores) -> list[str]:
    """One line per declared policy (attempts that broke it, per 100), then the unwarranted-call
    rate; nothing for a suite with neither."""
    lines = []
    figures = scores.policies
    if figures is not None:
        for name, figure in figures.by_policy.items():
            rate = f"{figure.per_100:.1f}" if figure.per_100 is not None else "–"
            line = (f"policy {name}: {figure.violations} of {figures.scored} scored attempts "
                    f"broke it ({rate} per 100)")
            if figure.first:
                case_id, repeat, reason = figure.first[0]
                line += f"; first: {case_id} #{repeat}: {reason}"
            lines.append(line)
    unwarranted = scores.unwarranted_calls
    if unwarranted is not None and unwarranted.pct is not None:
        lines.append(f"unwarranted calls: {unwarranted.successes} of {unwarranted.n} attempts "
                     f"of no-call cases called a tool ({unwarranted.pct:.1f}% "
                     f"[{unwarranted.low:.1f}–{unwarranted.high:.1f}])")
    return lines
