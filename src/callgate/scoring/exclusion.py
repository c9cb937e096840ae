"""The excluded share a run may have and still be a result: shared by `run`, `score`, `merge`
and `gate`, in a module light enough for the CLI to import before it knows which command runs."""

from __future__ import annotations

from collections.abc import Mapping

# Attempts that say nothing about the model: a cut response, a provider fault, an environment
# that broke, a judge reply that was not a verdict, an agent target that failed. Excluded from
# the shares; above this share of them a run is not a result and a gate is inconclusive.
DEFAULT_MAX_EXCLUDED = 0.05
# A simulated user that failed the conversation (user_error) is excluded too.
EXCLUDED_KINDS = ("truncated", "provider_error", "environment_error", "judge_error",
                  "target_error", "user_error")
# Every kind a score counts apart from the shares, in the order reports show them: the
# excluded kinds, and the attempts still waiting for the judge. The kinds of SEEN_APART are
# counted and shown only where some attempt had one (a run without a simulated user).
COUNTED_APART = ("truncated", "provider_error", "environment_error", "pending_judge",
                 "judge_error", "target_error")
SEEN_APART = ("user_error",)
# The excluded kinds in words, for messages and help texts.
EXCLUDED_IN_WORDS = (", ".join(k.removesuffix("_error") for k in EXCLUDED_KINDS[:-1])
                     + " or simulated user errors")


def excluded_share(attempts: int, excluded: Mapping[str, int]) -> float:
    """The share of attempts excluded for a reason that is not the model's answer."""
    bad = sum(excluded.get(kind, 0) for kind in EXCLUDED_KINDS)
    return bad / attempts if attempts else 0.0


def too_many_excluded(attempts: int, excluded: Mapping[str, int], max_excluded: float
                      ) -> str | None:
    """Why a run is not a result, or None when it is one."""
    share = excluded_share(attempts, excluded)
    if share <= max_excluded:
        return None
    bad = sum(excluded.get(kind, 0) for kind in EXCLUDED_KINDS)
    kinds = ", ".join(f"{excluded[k]} {k.replace('_', ' ')}" for k in EXCLUDED_KINDS
                      if excluded.get(k))
    return (f"{bad} of {attempts} attempts ({share:.1%}) were excluded ({kinds}), above the "
            f"{100 * max_excluded:g}% allowed (--max-excluded)")
