"""What is kept with a release: its scores (`ReleaseScores`, the scores file a later release
is gated against) and the decision its gate took (`GateRecord`)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from callgate.checks.verdict import ServerErrors, Verdict
from callgate.gating.attack_gate import AttackFigures
from callgate.gating.cases import CaseField, case_records
from callgate.reading import names_lines, read_json, validate
from callgate.scoring.exclusion import DEFAULT_MAX_EXCLUDED, excluded_share, too_many_excluded
from callgate.scoring.result import GateRecord, Outcome
from callgate.scoring.scores import ClaimFigures, Figures, KindFigures, PolicyFigures, Share
from callgate.scoring.stored import StoredScores, finished, stored_gate
from callgate.store.rows import StoredRun
from callgate.suites.surface import ToolSurface
from callgate.version import __version__

FORMAT: Final = "callgate.release/1"

RELEASED: frozenset[Outcome] = frozenset({"pass", "first_release"})


def why_not_a_baseline(gate: GateRecord | None, attempts: int, excluded: Mapping[str, int],
                       uncalibrated: bool, max_excluded: float) -> str | None:
    """None when a release can be a baseline, else why not. The newest recorded decision
    counts; a release never gated (scored, or kept by an older callgate) counts as released
    unless its own figures would make any gate inconclusive."""
    if gate is not None:
        if gate.released:
            return None
        notes = f" ({'; '.join(gate.messages)})" if gate.messages else ""
        return f"its {gate.decided_by} decided {gate.outcome}{notes}: not released"
    why = too_many_excluded(attempts, excluded, max_excluded)
    if why is not None:
        return f"{why}: not a result, not released"
    if uncalibrated:
        return "it was scored by an uncalibrated judge: not released"
    return None


class ReleaseScores(BaseModel):
    """The scores kept with a release: what a later release is gated against."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    format: Literal["callgate.release/1"] = FORMAT
    callgate_version: str
    # The agent the release belongs to (its lineage), and the model id and parameters it ran
    # with (None: not known, e.g. recorded answers). A file without `agent` was written before
    # agents: its model was the name it was filed under, and is its agent.
    agent: str
    model: str
    model_params: dict[str, Any] | None = None
    # The simulated user its scenario cases were played with ({name, model, fingerprint};
    # absent: none, or kept by an older callgate).
    user_simulator: dict[str, Any] | None = None
    release: str
    suite_name: str
    suite_fingerprint: str
    created_at: str
    judge_fingerprint: str | None = None
    uncalibrated: bool = False
    # count: server errors were scored as wrong answers (--server-errors count), not excluded
    server_errors: ServerErrors = "exclude"
    attempts: int
    excluded: dict[str, int]
    figures: Figures
    by_tag: dict[str, Figures] = Field(default_factory=dict)
    cases: dict[str, CaseField]
    # Every case id of the suite, answered or not: tells "removed from the suite" apart from
    # "not scored this time" (a partial responses file, a run stopped early).
    suite_cases: list[str] = Field(default_factory=list)
    # The decision taken on this release (absent: never gated, or kept by an older callgate).
    gate: GateRecord | None = None
    # With an audit of the judged attempts: the figures estimated with it, each naming its
    # estimator (audit.estimates_document). Absent: `figures` count the judge's verdicts as
    # given.
    estimates: dict[str, Any] | None = None
    # The tool surface the release ran with (suites/surface.py): what the gate diffs against
    # the baseline's. Absent: kept by an older callgate.
    tool_surface: ToolSurface | None = None
    # The policies the suite declares with their violations (absent: none declared, or kept by
    # an older callgate).
    policies: PolicyFigures | None = None
    attack: AttackFigures | None = None  # a run made with --attack (gating.attack_gate)
    # Attempts of no-call cases that called a tool (absent: none scored, or an older callgate).
    unwarranted_calls: Share | None = None
    # Recovery per fault kind (docs/faults.md); absent: no fault reached a case with
    # expectations, or kept by an older callgate.
    recovery: dict[str, Share] | None = None
    # Its gate's tolerance in points (absent: not gated on its own).
    unwarranted_calls_max_rise: float | None = None
    # The judges beyond the call, when applied (absent: not applied, or an older callgate).
    answer_kinds: KindFigures | None = None
    judged_claims: ClaimFigures | None = None

    @model_validator(mode="before")
    @classmethod
    def _agent_of_an_older_file(cls, raw: Any) -> Any:
        if isinstance(raw, Mapping) and "agent" not in raw and isinstance(raw.get("model"), str):
            raw = {**raw, "agent": raw["model"]}
        return raw

    def to_json(self) -> str:
        """Stable key order and formatting, so the file diffs well in git."""
        return json.dumps(self.model_dump(mode="json"), indent=2, sort_keys=True,
                          ensure_ascii=False) + "\n"

    @property
    def excluded_share(self) -> float:
        return excluded_share(self.attempts, self.excluded)

    def why_not_a_baseline(self, max_excluded: float = DEFAULT_MAX_EXCLUDED) -> str | None:
        return why_not_a_baseline(self.gate, self.attempts, self.excluded, self.uncalibrated,
                                  max_excluded)


@names_lines
def read_release_file(path: Path | str) -> ReleaseScores:
    source = Path(path)
    return validate(ReleaseScores, read_json(source, missing="scores file not found"), source)


def release_from_run(run: StoredRun, verdicts: Iterable[Verdict],
                     suite_cases: Iterable[str] = ()) -> ReleaseScores:
    """Build the release scores from a stored run and its verdicts."""
    scores = finished_scores(run)
    return ReleaseScores(
        callgate_version=run["callgate_version"] or __version__,
        agent=run.agent,
        model=run.model,
        model_params=run.model_params,
        user_simulator=run.user_simulator,
        release=run.release,
        suite_name=run.suite_name,
        suite_fingerprint=run.suite,
        created_at=run.created_at,
        judge_fingerprint=run.judge_fingerprint,
        uncalibrated=scores.uncalibrated,
        server_errors=scores.server_errors,
        attempts=scores.attempts,
        excluded=scores.excluded,
        figures=scores.figures,
        by_tag=scores.by_tag,
        cases=case_records(verdicts),
        suite_cases=sorted(suite_cases),
        gate=gate_of(run),
        tool_surface=tool_surface_of(run),
        policies=scores.policies,
        unwarranted_calls=scores.unwarranted_calls,
        recovery=scores.recovery,
        unwarranted_calls_max_rise=scores.unwarranted_calls_max_rise,
        answer_kinds=scores.answer_kinds,
        judged_claims=scores.judged_claims,
        attack=(run.scores or {}).get("attack"),  # kept beside the scores (Store.set_run_attack)
    )


def tool_surface_of(run: StoredRun) -> ToolSurface | None:
    """The tool surface kept with a stored run (None for a run made before it was kept)."""
    text = run.row.get("tool_surface")
    return ToolSurface.model_validate_json(text) if text else None


def gate_of(run: StoredRun) -> GateRecord | None:
    return stored_gate(run)


def finished_scores(run: StoredRun) -> StoredScores:
    """A finished run's scores (the gate only reads finished runs)."""
    return finished(run)
