"""Stage 5, the release decision: a candidate's scores against its baseline's (`gate`), with
the share of excluded attempts a gate tolerates (`thresholds`)."""
