"""Who gave each label, the Wilson certification rule, and a minimum share of labels a person
confirmed."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from paths import ROOT

from callgate.judging.calibration import dimension_report, evaluate
from callgate.judging.calibration_set import person_confirmed, read_set
from callgate.judging.certificates import Confusion, require_certificate
from callgate.judging.judge import JudgeOutput, Thresholds, load_judge


def test_the_shipped_labels_are_marked_as_written_by_an_assistant() -> None:
    items, _ = read_set(ROOT / "calibration" / "tool_choice.jsonl")
    assert {i.labeller for i in items} == {"assistant"}
    assert not any(person_confirmed(i) for i in items)


def test_the_wilson_rule_is_stricter_than_the_point_rule() -> None:
    c = Confusion(tp=29, fn=1, tn=30, fp=0)  # TPR 0.967: Wilson lower bound 0.833
    assert dimension_report(c, 0.9, 0.9, 30).passed
    strict = dimension_report(c, 0.9, 0.9, 30, rule="wilson")
    assert not strict.passed and "TPR Wilson lower bound 0.833 below 0.9" in strict.why_not


def _judge(tmp_path: Path, **thresholds: object):
    for name in ("tool_choice.toml", "tool_choice.md"):
        shutil.copy(ROOT / "judges" / name, tmp_path / name)
    judge = load_judge(tmp_path / "tool_choice.toml")
    spec = judge.spec.model_copy(update={"thresholds": Thresholds(
        min_items_per_class=1, **thresholds)})
    return judge.model_copy(update={"spec": spec})


def _perfect_outputs(items):
    return {i.id: JudgeOutput(tool_choice=i.label.tool_choice, arguments=i.label.arguments,
                              reason="agrees") for i in items}


def test_a_certificate_can_require_person_confirmed_labels(tmp_path: Path) -> None:
    items, digest = read_set(ROOT / "calibration" / "tool_choice.jsonl")
    test = [i for i in items if i.split == "test"]
    outputs = _perfect_outputs(items)
    judge = _judge(tmp_path, min_person_confirmed=0.5)
    refused, _ = evaluate(judge, items, outputs, "set.jsonl", digest)
    assert not refused.certified and refused.person_confirmed == 0
    # A person confirms half the test items: now it certifies.
    confirmed = {i.id for i in test[: (len(test) + 1) // 2]}
    relabelled = [i.model_copy(update={"labeller": "Ada"}) if i.id in confirmed else i
                  for i in items]
    accepted, _ = evaluate(judge, relabelled, outputs, "set.jsonl", digest)
    assert accepted.certified and accepted.person_confirmed == len(confirmed)
    # The default (0) certifies the shipped, assistant-written labels.
    default, _ = evaluate(_judge(tmp_path), items, outputs, "set.jsonl", digest)
    assert default.certified


def test_a_certificate_from_before_the_new_threshold_fields_still_counts(tmp_path: Path
                                                                         ) -> None:
    items, digest = read_set(ROOT / "calibration" / "tool_choice.jsonl")
    judge = _judge(tmp_path)
    certificate, _ = evaluate(judge, items, _perfect_outputs(items),
                              str(ROOT / "calibration" / "tool_choice.jsonl"), digest)
    old = json.loads(certificate.to_json())
    for key in ("rule", "min_person_confirmed"):
        del old["thresholds"][key]
    del old["person_confirmed"]
    judge.certificate_path.write_text(json.dumps(old))
    assert require_certificate(judge).fingerprint == judge.fingerprint


@pytest.mark.slow
def test_hand_labels_record_the_labeller_and_time(tmp_path: Path, callgate_exe: str,
                                                  cli_env: dict, loopback) -> None:
    from live_judge import judged_responses, judged_suite, make_judge, run, verdict
    from loopback import ok

    spec = make_judge(tmp_path, loopback.base_url)
    for n in range(4):
        loopback.script(f"[case-{n}]", ok(content=verdict("pass", "pass"), provider=None,
                                           cost=None))
    scored = run(callgate_exe, cli_env, tmp_path, "score", str(judged_suite(tmp_path / "s")),
                 "-r", str(judged_responses(tmp_path / "r.jsonl")), "-m", "m", "--release",
                 "r1", "--db", "c.db", "--judge", str(spec), "--uncalibrated", "--json")
    run_id = json.loads(scored.stdout)["run_id"]
    result = subprocess.run([callgate_exe, "judge", "label", str(run_id), "--set", "grown.jsonl",
                             "--labeller", "Grace", "--db", "c.db"], input="pass\npass\n\nq\n",
                            cwd=tmp_path, env=cli_env, capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    items, _ = read_set(tmp_path / "grown.jsonl")
    assert [(i.labeller, bool(i.labelled_at)) for i in items] == [("Grace", True)]
