"""A BFCL result folder (what `bfcl generate` writes for one model) as callgate responses for an
imported suite: one response line per BFCL result line, so `callgate score` judges the answers
BFCL recorded.

BFCL writes `BFCL_v<N>_<category>_result.json` files, one JSON object a line: the entry's `id`,
its `result` and, for most handlers, token counts and latency. v3 keeps them in the model's
folder, v4 in subfolders of it (non_live/, live/, ...); both are found anywhere below the folder
given. For a function-calling model `result` is a list of `{function name: arguments}` (the
arguments a JSON string, as the model sent them), or the model's text when it made no call
(bfcl_eval/model_handler/api_inference/openai_completion.py, `_parse_query_response_FC`).
docs/bfcl.md states every mapping decision.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from callgate.checks.kinds.bfcl_multi_turn import FORCE_TERMINATED, INFERENCE_ERROR
from callgate.errors import InputError
from callgate.importers.bfcl.cases import MULTI_TURN_MAX_TURNS
from callgate.importers.bfcl.records import ALL_CATEGORIES as CATEGORIES
from callgate.importers.bfcl.records import MULTI_TURN_CATEGORIES
from callgate.reading import json_lines_in, read_text
from callgate.suites.suite import Suite

_RESULT_FILE = re.compile(r"^BFCL_v(\d+)_(.+)_result\.json$")


@dataclass(frozen=True)
class ConvertedResults:
    out: Path
    responses: int
    categories: list[str]  # the suite's categories found in the folder
    missing: list[str]  # the suite's categories with no result file
    ignored: list[str]  # result files of categories the suite does not hold


def result_files(folder: Path) -> tuple[dict[str, Path], list[str]]:
    """The result file of each category below `folder` (the highest BFCL version wins), and
    the categories of other files that callgate does not import."""
    found: dict[str, tuple[int, Path]] = {}
    for path in sorted(folder.rglob("BFCL_v*_*_result.json")):
        match = _RESULT_FILE.match(path.name)
        if match is None:
            continue
        version, category = int(match.group(1)), match.group(2)
        if category in found and found[category][0] == version:
            raise InputError(
                path, f"a second result file for category {category!r} (also "
                f"{found[category][1]}): give one model's folder"
            )
        if category not in found or found[category][0] < version:
            found[category] = (version, path)
    files = {c: p for c, (_, p) in found.items() if c in CATEGORIES}
    return files, sorted(c for c in found if c not in CATEGORIES)


def _message(result: Any) -> dict[str, Any]:
    """BFCL's recorded `result` as the assistant message it came from."""
    if isinstance(result, list) and all(
        isinstance(item, dict) and len(item) == 1 for item in result
    ) and result:
        calls = []
        for index, item in enumerate(result):
            ((name, arguments),) = item.items()
            # A handler that kept the decoded arguments (a dict) stored what the model sent.
            text = arguments if isinstance(arguments, str) else json.dumps(arguments)
            calls.append({"id": f"call_{index}", "type": "function",
                          "function": {"name": str(name), "arguments": text}})
        return {"role": "assistant", "content": None, "tool_calls": calls}
    if isinstance(result, list) and not result:
        return {"role": "assistant", "content": ""}
    # Text (no call), an inference error BFCL recorded as text, or a shape BFCL cannot decode:
    # BFCL scores each of these as output without a function call.
    text = result if isinstance(result, str) else json.dumps(result)
    return {"role": "assistant", "content": text}


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def response_line(record: Mapping[str, Any]) -> dict[str, Any]:
    """One callgate response line for one BFCL result line."""
    line: dict[str, Any] = {"case_id": record["id"], "response": _message(record.get("result"))}
    return {**line, **_costs(record, _number)}


def _costs(record: Mapping[str, Any], number: Callable[[Any], float | None]
           ) -> dict[str, Any]:
    """A result line's token counts and latency as a response line's `usage` and
    `latency_ms`, each figure read by `number`."""
    costs: dict[str, Any] = {}
    prompt, completion = (number(record.get(k)) for k in ("input_token_count",
                                                          "output_token_count"))
    if prompt is not None or completion is not None:
        costs["usage"] = {"prompt_tokens": None if prompt is None else int(prompt),
                          "completion_tokens": None if completion is None else int(completion)}
    latency = number(record.get("latency"))
    if latency is not None:
        costs["latency_ms"] = latency * 1000
    return costs


def _total(value: Any) -> float | None:
    """A multi-turn record's per-turn, per-step figures (lists of lists), summed."""
    if isinstance(value, list):
        parts = [_total(item) for item in value]
        numbers = [p for p in parts if p is not None]
        return sum(numbers) if numbers else None
    return _number(value)


