"""A suite's cases kept compact: as their JSON text, built into `Case` models when used."""

from __future__ import annotations

import json
import sys
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from callgate.suites.cases import Case


class CaseTable(Mapping[str, "Case"]):
    """A suite's cases by id, kept compact: each as its JSON text (about the size of its line)
    plus its tags and expectation type, and built into a `Case` when used. The most recently
    used cases stay built (CACHE of them), so a run over a suite of any size holds a bounded
    number of models; a case built again costs about 10 µs.

    `raw` is the same cases as decoded JSON objects (`Suite.raw_cases`)."""

    CACHE = 1024

    def __init__(self, context: dict[str, Any] | None = None) -> None:
        self._context = context  # what building a case needs (the suite's predicates)
        self._text: dict[str, str] = {}
        self._tags: dict[str, tuple[str, ...]] = {}
        self._expect_type: dict[str, str] = {}
        self._built: OrderedDict[str, Case] = OrderedDict()
        self._shared: dict[Any, Any] = {}  # one object per distinct tag tuple / type
        self.raw = RawCases(self._text)
        self.tags = _Column(self._text, self._tags)
        self.expect_type = _Column(self._text, self._expect_type)

    def add(self, case: Case, raw: dict[str, Any]) -> None:
        self._text[case.id] = json.dumps(raw, ensure_ascii=False, separators=(",", ":"))
        tags = tuple(sys.intern(tag) for tag in case.tags)
        self._tags[case.id] = self._shared.setdefault(tags, tags)
        self._expect_type[case.id] = self._shared.setdefault(case.expect.type, case.expect.type)
        self._keep(case.id, case)

    def _keep(self, case_id: str, case: Case) -> None:
        self._built[case_id] = case
        if len(self._built) > self.CACHE:
            self._built.popitem(last=False)

    def __getitem__(self, case_id: str) -> Case:
        case = self._built.get(case_id)
        if case is not None:
            self._built.move_to_end(case_id)
            return case
        text = self._text[case_id]  # KeyError when unknown
        case = Case.model_validate_json(text, context=self._context)
        self._keep(case_id, case)
        return case

    def __contains__(self, case_id: object) -> bool:
        return case_id in self._text

    def __iter__(self) -> Iterator[str]:
        return iter(self._text)

    def __len__(self) -> int:
        return len(self._text)


class RawCases(Mapping[str, dict[str, Any]]):
    """Cases as the JSON objects of their lines, decoded on each access."""

    def __init__(self, text: dict[str, str]) -> None:
        self._text = text

    def __getitem__(self, case_id: str) -> dict[str, Any]:
        case: dict[str, Any] = json.loads(self._text[case_id])
        return case

    def __iter__(self) -> Iterator[str]:
        return iter(self._text)

    def __len__(self) -> int:
        return len(self._text)


class _Column(Mapping[str, Any]):
    """One per-case field kept without building the case (tags, expectation type)."""

    def __init__(self, text: dict[str, str], values: dict[str, Any]) -> None:
        self._text, self._values = text, values

    def __getitem__(self, case_id: str) -> Any:
        return self._values[case_id]

    def get(self, case_id: str, default: Any = None) -> Any:  # read for every attempt scored
        return self._values.get(case_id, default)

    def __iter__(self) -> Iterator[str]:
        return iter(self._text)

    def __len__(self) -> int:
        return len(self._text)


def case_tags(cases: Mapping[str, Case]) -> Mapping[str, Sequence[str]]:
    """Tags by case id, without building every case of a CaseTable."""
    if isinstance(cases, CaseTable):
        return cases.tags
    return {case_id: case.tags for case_id, case in cases.items()}


def case_expect_types(cases: Mapping[str, Case]) -> Mapping[str, str]:
    """Expectation type by case id, without building every case of a CaseTable."""
    if isinstance(cases, CaseTable):
        return cases.expect_type
    return {case_id: case.expect.type for case_id, case in cases.items()}
