"""Finding the releases to compare: the stored run of a release, and its baseline (the store's
last released run of its agent and suite, or a scores file), with the releases passed over."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

from callgate.errors import CallgateError, InputError
from callgate.gating.cases import CaseRecord, Paired, kept_records, tally
from callgate.gating.decision import OtherAgent
from callgate.gating.scores_file import (
    ReleaseScores,
    finished_scores,
    gate_of,
    read_release_file,
    release_from_run,
    why_not_a_baseline,
)
from callgate.scoring.exclusion import DEFAULT_MAX_EXCLUDED
from callgate.store.db import Store
from callgate.store.rows import StoredRun
from callgate.suites.shard import incomplete
from callgate.suites.surface import expectation_key


def stored_release(store: Store, run: StoredRun) -> ReleaseScores:
    """A stored run's release scores, its cases tallied from only the columns they need."""
    return with_cases(store, run, release_from_run(run, ()))


def with_cases(store: Store, run: StoredRun, scores: ReleaseScores,
               suite_cases: Sequence[str] | None = None) -> ReleaseScores:
    """`scores` (the stored run's, without cases) with the run's case records and its suite's
    case ids (`suite_cases`: read already)."""
    if suite_cases is None:
        suite_cases = store.suite_case_ids(run.suite)
    # both as read (the store's case ids come sorted), not validated again one by one
    return with_expectations(store, scores, run.suite).model_copy(update={
        "cases": stored_cases(store, run.id), "suite_cases": list(suite_cases)})


def with_expectations(store: Store, scores: ReleaseScores, suite: str) -> ReleaseScores:
    """`scores` with its tool surface's expectation digests, made from the cases of `suite`
    the store keeps (a run keeps its surface without them)."""
    surface = scores.tool_surface
    if surface is None or surface.expectations:
        return scores
    keys = {case_id: expectation_key(expect, never)
            for case_id, expect, never in store.case_expectations(suite)}
    return scores.model_copy(update={
        "tool_surface": surface.model_copy(update={"expectations": keys})})


def stored_cases(store: Store, run_id: int) -> dict[str, CaseRecord]:
    """A stored run's case records: its tallies kept when it finished, or, for a run finished
    before they were kept, its verdicts tallied (the same records)."""
    kept = store.case_tallies(run_id)
    return kept_records(kept) if kept else tally(store.gate_rows(run_id))


def paired_releases(store: Store, run: StoredRun, current: ReleaseScores,
                    baseline_run: StoredRun | None, baseline: ReleaseScores
                    ) -> tuple[ReleaseScores, ReleaseScores, Paired | None]:
    """The two releases as `decide` compares them (`current` and a stored `baseline` given
    without cases, `baseline_run`: the baseline's run when it is stored). Two runs with kept
    tallies are paired in the store, which reads out only the cases whose tallies differ, and
    their suites' case ids are read only when the suites differ (None: decide pairs them);
    otherwise each stored release gets its cases."""
    suites = {run.suite} | ({baseline_run.suite} if baseline_run is not None else set())
    if (baseline_run is not None and store.has_case_tallies(run.id)
            and store.has_case_tallies(baseline_run.id)):
        in_suites = None  # one suite: every case a run tallied is one of its cases
        if len(suites) > 1:
            now_ids, then_ids = (store.suite_case_ids(s) for s in (run.suite,
                                                                   baseline_run.suite))
            current = current.model_copy(update={"suite_cases": now_ids})
            baseline = baseline.model_copy(update={"suite_cases": then_ids})
            in_suites = set(now_ids) & set(then_ids)
        # each differing case with its slice marks, for the gate's slices (what_to_fix.py)
        counted, differing = store.paired_tallies(baseline_run.id, run.id,
                                                  (baseline_run.suite, run.suite))
        return current, baseline, Paired.counted(counted, differing, in_suites)
    ids = {suite: store.suite_case_ids(suite) for suite in suites}
    current = with_cases(store, run, current, ids[run.suite])
    if baseline_run is not None:
        baseline = with_cases(store, baseline_run, baseline, ids[baseline_run.suite])
    return current, baseline, None


def find_current(store: Store, agent: str, release: str, suite_name: str | None
                 ) -> StoredRun:
    """The finished run of `agent`'s release. A name that is no agent's but the model id of
    exactly one agent's run of the release finds that run (`--model` given the model id of a
    release filed under its candidate's name)."""
    runs = [r for r in store.stored_runs(agent, suite_name) if r.release == release]
    if not runs:
        runs = [r for r in store.stored_runs(suite_name=suite_name)
                if r.release == release and r.model == agent]
        if len({r.agent for r in runs}) > 1:
            names = ", ".join(sorted({r.agent for r in runs}))
            raise CallgateError(f"release {release!r} of model {agent!r} belongs to several "
                                f"agents ({names}); choose one with --agent")
    if not runs:
        where = f" on suite {suite_name}" if suite_name else ""
        raise CallgateError(
            f"no finished run of agent {agent!r} release {release!r}{where} in {store.path}; "
            "score it first (callgate score or callgate run)")
    if len(runs) > 1:
        names = ", ".join(sorted(r.suite_name for r in runs))
        raise CallgateError(f"release {release!r} of {agent!r} was run on several suites "
                            f"({names}); choose one with --suite")
    return runs[0]


