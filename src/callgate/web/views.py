"""What the pages and the JSON API show, read from the store. No web framework here: the same
functions feed `callgate serve`, its JSON API and `callgate report --html`.

Decisions come from the gate (`callgate.gating.release`): a release `callgate gate` decided
shows that decision, taken with its rule, quarantine and slice rule (gating.gated); one it
never decided, what `callgate gate --model M --release R` (baseline auto, the default rule,
or `serve --config`'s [gate]: web.configured) would decide.
"""

from __future__ import annotations

import hashlib
import html
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, NotRequired, TypedDict, cast

from callgate.gating.decision import CaseChange, GateDecision, decide, decision_json
from callgate.gating.finding import stored_release
from callgate.gating.gated import GateInputs, kept_gated, retake_gated
from callgate.gating.noise import Noise
from callgate.gating.release import decide_release, decision_key, recorded_decision
from callgate.gating.scores_file import ReleaseScores, release_from_run
from callgate.gating.surface_diff import surface_lines
from callgate.gating.what_to_fix import read_what_to_fix
from callgate.scoring.exclusion import DEFAULT_MAX_EXCLUDED
from callgate.scoring.scores import Figures
from callgate.scoring.stored import stored_scores
from callgate.store.columns import VERDICT_COLUMNS
from callgate.store.db import Store
from callgate.store.rows import StoredRun
from callgate.store.serving import AttemptRows
from callgate.suites.responses import parse_response
from callgate.web.configured import configured_decision

MARKS = {"pass": "pass", "first_release": "first", "regression": "regression",
         "inconclusive": "inconclusive"}

# The JSON the pages, the chart and /api show, typed: a figure's key renamed is a type error
# where it is read. Each is a model's dump (`model_dump(mode="json")`); test_views_typed
# checks their keys against the models' fields.
Series = Literal["right_tool", "right_arguments"]


class ShareJSON(TypedDict):
    """A `Share` (scoring.scores) as JSON."""

    successes: int
    n: int
    pct: float | None
    low: float | None
    high: float | None
    design_effect: float
    icc: float | None


class FiguresJSON(TypedDict):
    """`Figures` (scoring.scores) as JSON."""

    scored: int
    right_tool: ShareJSON
    right_arguments: ShareJSON
    calls_per_task: float | None


class CheckJSON(TypedDict):
    """A gate's `FigureCheck` (gating.decision) as JSON."""

    name: Series
    baseline: ShareJSON
    current: ShareJSON
    change: float | None
    failed: bool
    mcnemar_p: float | None
    flipped_worse: int
    flipped_better: int
    detectable_drop_paired: float | None
    detectable_drop_unpaired: float | None
    gated: bool
    paired_drop: float | None
    paired_se: float | None
    p_margin: float | None
    tier: str | None


class FlipJSON(TypedDict):
    """A flipped case (`CaseChange`) as JSON."""

    case_id: str
    reason: str


class ReleaseSummary(TypedDict):
    """A release with its figures and its gate decision, as a page row, the chart and
    /api/releases show it (`release_summary`)."""

    run_id: int
    agent: str
    model: str
    suite: str
    release: str
    created_at: str
    figures: FiguresJSON
    outcome: str
    mark: str
    exit_code: int
    baseline_release: str | None
    max_drop: float
    checks: dict[str, CheckJSON]
    worse: list[FlipJSON]
    better: list[FlipJSON]
    messages: list[str]
    warnings: list[str]
    uncalibrated: bool
    flaky: list[dict[str, Any]]
    quarantined: list[dict[str, Any]]
    baseline_run_id: NotRequired[int | None]  # in a history: its baseline's run, for a link


class ReleaseDetail(ReleaseSummary):
    """One release's page and /api/runs/ID (`Views.release`): its summary, and more."""

    by_tag: dict[str, FiguresJSON]
    excluded: dict[str, int]
    attempts: int
    cost: dict[str, Any]
    latency: dict[str, float | None]
    providers: dict[str, int]
    pass_hat_k: dict[str, float]
    gate: dict[str, Any]
    tool_surface: list[str]
    tools: list[str]
    tags: list[str]
    judged_attempts: int