def multi_turn_line(record: Mapping[str, Any], user_turns: int) -> dict[str, Any]:
    """One callgate `turns` line for a multi-turn result: BFCL's `result` holds, per user turn,
    each step's model output (as a single-turn result does), one assistant message a step.

    As BFCL's runner (`multi_turn_runner`) and inference (`force_quit`) decide: a turn without a
    step gets an empty reply, so that every user turn has one. A result with every user turn is
    checked as it is, its last turn cut by the step limit included. A result that stops at the
    21st step (with calls) of an earlier turn is BFCL's force-quit, read as the turn limit. A
    result that is not a list of turns (an inference error), or with other turns than the
    case's, is failed by BFCL's runner before its checker runs: recorded as no answer in every
    turn, with a finish_reason saying which rule failed it (and BFCL's text of the error)."""
    result = record.get("result")
    costs = _costs(record, _total)
    if not isinstance(result, list) or not all(isinstance(turn, list) for turn in result):
        text = result if isinstance(result, str) else json.dumps(result)
        return {**_no_answer(record["id"], user_turns, INFERENCE_ERROR, text), **costs}
    turns: list[dict[str, Any]] = []
    ends: list[int] = []
    for turn in result:
        turns += [_message(step) for step in turn] or [{"role": "assistant", "content": ""}]
        ends.append(len(turns))
    force_quit = bool(result) and len(result[-1]) >= MULTI_TURN_MAX_TURNS and (
        "tool_calls" in turns[-1])
    if len(ends) != user_turns and not (len(ends) < user_turns and force_quit):
        return {**_no_answer(record["id"], user_turns, FORCE_TERMINATED, ""), **costs}
    return {"case_id": record["id"], "turns": turns, "user_turn_ends": ends, **costs}


def _no_answer(case_id: str, user_turns: int, why: str, text: str) -> dict[str, Any]:
    """A `turns` line with an empty reply to every user turn (the first holding `text`)."""
    turns = [{"role": "assistant", "content": text if turn == 0 else ""}
             for turn in range(user_turns)]
    return {"case_id": case_id, "turns": turns, "user_turn_ends": list(range(1, user_turns + 1)),
            "finish_reason": why}


def suite_categories(suite: Suite) -> dict[str, list[str]]:
    """The case ids of each BFCL category of an imported suite (a case's category is its tag)."""
    by_category: dict[str, list[str]] = {}
    for case_id, tags in suite.case_tags().items():
        category = next((t for t in tags if t in CATEGORIES), None)
        if category is not None:
            by_category.setdefault(category, []).append(case_id)
    return by_category


def convert_results(folder: Path | str, suite: Suite, out: Path | str) -> ConvertedResults:
    """Write callgate responses for every result line below `folder` whose category the suite
    holds. A line naming a case the suite does not hold, or a category file that lacks one of
    the suite's cases, is an input error (BFCL refuses an incomplete file too); `out` is written
    in full or not at all."""
    root = Path(folder)
    if not root.is_dir():
        raise InputError(root, "not a folder (BFCL's result folder for one model)")
    files, ignored = result_files(root)
    by_category = suite_categories(suite)
    if not by_category:
        raise InputError(suite.path, "not a suite imported from BFCL (no case has a category tag)")
    lines: list[str] = []
    present: list[str] = []
    for category, case_ids in by_category.items():
        path = files.get(category)
        if path is None:
            continue
        present.append(category)
        wanted = set(case_ids)
        seen: set[str] = set()
        for line_no, raw, _ in json_lines_in(path, read_text(path).splitlines()):
            if not isinstance(raw, dict) or not isinstance(raw.get("id"), str):
                raise InputError(path, "a result line needs an id", line=line_no, field="id")
            if raw["id"] not in wanted:
                raise InputError(path, f"no case {raw['id']!r} of category {category!r} in the "
                                 "suite", line=line_no, field="id")
            if raw["id"] in seen:
                raise InputError(path, f"a second result for {raw['id']!r}", line=line_no,
                                 field="id")
            seen.add(raw["id"])
            case = suite.cases[raw["id"]]
            converted = (multi_turn_line(raw, 1 + len(case.user_turns or ()))
                         if category in MULTI_TURN_CATEGORIES else response_line(raw))
            lines.append(json.dumps(converted, ensure_ascii=False))
        lacking = [case_id for case_id in case_ids if case_id not in seen]
        if lacking:
            raise InputError(path, f"no result for {len(lacking)} of the suite's {len(case_ids)} "
                             f"{category} cases (first {lacking[0]!r})")
    if not present:
        raise InputError(root, "no BFCL result file for any category of the suite")
    target = Path(out)
    staging = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        staging.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
        os.replace(staging, target)
    finally:
        staging.unlink(missing_ok=True)
    missing = [c for c in by_category if c not in present]
    ignored = sorted({*ignored, *(c for c in files if c not in by_category)})
    return ConvertedResults(target, len(lines), present, missing, ignored)

