"""Calling a model: the candidate's configuration (`config`), the provider clients and their
cache (`providers`) and the retry policy (`retry`). Used by live runs and by the judge."""
