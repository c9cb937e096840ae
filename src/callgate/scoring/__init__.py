"""Stage 4, scores: a run's verdicts (checked and judged) recorded and folded into figures
(`scores`); `pipeline` scores a file of recorded responses end to end."""