@dataclass
class Views:
    """Reads over one store, with the gate's decisions kept in the store (and the last few in
    memory) under a key of what they depend on (gating.release.decision_key): a finished run's
    verdicts never change (a re-run is a new run id), but which earlier release is its
    baseline depends on the gate decisions recorded on the model's runs."""

    store: Store
    max_drop: float = 2.0
    max_excluded: float = DEFAULT_MAX_EXCLUDED
    # A baseline other than the store's ("auto") for some runs, by run id: a scores file or a
    # folder of them, as `callgate gate --baseline` takes (`callgate report --baseline`).
    baselines: dict[int, str] = field(default_factory=dict)
    # callgate.toml's [gate] (`serve --config`): the inputs of a never-gated release's decision
    configured: GateInputs | None = None
    _decisions: dict[tuple[int, str], tuple[ReleaseScores, GateDecision]] = field(
        default_factory=dict)

    # ------------------------------------------------------------------ releases

    def models(self) -> list[dict[str, Any]]:
        return self.store.release_runs()

    def decision(self, run: StoredRun, suite_runs: Sequence[StoredRun] | None = None
                 ) -> tuple[ReleaseScores, GateDecision]:
        """The release's scores (figures, not cases) and the gate's decision, by `callgate
        gate`'s own rules (gating.release: baseline, audits, missing shards). A release
        `callgate gate` decided: that decision, with its inputs (as_gated). Else, against the
        store's baseline, the default rule's decision kept in the store (by an earlier view),
        under a key of everything it depends on; it is decided and kept when there is none.
        `suite_runs`: every run of the suite, when the caller has read them."""
        baseline = self.baselines.get(run.id, "auto")
        if baseline != "auto":
            decision, current = decide_release(self.store, run, baseline=baseline,
                                               max_drop=self.max_drop,
                                               max_excluded=self.max_excluded)
            return current, decision
        gated = self.as_gated(run, suite_runs)
        if gated is not None:
            return gated
        if self.configured is not None:
            return configured_decision(self.store, run, self.configured, suite_runs)
        key = decision_key(self.store, run, self.max_drop, self.max_excluded, suite_runs)
        cached = self._decisions.get((run.id, key))
        if cached is None:
            decision, current = recorded_decision(self.store, run, max_drop=self.max_drop,
                                                  max_excluded=self.max_excluded, key=key)
            if len(self._decisions) >= 8:  # a decision lists every flipped case: keep few
                self._decisions.clear()
            cached = self._decisions[(run.id, key)] = (current, decision)
        return cached

    def as_gated(self, run: StoredRun, suite_runs: Sequence[StoredRun] | None = None
                 ) -> tuple[ReleaseScores, GateDecision] | None:
        """The decision `callgate gate` last took on the run, with the rule, quarantine, slice
        rule and thresholds it was given (gating.gated): as kept while the store holds what
        it was taken on; taken again with those inputs when the store changed since (an
        earlier release gated, a judgement or an audit added). None when never gated."""
        kept = kept_gated(self.store, run.id)
        if kept is None:
            return None
        inputs = kept.inputs
        current = release_from_run(run, ())
        if inputs.baseline != "auto":  # a scores file the store cannot tell changed: as gated
            return current, kept.decision()
        key = decision_key(self.store, run, inputs.max_drop, inputs.max_excluded, suite_runs,
                           inputs.slice_rule)
        # The memory is keyed by the kept row too: a gate taken again (other inputs, the same
        # store) is shown at once, not after serve restarts.
        kept_row = hashlib.sha256("\0".join((kept.key, kept.inputs_json, kept.body)).encode())
        memo = (run.id, f"gated:{key}:{kept_row.hexdigest()}")
        cached = self._decisions.get(memo)
        if cached is not None:
            return cached
        if key == kept.key:
            decision = kept.decision()
        else:
            decision, _ = decide_release(
                self.store, run, max_drop=inputs.max_drop, max_excluded=inputs.max_excluded,
                rule=inputs.rule, quarantine=inputs.quarantine, slice_rule=inputs.slice_rule,
                recovery_max_drop=inputs.recovery_max_drop)
            if not retake_gated(self.store, run.id, kept, key, decision.model_dump_json()):
                return self.as_gated(run, suite_runs)  # a newer gate kept meanwhile: that one
        if len(self._decisions) >= 8:  # a decision lists every flipped case: keep few
            self._decisions.clear()
        self._decisions[memo] = (current, decision)
        return current, decision

    def history(self, model: str, suite_name: str) -> list[ReleaseSummary]:
        """Every finished release of a model on a suite, oldest first, with its figures and
        the gate's decision."""
        out: list[ReleaseSummary] = []
        runs = self.store.stored_runs(suite_name=suite_name)
        for run in (r for r in runs if r.agent == model):  # `model`: the agent's name
            release, decision = self.decision(run, runs)
            out.append(release_summary(run, release, decision))
        ids = {item["release"]: item["run_id"] for item in out}
        for item in out:  # for a link comparing the release with its baseline
            item["baseline_run_id"] = ids.get(item["baseline_release"] or "")
        return out

    def release(self, run_id: int) -> ReleaseDetail | None:
        run = self.store.stored_run(run_id)
        scores = stored_scores(run) if run is not None and run.status == "done" else None
        if run is None or scores is None:
            return None
        release, decision = self.decision(run)
        summary = release_summary(run, release, decision)
        return {
            **summary,
            "by_tag": {tag: figures_json(fig) for tag, fig in release.by_tag.items()},
            "excluded": release.excluded,
            "attempts": release.attempts,
            "cost": {"usd": scores.cost_usd, "unknown": scores.cost_unknown,
                     "prompt_tokens": scores.prompt_tokens,
                     "completion_tokens": scores.completion_tokens},
            "latency": {"p50_ms": scores.latency_p50_ms, "p95_ms": scores.latency_p95_ms},
            "providers": dict(scores.providers),
            # as stored (JSON object keys), for the page and the API alike
            "pass_hat_k": {str(k): v for k, v in scores.pass_hat_k.items()},
            "gate": decision_json(decision),
            # what changed in the tool surface, in the gate's own words (console, Markdown)
            "tool_surface": surface_lines(decision.tool_surface, limit=1000),
            "tools": self.store.suite_tool_names(run.suite),
            "tags": sorted(release.by_tag),
            "judged_attempts": len(self.store.judgements(run.id)),
        }

    def compared(self, before: StoredRun, after: StoredRun) -> GateDecision:
        """The gate's comparison of two finished runs (`after` against `before`, on the cases
        both scored): the decision kept for `after` when `before` is its baseline, else
        decided now (which reads both runs' verdicts)."""
        _, kept = self.decision(after)
        if (kept.baseline_release == before.release
                and kept.baseline_agent in (None, before.agent)
                and before.suite_name == after.suite_name):
            return kept
        now, then = stored_release(self.store, after), stored_release(self.store, before)
        # the release's own gate left its quarantined cases out: so does the comparison
        left_out = tuple(kept.quarantined)
        fix = read_what_to_fix(self.store, after, before, now, then, None, self.max_drop,
                               quarantined=left_out)
        return decide(now, then, max_drop=self.max_drop, max_excluded=self.max_excluded,
                      what_to_fix=fix, noise=Noise(rule=kept.rule, quarantined=left_out))

    def answers(self, run_id: int, case_ids: list[str]) -> dict[str, list[dict[str, Any]]]:
        """Each case's first answer in a run: its assistant turns with their calls."""
        return {case_id: _calls_of(json.loads(body))
                for case_id, body in self.store.first_responses(run_id, case_ids).items()}

    def suite_models(self, suite_name: str) -> list[ReleaseSummary]:
        """The newest release of every agent on a suite (with the model it ran with), with
        its figures and decision."""
        newest: dict[str, StoredRun] = {}
        runs = self.store.stored_runs(suite_name=suite_name)
        for run in runs:
            newest[run.agent] = run  # oldest first: the last one is the newest
        return [release_summary(run, *self.decision(run, runs))
                for _, run in sorted(newest.items())]

    def attempts(self, run_id: int, *, verdict: str | None = None, tag: str | None = None,
                 tool: str | None = None, case: str | None = None, limit: int = 100,
                 offset: int = 0) -> dict[str, Any]:
        total, rows = self.store.attempt_rows(run_id, verdict=verdict or None, tag=tag or None,
                                              tool=tool or None,
                                              case_ids=[case] if case else None,
                                              limit=limit, offset=offset)
        return {"total": total, "limit": limit, "offset": offset,
                "attempts": [attempt_summary(row) for row in rows]}

    def attempt(self, run_id: int, case_id: str, repeat: int) -> dict[str, Any] | None:
        found = self.store.attempt(run_id, case_id, repeat)
        if found is None:
            return None
        return attempt_detail(found, self.store.stored_run(run_id))


