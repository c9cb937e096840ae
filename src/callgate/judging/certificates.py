"""The certificate a calibration gives a judge, and the check that a judge may score.

A certificate is bound to the judge's fingerprint (change one word of the prompt and it no
longer applies), to the thresholds it was earned under, and to the labels the set held
(`check_labels`): the newest calibration of a fingerprint decides.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from callgate.errors import CallgateError, from_validation_error
from callgate.judging.calibration_set import label_text, read_set
from callgate.judging.dimensions import Dimension
from callgate.judging.judge import Judge
from callgate.store.db import Store

CERT_FORMAT: Final = "callgate.certificate/1"


class Confusion(BaseModel):
    """Positive class = pass. tp: both pass; fn: person pass, judge not; and so on.
    judge_error: items a person graded that the judge answered with no verdict; they are in
    none of the four cells (a non-answer is never agreement, nor a rate's evidence)."""

    model_config = ConfigDict(frozen=True)
    tp: int = 0
    fn: int = 0
    tn: int = 0
    fp: int = 0
    judge_error: int = 0

    @property
    def rated(self) -> int:
        """Items both the person and the judge gave a verdict on."""
        return self.tp + self.fn + self.tn + self.fp


class DimensionReport(BaseModel):
    model_config = ConfigDict(frozen=True)
    confusion: Confusion
    m1: int  # items a person labelled pass
    m0: int  # items a person labelled fail
    tpr: float | None
    tnr: float | None
    tpr_ci: tuple[float, float] | None
    tnr_ci: tuple[float, float] | None
    accuracy: float | None
    kappa: float | None
    passed: bool
    why_not: str = ""


class Disagreement(BaseModel):
    model_config = ConfigDict(frozen=True)
    item: str
    split: str
    dimension: Dimension
    person: str
    judge: str
    reason: str


class Certificate(BaseModel):
    """The outcome of a calibration; a judge may score only with a certified one."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    format: Literal["callgate.certificate/1"] = CERT_FORMAT
    judge: str
    fingerprint: str
    model: str
    created_at: str
    set_path: str
    set_sha256: str
    items: int
    test_items: int
    thresholds: dict[str, float | str]
    dimensions: dict[str, DimensionReport]
    certified: bool
    judge_errors: int = 0  # items of the whole set the judge answered with no verdict
    why_not: str = ""  # why it is not certified (void), in words
    # The labels it was earned on, id -> "split tool_choice/arguments": what changed, if the
    # set changes (see check_labels).
    labels: dict[str, str] = Field(default_factory=dict)
    # Test items whose labels a person gave or confirmed (labeller not "assistant" or unknown).
    person_confirmed: int | None = None

    def to_json(self) -> str:
        return json.dumps(self.model_dump(mode="json"), indent=2, sort_keys=True) + "\n"




def read_certificate(path: Path) -> Certificate | None:
    if not path.is_file():
        return None
    try:
        return Certificate.model_validate_json(path.read_text(encoding="utf-8"))
    except ValidationError as exc:
        raise from_validation_error(path, None, exc) from None


def void_reason(certificate: Certificate) -> str:
    """Why a calibration did not certify, in words (older certificates: from the dimensions)."""
    return certificate.why_not or "; ".join(
        f"{dim}: {report.why_not}" for dim, report in certificate.dimensions.items()
        if not report.passed) or "it did not meet the thresholds"


def _newest(certificates: Iterable[Certificate]) -> Certificate:
    """The newest calibration; on a tie, a failed one (it voids, never the reverse)."""
    return max(certificates, key=lambda c: (datetime.fromisoformat(c.created_at),
                                            not c.certified))


def require_certificate(judge: Judge, store: Store | None = None) -> Certificate:
    """The certificate for this exact judge, or a clear refusal. The newest calibration of the
    fingerprint (in the certificate file or the store) decides: a failed one voids an earlier
    success. The certificate must have been earned under the spec's current thresholds
    (thresholds are not in the fingerprint: they decide certification, not verdicts) and on the
    labels the set holds now (check_labels)."""
    thresholds = judge.spec.thresholds.model_dump()
    # Certificates made before these fields existed were earned under their defaults.
    defaults = {"rule": "point", "min_person_confirmed": 0.0}
    stored_json = store.certificate(judge.fingerprint) if store is not None else None
    stored = Certificate.model_validate_json(stored_json) if stored_json else None
    found = read_certificate(judge.certificate_path)
    mine = [c for c in (found, stored) if c is not None and c.fingerprint == judge.fingerprint]
    again = (f"Calibrate it again: callgate judge calibrate {judge.spec_path} --set FILE (or "
             "pass --uncalibrated to score anyway; the gate will then be inconclusive)")
    name = f"judge {judge.spec.name} (fingerprint {judge.fingerprint[:12]})"
    if mine:
        newest = _newest(mine)
        if not newest.certified:
            raise CallgateError(
                f"{name}: certificate void: its newest calibration ({newest.created_at}, on "
                f"{newest.set_path}) failed: {void_reason(newest)}. {again}")
        if {**defaults, **newest.thresholds} != thresholds:
            raise CallgateError(
                f"{name} has no certificate. Its certificate was earned under other thresholds "
                f"({newest.thresholds}) than the spec sets now ({thresholds}). {again}")
        check_labels(newest, judge, store)
        return newest
    detail = ""
    if found is not None:
        detail = (f" {judge.certificate_path} is for fingerprint {found.fingerprint[:12]}, "
                  "not this one: the prompt, model or parameters changed since it was made.")
    raise CallgateError(
        f"{name} has no certificate.{detail} Calibrate it first: callgate judge calibrate "
        f"{judge.spec_path} --set FILE (or pass --uncalibrated to score anyway; the gate will "
        "then be inconclusive)")


def _set_file(certificate: Certificate, judge: Judge) -> Path | None:
    """The set a certificate was earned on: its path as given (from the working directory),
    else beside the spec or one folder up (judges/ and calibration/ in one project)."""
    recorded = Path(certificate.set_path)
    places = [recorded] if recorded.is_absolute() else [
        recorded, judge.spec_path.parent / recorded, judge.spec_path.parent.parent / recorded]
    return next((place for place in places if place.is_file()), None)


def label_changes(before: Mapping[str, str], now: Mapping[str, str], limit: int = 5) -> str:
    """What changed between two {item id: "split tool/arguments"} maps, in words."""
    changed = [i for i in before if i in now and before[i] != now[i]]
    added = [i for i in now if i not in before]
    removed = [i for i in before if i not in now]
    parts = []
    if changed:
        shown = ", ".join(f"{i} {before[i]} -> {now[i]}" for i in changed[:limit])
        more = f", and {len(changed) - limit} more" if len(changed) > limit else ""
        parts.append(f"{len(changed)} label(s) changed ({shown}{more})")
    if added:
        parts.append(f"{len(added)} item(s) added ({', '.join(added[:limit])}"
                     f"{', ...' if len(added) > limit else ''})")
    if removed:
        parts.append(f"{len(removed)} item(s) removed ({', '.join(removed[:limit])}"
                     f"{', ...' if len(removed) > limit else ''})")
    return "; ".join(parts)


def check_labels(certificate: Certificate, judge: Judge, store: Store | None) -> None:
    """Refuse a certificate whose set no longer holds the labels it was earned on: the set
    file's SHA-256 must match; without the file, the labels stored for the set must."""
    where = f"judge {judge.spec.name}: its certificate was earned on {certificate.set_path}"
    again = (f"Calibrate it again on the set as it is now: callgate judge calibrate "
             f"{judge.spec_path} --set {certificate.set_path} (or pass --uncalibrated)")
    path = _set_file(certificate, judge)
    if path is not None:
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        if digest == certificate.set_sha256:
            return
        try:
            items, _ = read_set(path)
            what = label_changes(certificate.labels,
                                 {item.id: label_text(item) for item in items})
        except CallgateError as exc:
            what = f"and it cannot be read now ({exc})"
        if not certificate.labels:
            what = "(the certificate predates per-item labels, so which ones is unknown)"
        raise CallgateError(
            f"{where} (SHA-256 {certificate.set_sha256[:12]}), which has changed since "
            f"(SHA-256 {digest[:12]} now): "
            f"{what or 'no label changed, but the file did (notes, cases or order)'}. {again}")
    stored = store.calibration_labels(Path(certificate.set_path).name) if store else {}
    if not stored:
        raise CallgateError(
            f"{where}, which is neither at that path nor in the store, so its labels cannot "
            f"be checked. Run from the folder you calibrated in, or {again[0].lower()}"
            f"{again[1:]}")
    if certificate.labels and stored != certificate.labels:
        raise CallgateError(
            f"{where}; the labels stored for it in {store.path if store else 'the store'} have "
            "changed since: "
            f"{label_changes(certificate.labels, stored)}. {again}")


def dimension_rates(certificate: Certificate, dim: str) -> tuple[float, float, int, int] | None:
    report = certificate.dimensions.get(dim)
    if report is None or report.tpr is None or report.tnr is None:
        return None
    return report.tpr, report.tnr, report.m1, report.m0
