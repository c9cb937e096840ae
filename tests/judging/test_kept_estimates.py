"""An audit's estimates as a scores file keeps them, read back as the model the gate reads:
today's documents field for field, and older ones without `se` or `complete`."""

from __future__ import annotations

import pytest

from callgate.judging.estimates import Estimate
from callgate.judging.kept_estimates import KeptEstimate, kept_estimates
from callgate.stats import Z95


def _document(**audit: object) -> dict[str, object]:
    ppi = Estimate(estimator="ppi++", value=0.8, low=0.7, high=0.9, se=0.05, n=120, labels=40,
                   weight=0.6, estimand="release")
    raw = Estimate(estimator="raw", value=0.75, low=0.66, high=0.82, n=60)
    return {
        "audit": {"run": 3, "seed": 11, "sample": 40, "labelled": 40, "labellers": ["ana"],
                  "counted": 38, **audit},
        "right_tool": ppi.points(),
        "right_arguments": None,
        "judged": {"tool_choice": {"raw": raw.points(), "ppi++": ppi.points(),
                                   "rogan_gladen": {"estimator": "rogan_gladen", "pct": 77.0,
                                                    "low": 70.0, "high": 84.0, "n": 60}}},
        "by_tag": {"clean": {"right_tool": ppi.points(), "right_arguments": None}},
    }


def test_a_kept_document_reads_field_for_field() -> None:
    kept = kept_estimates(_document(skipped=0, complete=True, estimand="release"))
    assert kept is not None and kept.complete
    tool = kept.figure("right_tool")
    assert tool is not None and kept.figure("right_arguments") is None
    assert (tool.estimator, tool.n, tool.labels, tool.estimand) == ("ppi++", 120, 40, "release")
    assert tool.pct == pytest.approx(80.0) and tool.se_points() == pytest.approx(5.0)
    assert tool.weight == 0.6  # kept as "lambda"
    assert kept.audit is not None and kept.audit.counted == 38 and kept.audit.labellers == ["ana"]
    rg = kept.judged["tool_choice"]["rogan_gladen"]
    assert rg is not None and rg.pct == 77.0 and rg.n == 60
    assert kept.by_tag["clean"]["right_arguments"] is None
    with pytest.raises(ValueError, match="no kept figure"):
        kept.figure("calls_per_task")


def test_an_older_document_reads_its_se_from_the_interval_and_counts_as_complete() -> None:
    document = _document()
    today = Estimate(estimator="ppi++", value=0.8, low=0.7, high=0.9, se=0.05, n=120).points()
    old_tool = {k: v for k, v in today.items() if k not in ("se", "estimand", "lambda")}
    kept = kept_estimates({**document, "right_tool": old_tool})
    assert kept is not None and kept.complete  # written before skips were recorded
    tool = kept.figure("right_tool")
    assert tool is not None and tool.se is None and tool.weight is None
    assert tool.se_points() == pytest.approx((90.0 - 70.0) / (2 * Z95))
    assert kept_estimates(None) is None
    no_audit = kept_estimates({"audit": None})
    assert no_audit is not None and no_audit.complete and no_audit.right_tool is None


def test_an_audit_kept_with_skips_is_not_complete() -> None:
    kept = kept_estimates(_document(skipped=2, complete=False))
    assert kept is not None and not kept.complete
    with pytest.raises(ValueError, match="neither se nor interval"):
        KeptEstimate(estimator="ppi++", pct=80.0).se_points()
