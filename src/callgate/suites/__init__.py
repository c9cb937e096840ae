"""Stage 1, what is asked: a suite (tools and cases), the optional tool environment, and the
recorded responses to its cases.

`suite` loads and lints a suite folder; `environment` loads a suite's Python environment;
`responses` reads a JSON Lines file of responses; `attempt_keys` names each attempt.
"""
