"""BFCL's data files: the entries, function docs and possible answers of one category, read
from a BFCL data folder or the `bfcl-eval` wheel.

Line references are to bfcl-eval 2026.3.23 (Apache-2.0): `ast_checker.py` is
bfcl_eval/eval_checker/ast_eval/ast_checker.py, `handler utils` is
bfcl_eval/model_handler/utils.py. docs/bfcl.md states every mapping decision.
"""

from __future__ import annotations

import re
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from callgate.errors import InputError, decode
from callgate.importers.bfcl.multi_turn import MultiTurnData, function_docs, read_extras
from callgate.reading import json_lines_in, read_text, validate

Kind = Literal["ast", "irrelevance", "relevance", "multi_turn"]

CATEGORIES: dict[str, Kind] = {
    "simple_python": "ast",
    "multiple": "ast",
    "parallel": "ast",
    "parallel_multiple": "ast",
    "irrelevance": "irrelevance",
    "live_simple": "ast",
    "live_multiple": "ast",
    "live_parallel": "ast",
    "live_parallel_multiple": "ast",
    "live_irrelevance": "irrelevance",
    "live_relevance": "relevance",
    "simple_java": "ast",
    "simple_javascript": "ast",
}
# Read from the wheel only (bfcl.multi_turn); `--category all` takes them from a wheel.
MULTI_TURN_CATEGORIES: dict[str, Kind] = {
    "multi_turn_base": "multi_turn",
    "multi_turn_miss_func": "multi_turn",
    "multi_turn_miss_param": "multi_turn",
    "multi_turn_long_context": "multi_turn",
}
ALL_CATEGORIES: dict[str, Kind] = {**CATEGORIES, **MULTI_TURN_CATEGORIES}

Language = Literal["python", "java", "javascript"]


def language_of(category: str) -> Language:
    """bfcl_eval/utils.py:259-264 (is_java, is_js): the language of a category's docs."""
    if "javascript" in category:
        return "javascript"
    return "java" if "java" in category else "python"


class _Record(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)


class BfclFunction(_Record):
    name: str = Field(min_length=1)
    description: str = ""
    parameters: dict[str, Any]


class BfclEntry(_Record):
    id: str = Field(min_length=1)
    question: list[list[dict[str, Any]]] = Field(min_length=1)
    function: list[BfclFunction] = Field(default_factory=list)  # multi-turn: from the classes


class BfclAnswer(_Record):
    id: str = Field(min_length=1)
    ground_truth: list[dict[str, dict[str, Any]]] = Field(min_length=1)


@dataclass(frozen=True)
class CategoryData:
    category: str
    entries: list[BfclEntry]
    answers: dict[str, BfclAnswer]
    origin: str  # where the files were read, for suite.json
    version: str | None  # the bfcl-eval package version, when read from a wheel
    multi_turn: MultiTurnData | None = None  # a multi-turn category's wheel and ground truth


# The newest bfcl-eval release the importer and its tests are checked against; the commands in
# README.md and docs/bfcl.md pin it (tests/importers/test_bfcl.py holds them to it).
TESTED_VERSION = "2026.3.23"

_DATA_FILE = re.compile(r"^BFCL_v(\d+)_(.+)\.json$")


def _pick(names: Sequence[str], category: str) -> tuple[str, str | None] | None:
    """The question file of a category and its possible-answer file, among archive paths.

    The highest BFCL version wins, then the shallowest path; unused datasets are ignored."""
    found: list[tuple[int, int, str]] = []
    for name in names:
        path = PurePosixPath(name)
        match = _DATA_FILE.match(path.name)
        if match is None or match.group(2) != category:
            continue
        if "possible_answer" in path.parts or "unused_datasets" in path.parts:
            continue
        found.append((-int(match.group(1)), len(path.parts), name))
    if not found:
        return None
    question = PurePosixPath(min(found)[2])
    answer = str(question.parent / "possible_answer" / question.name)
    return str(question), answer if answer in set(names) else None


def _parse_lines(text: str, where: str, model: type[BaseModel]) -> list[Any]:
    return [validate(model, raw, where, line=line_no)
            for line_no, raw, _ in json_lines_in(where, text.splitlines())]


