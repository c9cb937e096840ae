"""Stage 5, the release decision: a candidate's scores against its baseline's (`gate`), the
statistics around it (`statistics`), and the share of excluded attempts a gate tolerates
(`thresholds`)."""
