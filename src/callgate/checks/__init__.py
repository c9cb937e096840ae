"""Stage 2, the verdict: each response is checked against its case's expectation, without a
model, into a `Verdict` (`verdict`).

`check` parses a response's calls and checks them against the case's expectation;
`trajectory` matches a multi-turn trajectory; `validation` validates arguments against a
tool's JSON schema.
"""
