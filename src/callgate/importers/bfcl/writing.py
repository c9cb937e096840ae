"""Writing imported categories as one suite directory, never half-written."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from callgate.errors import InputError
from callgate.importers.bfcl.cases import NeverRight, convert_categories
from callgate.importers.bfcl.records import ALL_CATEGORIES, CATEGORIES, read_category
from callgate.suites.suite import load_suite


@dataclass(frozen=True)
class ImportResult:
    out: Path
    categories: list[str]
    cases: int
    tools: int
    renamed: int
    reordered: int
    never_right: list[NeverRight]
    version: str | None  # the bfcl-eval version read, when read from the wheel
    # How suite.json names the wheel of a multi-turn suite (None: no multi-turn category), and
    # whether it is relative to the suite folder (it loads wherever the two are checked out
    # together) and whether the import copied it there.
    wheel: str | None = None
    wheel_relative: bool = False
    wheel_copied: bool = False



SUITE_FILES = ("tools.json", "cases.jsonl", "suite.json")


def imported_from_bfcl(meta_path: Path) -> bool:
    """True when `meta_path` (a suite.json) says the suite was imported from BFCL."""
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
        if imported_from_bfcl(meta_path):
            return
    elif not any((target / name).exists() for name in SUITE_FILES):
        return
    raise InputError(
        target, "holds a suite not imported from BFCL; not overwritten (--force overwrites it)"
    )


def categories_named(names: str | Sequence[str], *, multi_turn: bool = True) -> list[str]:
    """The categories asked for, in the order given, "all" standing for every one (but the
    multi-turn ones unless `multi_turn`: they are read from the wheel only)."""
    every = list(ALL_CATEGORIES if multi_turn else CATEGORIES)
    chosen: list[str] = []
    for name in [names] if isinstance(names, str) else names:
        for category in every if name == "all" else [name]:
            if category not in chosen:
                chosen.append(category)
    return chosen


def wheel_path(wheel: Path, suite_dir: Path) -> tuple[str, bool]:
    """How suite.json names the wheel: relative to the suite folder when the wheel lies under
    it or beside it (under the folder that holds it), so the suite committed with its wheel
    loads on any machine; else its absolute path. Returns the path and whether it is relative."""
    wheel, home = wheel.resolve(), suite_dir.resolve()
    if wheel.is_relative_to(home.parent):
        return Path(os.path.relpath(wheel, home)).as_posix(), True
    return str(wheel), False


def import_category(
    source: Path | str, category: str | Sequence[str], out: Path | str, *, force: bool = False,
    copy_wheel: bool = False,
) -> ImportResult:
    """Read one or more categories ("all": every one), write them as one suite directory, and
    load it back as a check.

    The suite is written and checked in a temporary directory beside `out`, then moved in, so
    a failure leaves `out` as it was. Other files in `out` are left alone. A directory holding
    a suite that was not imported from BFCL is refused unless `force`. A multi-turn suite names
    its wheel as `wheel_path` says; `copy_wheel` copies the wheel into `out` first (unless it is
    there already), so the suite folder holds all it needs."""
    target = Path(out)
    if not force:
        _check_target(target)
    source_path = Path(source)
    categories = categories_named(
        category, multi_turn=source_path.is_file() and zipfile.is_zipfile(source_path))
    if not categories:
        raise InputError(source, "no category given")
    converted = convert_categories([read_category(source, c) for c in categories])
    target.parent.mkdir(parents=True, exist_ok=True)
    # A plain mkdir (not mkdtemp's 0700) so that a new `out` gets the usual permissions.
    staging = target.parent / f".{target.name}.{os.getpid()}-{secrets.token_hex(4)}.tmp"
    staging.mkdir()
    environment = converted.meta.get("environment")
    wheel = Path(environment["bfcl"]) if environment else None  # absolute, as read
    copied = copy_wheel and wheel is not None and not wheel.is_relative_to(target.resolve())
    named, relative = (None, False)
    try:
        (staging / "tools.json").write_text(
            json.dumps(converted.tools, indent=1, ensure_ascii=False) + "\n", encoding="utf-8"
        )
        with (staging / "cases.jsonl").open("w", encoding="utf-8") as handle:
            for case in converted.cases:
                handle.write(json.dumps(case, ensure_ascii=False) + "\n")
        (staging / "suite.json").write_text(
            # BFCL's accuracy is right arguments: the figure an imported suite gates on
            json.dumps({"gate": {"figures": ["right_arguments"]}, **converted.meta}, indent=2,
                       ensure_ascii=False) + "\n", encoding="utf-8"
        )
        load_suite(staging)  # with the wheel as read; then named as the suite will find it
        if wheel is not None and environment is not None:
            if copied:
                shutil.copyfile(wheel, staging / wheel.name)
            named, relative = wheel_path(target / wheel.name if copied else wheel, target)
            environment["bfcl"] = named
            (staging / "suite.json").write_text(
                json.dumps(converted.meta, indent=2, ensure_ascii=False) + "\n",
                encoding="utf-8")
        if not target.exists():
            staging.rename(target)
        else:
            for name in (*SUITE_FILES, *([wheel.name] if copied and wheel else [])):
                os.replace(staging / name, target / name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return ImportResult(
        out=target,
        categories=categories,
        cases=len(converted.cases),
        tools=len(converted.tools),
        renamed=converted.catalogue.renamed,
        reordered=converted.catalogue.reordered,
        never_right=converted.never_right,
        version=converted.meta["source"]["package_version"],
        wheel=named,
        wheel_relative=relative,
        wheel_copied=copied,
    )

