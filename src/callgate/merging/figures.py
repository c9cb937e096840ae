"""The figures of a merged release that are not computed again from its verdicts: kept from
the scores documents of the runs merged into it (its parts: each shard's run, and the release
already in the store merged into), each combined as the unsharded run would have computed it.

- `server_errors` (`--server-errors count`): the parts must agree; kept.
- `stopped` (the budget ended a shard early): kept from the first part that says so.
- `attack` (`run --attack`, Store.set_run_attack): the success rates per template and the
  utility under attack are unclustered rates over attempts, so their counts add up; the
  attack's fingerprint, max_rise and ceiling must agree.
- `answer_kinds` (the answer_kind judge): the confusion counts add up, the F1s are computed
  again from them (scoring.scores.kind_figures); the judge's fingerprint must agree.
- `judged_claims` (the claim_support judge): the counts add up; the first unsupported claims
  named are the first in case and repeat order (as the unsharded run names them when its
  answers come in that order); the judge's fingerprint must agree.

A figure some parts have and others lack means the shards were run differently: refused. So
is any of these figures on a part only some of whose attempts were new (its counts would be
counted twice). Fault recovery is computed again from the attempts (merging.recovery)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from callgate.scoring.scores import KINDS, POLICY_EXAMPLES, ClaimFigures, kind_figures
from callgate.stats import rate_percent
from callgate.store.opening import MergeRefused

Part = tuple[Path, dict[str, Any]]  # the store a part came from, and its scores document
COMBINED = ("attack", "answer_kinds", "judged_claims", "recovery")


class Refusal:
    """Makes the one-line refusals of one merged release."""

    def __init__(self, where: str) -> None:
        self.where = where

    def __call__(self, path: Path, field: str, why: str) -> MergeRefused:
        return MergeRefused(f"{path}: {self.where}: scores.{field}: {why}; shards of one "
                            "release must be run with the same options")


def kept_figures(parts: Sequence[Part], refuse: Refusal) -> dict[str, Any]:
    """The scores fields of the merged release kept or combined from its parts."""
    out: dict[str, Any] = {}
    counted = [document.get("server_errors", "exclude") for _, document in parts]
    for (path, _), value in zip(parts, counted, strict=True):
        if value != counted[0]:
            raise refuse(path, "server_errors", f"{value} differs from {counted[0]} (given "
                                                "--server-errors differently)")
    if counted:
        out["server_errors"] = counted[0]
    stopped = next((d["stopped"] for _, d in parts if d.get("stopped")), None)
    if stopped is not None:
        out["stopped"] = stopped
    for field, combine in (("attack", _attack), ("answer_kinds", _kinds),
                           ("judged_claims", _claims)):
        values = present(parts, field, refuse)
        if values:
            out[field] = combine(values, refuse)
    return out


def present(parts: Sequence[Part], field: str, refuse: Refusal) -> list[tuple[Path, Any]]:
    """The parts' values of `field`: all of them, or none (the field in some parts only is
    refused, naming the first part that differs from the first)."""
    values = [(path, document.get(field)) for path, document in parts]
    if not values or all(value is None for _, value in values):
        return []
    first = values[0][1] is not None
    for path, value in values:
        if (value is not None) != first:
            raise refuse(path, field, "present in some shards and absent in others")
    return values


def _agree(values: Sequence[tuple[Path, Any]], field: str, keys: Sequence[str],
           refuse: Refusal) -> None:
    first = values[0][1]
    for path, value in values[1:]:
        for key in keys:
            if value.get(key) != first.get(key):
                raise refuse(path, f"{field}.{key}", f"{value.get(key)!r} differs from "
                                                     f"{first.get(key)!r}")


def rate(successes: int, attempts: int) -> dict[str, Any]:
    """gating.attack_gate.rate, as the JSON the scores keep."""
    return rate_percent(successes, attempts)


def _summed(rates: Sequence[dict[str, Any] | None]) -> dict[str, Any]:
    return rate(sum(r["successes"] for r in rates if r), sum(r["attempts"] for r in rates if r))


def _attack(values: Sequence[tuple[Path, Any]], refuse: Refusal) -> dict[str, Any]:
    _agree(values, "attack", ("attack_fingerprint", "max_rise", "ceiling"), refuse)
    figures = [value for _, value in values]
    templates = sorted({name for value in figures for name in value["success"]})
    clean = [value.get("utility_clean") for value in figures]
    for (path, _), paired in zip(values, clean, strict=True):
        if (paired is None) != (clean[0] is None):
            raise refuse(path, "attack.utility_clean", "present in some shards and absent in "
                                                       "others (--clean-release given to some)")
    return {**figures[0],
            "success": {name: _summed([v["success"].get(name) for v in figures])
                        for name in templates},
            "utility_under_attack": _summed([v["utility_under_attack"] for v in figures]),
            "utility_clean": None if any(c is None for c in clean) else _summed(clean)}


def _kinds(values: Sequence[tuple[Path, Any]], refuse: Refusal) -> dict[str, Any]:
    _agree(values, "answer_kinds", ("fingerprint",), refuse)
    figures = [value for _, value in values]
    pairs = [(expected, given) for value in figures
             for expected in KINDS for given in KINDS
             for _ in range(value["confusion"][expected][given])]
    return kind_figures(pairs, sum(v.get("judge_errors", 0) for v in figures),
                        figures[0].get("fingerprint", ""),
                        all(v.get("certified", False) for v in figures)).model_dump(mode="json")


def _claims(values: Sequence[tuple[Path, Any]], refuse: Refusal) -> dict[str, Any]:
    _agree(values, "judged_claims", ("fingerprint",), refuse)
    figures = [value for _, value in values]
    judged, unsupported = (sum(v[key] for v in figures) for key in ("judged", "unsupported"))
    first = sorted((tuple(item) for v in figures for item in v.get("first", [])),
                   key=lambda item: (item[0], item[1]))
    return ClaimFigures(
        judged=judged, unsupported=unsupported,
        per_100=100 * unsupported / judged if judged else None,
        first=first[:POLICY_EXAMPLES], judge_errors=sum(v.get("judge_errors", 0) for v in figures),
        fingerprint=figures[0].get("fingerprint", ""),
        certified=all(v.get("certified", False) for v in figures)).model_dump(mode="json")
