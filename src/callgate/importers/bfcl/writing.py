"""Writing one imported category as a suite directory, never half-written."""

from __future__ import annotations

import json
import os
import secrets
import shutil
from dataclasses import dataclass
from pathlib import Path

from callgate.errors import InputError
from callgate.importers.bfcl.cases import Skipped, convert_category
from callgate.importers.bfcl.records import read_category
from callgate.suites.suite import load_suite


@dataclass(frozen=True)
class ImportResult:
    out: Path
    category: str
    cases: int
    tools: int
    renamed: int
    reordered: int
    skipped: list[Skipped]



SUITE_FILES = ("tools.json", "cases.jsonl", "suite.json")


def _imported_from_bfcl(meta_path: Path) -> bool:
    try:
        previous = json.loads(meta_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):  # unreadable, not UTF-8, not JSON: not ours to overwrite
        return False
    source_meta = previous.get("source") if isinstance(previous, dict) else None
    return isinstance(source_meta, dict) and source_meta.get("benchmark") == "bfcl"


def _check_target(target: Path) -> None:
    """A directory that holds a suite not imported from BFCL is never overwritten."""
    if target.exists() and not target.is_dir():
        raise InputError(target, "exists and is not a directory")
    meta_path = target / "suite.json"
    if meta_path.exists():
        if _imported_from_bfcl(meta_path):
            return
    elif not any((target / name).exists() for name in SUITE_FILES):
        return
    raise InputError(
        target, "holds a suite not imported from BFCL; not overwritten (--force overwrites it)"
    )


def import_category(
    source: Path | str, category: str, out: Path | str, *, force: bool = False
) -> ImportResult:
    """Read a category, write it as a suite directory, and load it back as a check.

    The suite is written and checked in a temporary directory beside `out`, then moved in, so
    a failure leaves `out` as it was. Other files in `out` are left alone. A directory holding
    a suite that was not imported from BFCL is refused unless `force`."""
    target = Path(out)
    if not force:
        _check_target(target)
    data = read_category(source, category)
    converted = convert_category(data)
    target.parent.mkdir(parents=True, exist_ok=True)
    # A plain mkdir (not mkdtemp's 0700) so that a new `out` gets the usual permissions.
    staging = target.parent / f".{target.name}.{os.getpid()}-{secrets.token_hex(4)}.tmp"
    staging.mkdir()
    try:
        (staging / "tools.json").write_text(
            json.dumps(converted.tools, indent=1, ensure_ascii=False) + "\n", encoding="utf-8"
        )
        with (staging / "cases.jsonl").open("w", encoding="utf-8") as handle:
            for case in converted.cases:
                handle.write(json.dumps(case, ensure_ascii=False) + "\n")
        (staging / "suite.json").write_text(
            json.dumps(converted.meta, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
        )
        load_suite(staging)
        if not target.exists():
            staging.rename(target)
        else:
            for name in SUITE_FILES:
                os.replace(staging / name, target / name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return ImportResult(
        out=target,
        category=category,
        cases=len(converted.cases),
        tools=len(converted.tools),
        renamed=converted.catalogue.renamed,
        reordered=converted.catalogue.reordered,
        skipped=converted.skipped,
    )