def figures_json(figures: Figures) -> FiguresJSON:
    return cast(FiguresJSON, figures.model_dump(mode="json"))


def flips_json(changes: Sequence[CaseChange]) -> list[FlipJSON]:
    """Flipped cases as the decision's JSON lists them, written out directly (through the
    serializer each case is a call: some 80 ms at 35,000 cases)."""
    return [{"case_id": case_id, "reason": reason} for case_id, reason in changes]


def release_summary(run: StoredRun, release: ReleaseScores, decision: GateDecision
                    ) -> ReleaseSummary:
    """The release's row: its figures and the gate's decision, read from the models."""
    return {
        "run_id": run.id, "agent": run.agent, "model": run.model, "suite": run.suite_name,
        "release": run.release, "created_at": run.created_at,
        "figures": figures_json(release.figures),
        "outcome": decision.outcome, "mark": MARKS[decision.outcome],
        "exit_code": decision.exit_code,
        "baseline_release": decision.baseline_release, "max_drop": decision.max_drop,
        "checks": {check.name: cast(CheckJSON, check.model_dump(mode="json"))
                   for check in decision.checks},
        "worse": flips_json(decision.worse), "better": flips_json(decision.better),
        "messages": decision.messages, "warnings": decision.warnings,
        "uncalibrated": release.uncalibrated,
        "flaky": [flaky._asdict() for flaky in decision.flaky],
        "quarantined": [q.model_dump(mode="json") for q in decision.quarantined],
    }


