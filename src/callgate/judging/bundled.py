"""The default judge and calibration set that ship with callgate, found by name.

The top-level `judges/` and `calibration/` folders of the source tree are the editable source
of truth; the wheel carries the default judge's files from them as `callgate/defaults/judges/`
and `callgate/defaults/calibration/` (hatch `force-include` in pyproject.toml, file by file, so
what a user adds to the folders is not packaged), so an installed callgate has the judge the
README names.
"""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent.parent  # the callgate package


def bundled_dir(kind: str) -> Path | None:
    """`judges` or `calibration` as installed (inside the package) or, in a source checkout,
    the top-level folder beside `src/`. None when neither exists."""
    for folder in (_PACKAGE / "defaults" / kind, _PACKAGE.parent.parent / kind):
        if folder.is_dir():
            return folder
    return None


def _is_name(text: str) -> bool:
    return "/" not in text and "\\" not in text and not text.startswith(".")


def resolve(value: Path | str, kind: str, suffix: str) -> Path:
    """A path as given when it exists; otherwise a bare NAME looked up as `./<kind>/NAME<suffix>`
    and then in the bundled folder. A path that exists nowhere is returned unchanged, so the
    loader reports it as not found."""
    given = Path(value)
    if given.exists() or not _is_name(str(value)):
        return given
    stem = given.name[: -len(suffix)] if given.name.endswith(suffix) else given.name
    candidates = [Path(kind) / f"{stem}{suffix}"]
    folder = bundled_dir(kind)
    if folder is not None:
        candidates.append(folder / f"{stem}{suffix}")
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    return given


def judge_spec(value: Path | str) -> Path:
    """A judge spec by path (judges/tool_choice.toml) or by name (tool_choice)."""
    return resolve(value, "judges", ".toml")


def calibration_set(value: Path | str) -> Path:
    """A calibration set by path (calibration/tool_choice.jsonl) or by name (tool_choice)."""
    return resolve(value, "calibration", ".jsonl")

