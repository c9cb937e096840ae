"""BFCL's multi-turn categories, read from the `bfcl-eval` wheel (never from a data folder: the
suite's environment is the wheel's classes, so the suite records the wheel it came from).

As bfcl_eval/utils.py `populate_test_cases_with_predefined_functions` does, an entry's function
docs are those of its involved classes (bfcl_eval/data/multi_turn_func_doc/, file names from
bfcl_eval/constants/executable_backend_config.py), less the docs `missed_function` holds back,
which are offered from the turn that names them on. The constants are read from the wheel's
source text as literals, never run. docs/bfcl.md states every mapping decision.
"""

from __future__ import annotations

import ast
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from callgate.errors import InputError, decode
from callgate.reading import json_lines_in, validate

CONSTANTS = "bfcl_eval/constants/executable_backend_config.py"
PROMPTS = "bfcl_eval/constants/default_prompts.py"
DOC_FOLDER = "bfcl_eval/data/multi_turn_func_doc/"


class MultiTurnAnswer(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)
    id: str = Field(min_length=1)
    ground_truth: list[list[str]] = Field(min_length=1)


@dataclass(frozen=True)
class MultiTurnData:
    """What a multi-turn category needs beyond its entries."""

    wheel: Path
    sha256: str
    answers: dict[str, MultiTurnAnswer]
    added_turn_prompt: str  # BFCL's user message for a turn that only adds functions
    held_out: dict[str, dict[int, list[dict[str, Any]]]] = field(default_factory=dict)


def literal_constant(source: str, name: str, where: str) -> Any:
    """The value of `NAME = <literal>` in a module's source text, read without running it."""
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == name for t in node.targets):
            try:
                return ast.literal_eval(node.value)
            except ValueError:
                break
    raise InputError(where, f"no literal {name} in it")


def _doc_lines(archive: zipfile.ZipFile, wheel: Path, name: str) -> list[dict[str, Any]]:
    where = f"{wheel.name}!{name}"
    try:
        text = decode(where, archive.read(name))
    except KeyError:
        raise InputError(wheel, f"no function doc file {name}") from None
    return [raw for _, raw, _ in json_lines_in(where, text.splitlines())]


def function_docs(archive: zipfile.ZipFile, wheel: Path, entry: dict[str, Any]
                  ) -> tuple[list[dict[str, Any]], dict[int, list[dict[str, Any]]]]:
    """An entry's offered docs, and the docs held back by turn (`missed_function`)."""
    where = f"{wheel.name}!{CONSTANTS}"
    files = literal_constant(decode(where, archive.read(CONSTANTS)),
                             "MULTI_TURN_FUNC_DOC_FILE_MAPPING", where)
    docs: list[dict[str, Any]] = []
    for class_name in entry.get("involved_classes", []):
        if class_name not in files:
            raise InputError(entry["id"], f"no function docs for class {class_name!r}")
        docs += _doc_lines(archive, wheel, DOC_FOLDER + files[class_name])
    held: dict[int, list[dict[str, Any]]] = {}
    for turn, names in (entry.get("missed_function") or {}).items():
        for name in names:
            found = next((d for d in docs if d.get("name") == name), None)
            if found is None:
                raise InputError(entry["id"], f"missed_function {name!r} is no doc of it")
            docs.remove(found)
            held.setdefault(int(turn), []).append(found)
    return docs, held


def read_extras(wheel: Path, archive: zipfile.ZipFile, answer_name: str | None,
                answer_text: str | None) -> tuple[dict[str, MultiTurnAnswer], str]:
    """The ground truth of each entry, and BFCL's prompt for a turn that adds functions."""
    if answer_name is None or answer_text is None:
        raise InputError(wheel, "no possible-answer file for a multi-turn category")
    where = f"{wheel.name}!{answer_name}"
    answers = {a.id: a for a in (validate(MultiTurnAnswer, raw, where, line=line_no)
                                 for line_no, raw, _ in json_lines_in(where,
                                                                      answer_text.splitlines()))}
    prompt_where = f"{wheel.name}!{PROMPTS}"
    prompt = literal_constant(decode(prompt_where, archive.read(PROMPTS)),
                              "DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC", prompt_where)
    return answers, str(prompt)


def environment_spec(wheel: Path, sha256: str) -> dict[str, str]:
    """suite.json's `environment` for a suite with multi-turn cases."""
    return {"bfcl": str(wheel.resolve()), "sha256": sha256}


def case_state(category: str, entry: dict[str, Any]) -> dict[str, Any]:
    """A case's `state`: what BFCL's `execute_multi_turn_func_call` is given."""
    return {
        "involved_classes": list(entry.get("involved_classes", [])),
        "initial_config": entry.get("initial_config", {}),
        "long_context": "long_context" in category or "composite" in category,
    }
