"""`callgate merge`: combine the stores of the shards of a run (or any callgate stores) into one.

The SQL is in the store (Store.merge_from); this module opens the stores, merges them all in
one transaction, and computes the figures of every release that got attempts again from its
verdicts, with the scoring code a run uses, so a release merged from its shards has the figures
of the same release run unsharded. What the verdicts do not give is kept from the shards'
scores and combined (merging/figures.py: attack, judged kinds and claims, server errors, a
budget's stop) or read again from the attempts (merging/recovery.py: fault recovery).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from callgate.checks.verdict import Verdict
from callgate.errors import CallgateError
from callgate.judging.certificates import Certificate
from callgate.judging.judge import JudgeOutput
from callgate.judging.step import JudgedTally, judged_shares
from callgate.merging.figures import COMBINED, Part, Refusal, kept_figures
from callgate.merging.merge_input import check_merge_input
from callgate.merging.recovery import RecoveryPart, checked_recovery
from callgate.scoring.exclusion import DEFAULT_MAX_EXCLUDED
from callgate.scoring.result import not_a_result
from callgate.scoring.scores import ScoreBuilder, Scores
from callgate.scoring.stored import StoredScores, stored_scores
from callgate.store.db import Store
from callgate.store.merging import MergedSource
from callgate.store.opening import MergeRefused, check_store_file
from callgate.store.rows import StoredRun


@dataclass(frozen=True)
class MergedRelease:
    run_id: int
    suite_name: str
    agent: str
    release: str
    shards: list[int] | None
    shard_count: int | None
    attempts: int
    perturbation: str | None = None  # a perturbed run of the release (`run --perturb`)


def rescore(store: Store, run_id: int, uncalibrated: bool,
            kept: Sequence[StoredScores] = ()) -> Scores:
    """A stored run's scores, computed again from its verdicts (and the cost, usage, latency
    and provider of its responses) as the Recorder computed them while scoring; the policies
    the suite declares, and their max_rise, as the `kept` scores of its shards list them."""
    run = store.stored_run(run_id)
    assert run is not None
    declared, max_rise = _declared_policies(kept)
    builder = ScoreBuilder(tags_of=store.case_tags_of(run.suite),
                           no_call_cases=store.no_call_cases_of(run.suite),
                           policies=declared, policy_max_rise=max_rise,
                           unwarranted_calls_max_rise=next(
                               (k.unwarranted_calls_max_rise for k in kept
                                if k.unwarranted_calls_max_rise is not None), None))
    tally = JudgedTally()
    for row in store.merged_attempts(run_id):
        verdict = Verdict.model_validate(row)
        judged = row["judged_tool_choice"] is not None
        builder.add(verdict, cost=row["cost"],
                    prompt_tokens=row["prompt_tokens"],
                    completion_tokens=row["completion_tokens"],
                    latency_ms=row["latency_ms"], provider=row["provider"],
                    failed_request=row["error_kind"] is not None)
        if judged:
            # The final verdict keeps the deterministic failures the tally looks at.
            tally.add(verdict, JudgeOutput.model_validate(
                {"tool_choice": row["judged_tool_choice"], "arguments": row["judged_arguments"],
                 "reason": ""}))
        elif verdict.status == "judge_error":
            tally.judge_errors += 1
    scores = builder.build()
    fingerprint = run.judge_fingerprint
    if fingerprint is None:
        return scores
    certificate = None
    stored = store.certificate(fingerprint)
    if stored and not uncalibrated:
        certificate = Certificate.model_validate_json(stored)
    return scores.model_copy(update={"judged": judged_shares(tally, fingerprint, certificate),
                                     "uncalibrated": certificate is None})


def _declared_policies(kept: Sequence[StoredScores]) -> tuple[list[str], float]:
    names: dict[str, None] = {}
    max_rise = 0.0
    for scores in kept:
        if scores.policies is not None:
            names.update(dict.fromkeys(scores.policies.by_policy))
            max_rise = max(max_rise, scores.policies.max_rise)
    return list(names), max_rise


def merge_stores(out: Path, inputs: list[Path]) -> list[MergedRelease]:
    """Merge `inputs` into the store `out` (made if new): all of it, or nothing on a conflict.
    Merging a store already merged changes nothing. The inputs are opened read-only. A new
    store is made in a temporary file beside `out` and renamed to it at the end, so a merge
    killed half-way leaves no `out` behind and the same command can simply be run again."""
    if not inputs:
        raise CallgateError("merge: name at least one store to merge")
    for path in inputs:
        if not path.is_file():
            raise CallgateError(f"{path}: " + ("is a folder, not a callgate store"
                                               if path.is_dir() else "file not found"))
        if path.resolve() == out.resolve():
            raise CallgateError(f"{path}: is the store merged into; name it once")
    sources: list[Store] = []
    try:
        for path in inputs:
            sources.append(Store(path, read_only=True))
            check_merge_input(sources[-1])
        if out.exists() and out.stat().st_size:
            return _merge_into(out, out, sources)
        check_store_file(out)
        handle, name = tempfile.mkstemp(dir=out.parent, prefix=f".{out.name}.",
                                        suffix=".merging")
        os.close(handle)
        work = Path(name)
        try:
            merged = _merge_into(work, out, sources)
            if out.exists() and out.stat().st_size:
                raise CallgateError(f"{out}: was made by another process while merging; "
                                    f"merge into it with --into {out}")
            os.replace(work, out)
        finally:
            for leftover in (work, *(work.with_name(work.name + s) for s in ("-wal", "-shm"))):
                leftover.unlink(missing_ok=True)
        return merged
    finally:
        for source in sources:
            source.close()


def _merge_into(path: Path, out: Path, sources: list[Store]) -> list[MergedRelease]:
    """Merge the open `sources` into the store file `path`, in one transaction; messages name
    the store as `out` (the file it becomes)."""
    merged: list[MergedRelease] = []
    with Store(path) as target:
        target.path = out  # only the name errors give: the temporary file becomes `out`
        with target.atomic():
            touched: dict[int, list[MergedSource]] = {}
            for source in sources:
                for run_id, runs in target.merge_from(source).items():
                    touched.setdefault(run_id, []).extend(runs)
            for run_id, runs in touched.items():
                merged.append(_rescore_merged(target, run_id, runs))
    return merged


def _rescore_merged(store: Store, run_id: int, sources: list[MergedSource]) -> MergedRelease:
    run = store.stored_run(run_id)
    assert run is not None
    where = (f"release {run.release!r} of agent {run.agent!r} on suite {run.suite_name!r}"
             + (" perturbed" if run.row.get("perturbation") is not None else ""))
    refuse = Refusal(where)
    # The parts of the release: the run already here (when it had finished before this merge)
    # and the source runs that brought attempts.
    parts: list[Part] = ([(store.path, run.scores)] if run.scores is not None else []) + [
        (source.store.path, source.run.scores) for source in sources
        if source.run.scores is not None]
    for source in sources:
        carried = [f for f in COMBINED if (source.run.scores or {}).get(f) is not None]
        if carried and not source.whole:
            raise MergeRefused(
                f"{source.store.path}: {where}: scores.{carried[0]}: some of its attempts are "
                "in the release already and others are not, so its figures cannot be added "
                "to the release's; merge whole shards")
    kept = [s for s in map(stored_scores, [run, *(source.run for source in sources)])
            if s is not None]
    scores = rescore(store, run_id, any(s.uncalibrated for s in kept), kept)
    record = not_a_result("run" if run.source == "live" else "score", scores.attempts,
                          scores.excluded, DEFAULT_MAX_EXCLUDED)
    document = scores.model_dump(mode="json")
    # The suite's gated figures (suite.json gate.figures) are the shards' to say, as scoring
    # wrote them beside their scores.
    gated = next((k.gate_figures for k in kept if k.gate_figures), None)
    if gated is not None:
        document["gate_figures"] = list(gated)
    document.update(kept_figures(parts, refuse))
    # A shard none of whose attempts met a fault has no recovery figures: not a disagreement
    # (reading every part again shows whether the parts agree).
    if any(document.get("recovery") is not None for _, document in parts):
        document["recovery"] = checked_recovery(
            store, run_id, _recovery_parts(store, run, sources), where,
            run.row.get("fault_plan"))
    store.write_merged_scores(run_id, document,
                              record.model_dump_json() if record is not None else None)
    return MergedRelease(run_id, run.suite_name, run.agent, run.release,
                         list(run.shards) if run.shards is not None else None,
                         run.shard_count, scores.attempts, run.row.get("perturbation"))


def _recovery_parts(store: Store, run: StoredRun, sources: list[MergedSource]
                    ) -> list[RecoveryPart]:
    """Each part's store, run and stored recovery, to read again: the sources' runs in their
    stores, and the run here (when it finished before this merge) on the attempts it had."""
    out: list[RecoveryPart] = [
        (source.store.path, source.store, source.run.id, (source.run.scores or {}).get(
            "recovery"), (), source.run.row.get("fault_plan")) for source in sources]
    if run.scores is not None:
        brought: set[tuple[str, int]] = set()
        for source in sources:
            brought |= source.store.attempt_keys(source.run.id)
        out.insert(0, (store.path, store, run.id, run.scores.get("recovery"), brought,
                       run.row.get("fault_plan")))
    return out
