"""OpenTelemetry traces of a team's own agent as recorded answers (docs/traces.md).

Reads OTLP JSON exports (the Collector's file exporter) whose model calls follow the GenAI
semantic conventions (opentelemetry-instrumentation-openai-v2) or OpenInference's
(openinference-instrumentation-openai): one trace is one attempt. Plain JSON parsing: no
OpenTelemetry package is imported."""

from callgate.importers.traces.attempts import CASE_ATTRIBUTE, Trace, read_trace_file
from callgate.importers.traces.lines import trace_line, trace_lines, write_lines

__all__ = ["CASE_ATTRIBUTE", "Trace", "read_trace_file", "trace_line", "trace_lines",
           "write_lines"]
