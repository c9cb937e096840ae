"""Which (case, repeat) attempts a stream has already seen, in little memory.

A set of (case id, repeat) tuples costs about 110 bytes an attempt (the tuple, the int and
the set's slot): 110 MB at a million attempts. Here each case keeps a count `below` such that
every repeat under it was seen; repeats arrive nearly in order in real files (a run writes
repeat 0, 1, 2, ... of each case), so a case costs one int whatever its number of repeats.
A repeat that arrives ahead of its turn waits in one shared set of ints (case index × 2³² +
repeat) until the gap below it fills, then is folded into the count.
"""

from __future__ import annotations

_SPAN = 2**32


class AttemptKeys:
    def __init__(self) -> None:
        self._index: dict[str, int] = {}  # case id -> small int
        self._below: list[int] = []  # per case: every repeat < this was seen
        self._ahead: set[int] = set()  # repeats seen before the ones under them
        self._odd: set[tuple[str, int]] = set()  # repeats too large to pack

    def add(self, case_id: str, repeat: int) -> bool:
        """Record an attempt; False when it was already seen."""
        index = self._index.get(case_id)
        if index is None:
            index = self._index[case_id] = len(self._below)
            self._below.append(0)
        if not 0 <= repeat < _SPAN:
            if (case_id, repeat) in self._odd:
                return False
            self._odd.add((case_id, repeat))
            return True
        below = self._below[index]
        key = index * _SPAN + repeat
        if repeat < below or key in self._ahead:
            return False
        if repeat > below:
            self._ahead.add(key)
            return True
        below += 1
        while self._ahead and index * _SPAN + below in self._ahead:
            self._ahead.remove(index * _SPAN + below)
            below += 1
        self._below[index] = below
        return True
