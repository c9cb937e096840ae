"""Releases scored for the audit's tests: every case answers alike in each of its repeats,
and an audit that labels every judged attempt as the judge said."""

from __future__ import annotations

import json
from pathlib import Path

from live_judge import TOOLS, run, verdict
from loopback import Loopback, ok

CHECKED, JUDGED = 24, 6


def repeats_suite(root: Path) -> None:
    mixed_suite(root, CHECKED, JUDGED, checked_prefix="d")


def scored_release(loopback: Loopback, exe: str, env: dict, cwd: Path, spec: Path, release: str,
             repeats: int) -> int:
    """Score a release whose every case answers the same way in each of its repeats: 16 of
    the 24 checked cases right (no call), and the judge passing 4 of the 6 judged ones."""
    lines = []
    for n in range(CHECKED):
        response = ({"role": "assistant", "content": "9 to 5"} if n < 16 else
                    {"role": "assistant", "tool_calls": [{"id": "c", "type": "function",
                     "function": {"name": "escalate", "arguments": '{"summary": "x"}'}}]})
        lines += [{"case_id": f"d{n:02d}", "repeat": r, "response": response}
                  for r in range(repeats)]
    for n in range(JUDGED):
        marker = f"[{release}-{n:02d}]"
        loopback.script(marker, ok(content=verdict("pass", "pass") if n < 4
                                   else verdict("fail", "n/a"), provider=None, cost=None))
        response = {"role": "assistant", "tool_calls": [{"id": "c", "type": "function",
                    "function": {"name": "escalate",
                                 "arguments": json.dumps({"summary": marker})}}]}
        lines += [{"case_id": f"g{n:02d}", "repeat": r, "response": response}
                  for r in range(repeats)]
    path = cwd / f"{release}.jsonl"
    path.write_text("".join(json.dumps({**line, "finish_reason": "stop"}) + "\n"
                            for line in lines))
    scored = run(exe, env, cwd, "score", "suite", "-r", str(path), "-m", "m", "--release",
                 release, "--db", "c.db", "--judge", str(spec), "--json")
    assert scored.returncode == 0, scored.stderr
    return json.loads(scored.stdout)["run_id"]


def audit_in_full(cwd: Path, run_id: int) -> None:
    """Every judged attempt labelled as the judge said it (cases g00–g03 right)."""
    from callgate.judging.audit_sample import draw_audit
    from callgate.store.db import Store

    with Store(cwd / "c.db") as store:
        _, items = draw_audit(store, run_id, 3 * JUDGED, seed=11)
        for item in items:
            right = int(item["case_id"][1:]) < 4
            store.save_audit_label(run_id, item["case_id"], item["repeat"],
                                   "pass" if right else "fail", "pass" if right else "n/a",
                                   "Ada")


# --------------------------------------------------------------------------- one-sided audits


def mixed_suite(root: Path, checked: int, judged: int, checked_prefix: str = "c") -> None:
    """`checked` no-call cases (c00, …, or `checked_prefix`) and `judged` judge cases (g00, …)."""
    root.mkdir()
    (root / "tools.json").write_text(json.dumps(TOOLS))
    cases = [{"id": f"{checked_prefix}{n:02d}", "messages": [{"role": "user", "content": "hours?"}],
              "expect": {"type": "no_call"}} for n in range(checked)]
    cases += [{"id": f"g{n:02d}", "messages": [{"role": "user", "content": "a person"}],
               "expect": {"type": "judge", "rubric": "Escalate faithfully."}}
              for n in range(judged)]
    (root / "cases.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cases))


def score_mixed(loopback: Loopback, exe: str, env: dict, cwd: Path, spec: Path, release: str,
                checked_right: list[bool], judge_passes: list[bool]) -> int:
    """Score one attempt per case of the mixed suite: checked case n right (no call) when
    checked_right[n]; the loopback judge passes judged case n when judge_passes[n]."""
    answer = {"role": "assistant", "content": "9 to 5"}
    call = {"role": "assistant", "tool_calls": [{"id": "c", "type": "function", "function": {
        "name": "escalate", "arguments": '{"summary": "x"}'}}]}
    lines = [{"case_id": f"c{n:02d}", "response": answer if right else call}
             for n, right in enumerate(checked_right)]
    for n, passes in enumerate(judge_passes):
        marker = f"[{release}-{n:02d}]"
        loopback.script(marker, ok(content=verdict("pass", "pass") if passes
                                   else verdict("fail", "n/a"), provider=None, cost=None))
        lines.append({"case_id": f"g{n:02d}", "response": {
            "role": "assistant", "tool_calls": [{"id": "c", "type": "function", "function": {
                "name": "escalate", "arguments": json.dumps({"summary": marker})}}]}})
    path = cwd / f"{release}.jsonl"
    path.write_text("".join(json.dumps({**line, "finish_reason": "stop"}) + "\n"
                            for line in lines))
    scored = run(exe, env, cwd, "score", "suite", "-r", str(path), "-m", "m", "--release",
                 release, "--db", "c.db", "--judge", str(spec), "--json")
    assert scored.returncode == 0, scored.stderr
    return json.loads(scored.stdout)["run_id"]


def audit_judged(cwd: Path, run_id: int, truth: list[bool], n: int | None = None) -> None:
    """Draw an audit of `n` judged attempts (all by default) and label each judged case g<k>
    with truth[k]."""
    from callgate.judging.audit_sample import draw_audit
    from callgate.store.db import Store

    with Store(cwd / "c.db") as store:
        _, items = draw_audit(store, run_id, n or len(truth), seed=11)
        for item in items:
            right = truth[int(item["case_id"][1:])]
            store.save_audit_label(run_id, item["case_id"], item["repeat"],
                                   "pass" if right else "fail", "pass" if right else "n/a",
                                   "Ada")