# A summary shows a verdict's columns (less its run) as they are stored, the two flags as
# booleans, and the two reasons joined into one.
REASON_COLUMNS = ("tool_reason", "arguments_reason")
FLAG_COLUMNS = ("right_tool", "right_arguments")
SUMMARY_COLUMNS = tuple(c for c in VERDICT_COLUMNS if c not in ("run", *REASON_COLUMNS))


def verdict_reason(verdict: Mapping[str, Any]) -> str:
    return "; ".join(p for p in (verdict[c] for c in REASON_COLUMNS) if p)


def attempt_summary(row: Mapping[str, Any]) -> dict[str, Any]:
    summary = {column: row[column] for column in SUMMARY_COLUMNS}
    summary.update({column: bool(row[column]) for column in FLAG_COLUMNS})
    summary.update({
        "tags": json.loads(row["tags"]) if row.get("tags") else [],
        "expect": row.get("expect_type"),
        "reason": verdict_reason(row),
        # the policies it broke, as a list (the store keeps JSON, NULL for none)
        "violations": json.loads(row["violations"]) if row.get("violations") else [],
    })
    return summary


# ---------------------------------------------------------------------- one attempt


def _calls_of(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The assistant turns of a stored response line, each with its tool calls."""
    try:
        response = parse_response(dict(body))
    except Exception:  # an unreadable line is shown raw, never a crash
        return []
    return [{"content": turn.content,
             "calls": [{"name": c.name, "arguments": c.arguments} for c in turn.tool_calls]}
            for turn in response.assistant_turns]


def highlights(reason: str, name: str) -> tuple[set[tuple[str, ...]], list[str]]:
    """The argument paths of a call to `name` that the verdict reason blames, and the problems
    that have no path of their own (a missing argument, a wrong tool)."""
    paths: set[tuple[str, ...]] = set()
    notes: list[str] = []
    for part in re.split(r"; ", reason):
        if re.search(rf"(^|\s|\(){re.escape(name)}\.[^\s:]+:", part):
            path = re.search(rf"{re.escape(name)}\.([^\s:]+):", part)
            if path:
                paths.add(tuple(path.group(1).split(".")))
        unknown = re.search(rf"{re.escape(name)}: '([^']+)' is not a parameter", part)
        if unknown:
            paths.add((unknown.group(1),))
        if re.search(rf"(^|\s){re.escape(name)}(\.\S+)?: missing required", part):
            notes.append(part)
    return paths, notes


def render_json(value: Any, marked: set[tuple[str, ...]], path: tuple[str, ...] = (),
                indent: int = 0) -> str:
    """Pretty-printed JSON as HTML (escaped), wrapping each member whose path is blamed in
    <mark>."""
    pad = "  " * (indent + 1)
    if isinstance(value, dict) and value:
        parts = []
        for key, item in value.items():
            sub = (*path, str(key))
            text = (f"{html.escape(json.dumps(key, ensure_ascii=False))}: "
                    f"{render_json(item, marked, sub, indent + 1)}")
            parts.append(pad + (f'<mark class="blame">{text}</mark>' if sub in marked else text))
        return "{\n" + ",\n".join(parts) + "\n" + "  " * indent + "}"
    if isinstance(value, list) and value:
        parts = []
        for index, item in enumerate(value):
            sub = (*path, str(index))
            text = render_json(item, marked, sub, indent + 1)
            parts.append(pad + (f'<mark class="blame">{text}</mark>' if sub in marked else text))
        return "[\n" + ",\n".join(parts) + "\n" + "  " * indent + "]"
    return html.escape(json.dumps(value, ensure_ascii=False))


def attempt_detail(found: AttemptRows, run: StoredRun | None) -> dict[str, Any]:
    """One attempt's page and /api document, from its stored rows (`Store.attempt`)."""
    verdict, case_row, response = found["verdict"], found["case"], found["response"]
    reason = verdict_reason(verdict)
    case = json.loads(case_row["body"]) if case_row else {}
    raw = json.loads(response["body"]) if response else {}
    turns = _calls_of(raw) if raw else []
    for turn in turns:
        for call in turn["calls"]:
            paths, notes = highlights(reason, call["name"])
            call["blamed_paths"] = [".".join(p) for p in sorted(paths)]
            call["notes"] = notes
            call["wrong_tool"] = bool(verdict["tool"] not in (None, "right") and re.search(
                rf"\b{re.escape(call['name'])}\b", verdict["tool_reason"] or "")) and bool(
                verdict["tool"] in ("wrong_tool", "unexpected_call", "extra_call"))
            try:
                parsed = json.loads(call["arguments"])
                call["valid_json"] = True
                call["pretty"] = render_json(parsed, paths)
            except json.JSONDecodeError:
                call["valid_json"] = False
                call["pretty"] = html.escape(call["arguments"])
    judgement = found["judgement"]
    return {
        "run_id": run and run.id, "agent": run and run.agent, "model": run and run.model,
        "release": run and run.release, "suite": run and run.suite_name,
        "verdict": attempt_summary({**verdict, "tags": case_row["tags"] if case_row else None,
                                    "expect_type": case.get("expect", {}).get("type")}),
        "messages": case.get("messages", []),
        "expect": case.get("expect"),
        "turns": turns,
        "raw": json.dumps(raw, indent=2, ensure_ascii=False),
        "response_meta": {k: response[k] for k in (
            "finish_reason", "provider", "cost", "latency_ms", "prompt_tokens",
            "completion_tokens", "error_kind")} if response else {},
        "judgement": dict(judgement) if judgement else None,
    }