def read_category(source: Path | str, category: str) -> CategoryData:
    """Read one category from a BFCL data folder (any folder above the files will do) or from
    the `bfcl-eval` wheel read as a zip archive."""
    if category not in ALL_CATEGORIES:
        raise InputError(source, f"unknown category {category!r}; one of "
                         f"{', '.join(ALL_CATEGORIES)}")
    root = Path(source)
    version: str | None = None
    if root.is_file() and zipfile.is_zipfile(root):
        with zipfile.ZipFile(root) as archive:
            names = archive.namelist()
            picked = _pick(names, category)
            if picked is None:
                raise InputError(root, f"no BFCL data file for category {category!r}")
            question_name, answer_name = picked
            question_text = decode(f"{root.name}!{question_name}", archive.read(question_name))
            answer_text = (
                decode(f"{root.name}!{answer_name}", archive.read(answer_name))
                if answer_name else None
            )
            metadata = next((n for n in names if n.endswith(".dist-info/METADATA")), None)
            if metadata is not None:
                header = archive.read(metadata).decode("utf-8", "replace")
                found = re.search(r"^Version: (.+)$", header, re.MULTILINE)
                version = found.group(1).strip() if found else None
            if category in MULTI_TURN_CATEGORIES:
                return _multi_turn(root, archive, category, question_name, question_text,
                                   answer_name, answer_text, version)
        origin = f"{root.name}!{question_name}"
        where_q, where_a = origin, f"{root.name}!{answer_name}"
    elif category in MULTI_TURN_CATEGORIES:
        raise InputError(root, f"{category} is read from the bfcl-eval wheel only: its cases "
                         "run BFCL's environment classes, loaded from that wheel")
    elif root.is_dir():
        names = [p.relative_to(root).as_posix() for p in root.rglob("BFCL_v*_*.json")]
        picked = _pick(names, category)
        if picked is None:
            raise InputError(root, f"no BFCL data file for category {category!r}")
        question_name, answer_name = picked
        question_text = read_text(root / question_name)
        answer_text = read_text(root / answer_name) if answer_name else None
        origin = where_q = str(root / question_name)
        where_a = str(root / answer_name) if answer_name else ""
    else:
        raise InputError(root, "not a BFCL data folder nor a zip archive (the bfcl-eval wheel)")
    entries: list[BfclEntry] = _parse_lines(question_text, where_q, BfclEntry)
    answers: dict[str, BfclAnswer] = {}
    if CATEGORIES[category] == "ast":
        if answer_text is None:
            raise InputError(root, f"no possible-answer file for category {category!r}")
        answers = {a.id: a for a in _parse_lines(answer_text, where_a, BfclAnswer)}
        missing = [e.id for e in entries if e.id not in answers]
        if missing:
            raise InputError(where_a, f"no possible answer for {missing[0]!r}")
    return CategoryData(category, entries, answers, origin, version)



def _multi_turn(wheel: Path, archive: zipfile.ZipFile, category: str, question_name: str,
                question_text: str, answer_name: str | None, answer_text: str | None,
                version: str | None) -> CategoryData:
    """A multi-turn category: each entry with its classes' docs, the held-back docs and the
    ground truth beside."""
    from callgate.suites.bfcl_environment import file_sha256

    where = f"{wheel.name}!{question_name}"
    answers, prompt = read_extras(wheel, archive, answer_name, answer_text)
    entries: list[BfclEntry] = []
    held_out: dict[str, dict[int, list[dict[str, Any]]]] = {}
    for line_no, raw, _ in json_lines_in(where, question_text.splitlines()):
        entry = validate(BfclEntry, raw, where, line=line_no)
        docs, held = function_docs(archive, wheel, raw)
        entries.append(entry.model_copy(update={
            "function": [validate(BfclFunction, d, where, line=line_no) for d in docs]}))
        held_out[entry.id] = held
        if entry.id not in answers:
            raise InputError(where, f"no possible answer for {entry.id!r}", line=line_no)
    data = MultiTurnData(wheel.resolve(), file_sha256(wheel), answers, prompt, held_out)
    return CategoryData(category, entries, {}, where, version, data)
