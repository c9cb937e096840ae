"""Merging stores (`callgate merge`), e.g. the shard stores of one release: every input checked
before anything is copied (`merge_input`), the rows copied in one transaction and each merged
release scored again from its verdicts, as a run scores them (`merge`). It sits beside running
and gating, above scoring: merging is neither a live run nor a gate decision."""