def _earlier_stored(store: Store, current: StoredRun, agent: str | None,
                    max_excluded: float) -> Iterator[tuple[StoredRun, str | None]]:
    """The runs on `current`'s suite made before it, newest first, of `agent` (None: of every
    other agent), each with why it is not a baseline (None: it can be one)."""
    earlier = [r for r in store.stored_runs(agent, current.suite_name)
               if (agent is not None or r.agent != current.agent)
               and (r.agent, r.release) != (current.agent, current.release)
               and (r.created_at, r.id) < (current.created_at, current.id)]
    for run in reversed(earlier):
        scores = finished_scores(run)
        why = why_not_a_baseline(gate_of(run), scores.attempts, scores.excluded,
                                 scores.uncalibrated, max_excluded)
        yield run, why or incomplete(run)  # a release missing shards was never whole


def baseline_in_store(store: Store, current: StoredRun,
                      max_excluded: float = DEFAULT_MAX_EXCLUDED, agent: str | None = None
                      ) -> tuple[StoredRun | None, list[str]]:
    """The run of the most recent other *released* release of the same agent (or of `agent`,
    named with --baseline-agent) and suite before `current`, and a note for every newer one
    passed over because it was not released."""
    skipped: list[str] = []
    for run, why in _earlier_stored(store, current, agent or current.agent, max_excluded):
        if why is None:
            return run, skipped
        skipped.append(f"release {run.release} is not a baseline: {why}")
    return None, skipped


def other_agent_in_store(store: Store, current: StoredRun,
                         max_excluded: float = DEFAULT_MAX_EXCLUDED) -> OtherAgent | None:
    """The newest released run of another agent on `current`'s suite before it, if any."""
    for run, why in _earlier_stored(store, current, None, max_excluded):
        if why is None:
            return OtherAgent(agent=run.agent, release=run.release, model=run.model)
    return None


def baseline_from_path(path: Path, current: ReleaseScores,
                       max_excluded: float = DEFAULT_MAX_EXCLUDED, agent: str | None = None
                       ) -> tuple[ReleaseScores | None, list[str], OtherAgent | None]:
    """A scores file, or the newest released one in a folder of the same agent (or of
    `agent`, named with --baseline-agent) and suite; a note for every newer file passed over
    because its release was not released; and, when the folder holds no baseline and no agent
    was named, another agent's newest released release in it (decide's `other_agent`).

    A path that does not exist is an error, never "no baseline": a mistyped folder would
    otherwise pass every release as a first release. Start with an empty folder. A file named
    on its own is the baseline whatever agent it belongs to (it is named in the decision), but
    it must be of the same suite, of `agent` when one is named, and released."""
    if not path.exists():
        raise InputError(path, "no such scores file or folder (for the first release, create "
                               "the folder, e.g. releases/ with a .gitkeep, and commit it)")
    if not path.is_dir():
        baseline = read_release_file(path)
        if baseline.suite_name != current.suite_name or agent not in (None, baseline.agent):
            wanted = f"agent {agent}" if agent else current.agent
            raise InputError(
                path, f"holds agent {baseline.agent} ({baseline.model}) on "
                      f"{baseline.suite_name}, not {wanted} on {current.suite_name}")
        why = baseline.why_not_a_baseline(max_excluded)
        if why is not None:
            raise InputError(path, f"release {baseline.release} cannot be a baseline: {why}")
        return baseline, [], None
    earlier = []
    for file in sorted(path.glob("*.json")):
        release = read_release_file(file)
        if release.suite_name == current.suite_name and (
            (release.agent, release.release) != (current.agent, current.release)
            and release.created_at < current.created_at
        ):
            earlier.append((file, release))
    earlier.sort(key=lambda c: c[1].created_at, reverse=True)
    wanted = agent or current.agent
    skipped: list[str] = []
    for file, release in (c for c in earlier if c[1].agent == wanted):
        why = release.why_not_a_baseline(max_excluded)
        if why is None:
            return release, skipped, None
        skipped.append(f"release {release.release} ({file.name}) is not a baseline: {why}")
    if agent is None:
        for _, release in (c for c in earlier if c[1].agent != current.agent):
            if release.why_not_a_baseline(max_excluded) is None:
                return None, skipped, OtherAgent(agent=release.agent, release=release.release,
                                                 model=release.model)
    return None, skipped, None
