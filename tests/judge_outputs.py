"""A certified judge's certificate and its outputs, built by hand for the judge's tests."""

from __future__ import annotations

from callgate.judging.calibration import dimension_report
from callgate.judging.certificates import Certificate
from callgate.judging.judge import Judge, JudgeOutput


def certificate(judge: Judge) -> Certificate:
    from callgate.judging.certificates import Confusion

    return Certificate(
        judge=judge.spec.name, fingerprint=judge.fingerprint, model=judge.spec.model,
        created_at="2026-01-01T00:00:00+00:00", set_path="set.jsonl", set_sha256="0" * 64,
        items=180, test_items=180, thresholds={"tpr": 0.9, "tnr": 0.9},
        dimensions={
            # TPR 45/50 = 0.90, TNR 45/50 = 0.90
            "tool_choice": dimension_report(Confusion(tp=45, fn=5, tn=45, fp=5), 0.9, 0.9, 30),
            # TPR 38/40 = 0.95, TNR 36/40 = 0.90
            "arguments": dimension_report(Confusion(tp=38, fn=2, tn=36, fp=4), 0.9, 0.9, 30),
        },
        certified=True,
    )


def out(tool: str, args: str) -> JudgeOutput:
    return JudgeOutput(tool_choice=tool, arguments=args)  # type: ignore[arg-type]
