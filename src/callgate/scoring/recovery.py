"""The recovery figures (docs/faults.md): per fault kind, the share of the attempts a fault
reached whose case's `after_fault` expectations all held, with its Wilson 95% interval (the
project's `Share`, clustered by case as the shares are: repeats of a case are not independent).
Kept in the run's scores document under `recovery`, and with the release."""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field

from callgate.checks.recovery import Recovery
from callgate.scoring.scores import Share


@dataclass
class RecoveryTally:
    """Per kind and case: faulted attempts and recovered ones (an attempt counts once in each
    kind it met)."""

    _cases: defaultdict[str, dict[str, list[int]]] = field(
        default_factory=lambda: defaultdict(dict))

    def add(self, case_id: str, recovery: Recovery | None) -> None:
        if recovery is None:
            return
        for kind in recovery.kinds:
            tally = self._cases[kind].setdefault(case_id, [0, 0])
            tally[0] += recovery.recovered
            tally[1] += 1

    def shares(self) -> dict[str, Share]:
        out = {}
        for kind in sorted(self._cases):
            histogram = Counter((s, n) for s, n in self._cases[kind].values())
            out[kind] = Share.by_case(histogram)
        return out
