"""The Python SDK's trajectory of a trace: the id the gateway and OTLP ingest give that trace,
from a traceparent header or from the current OpenTelemetry span."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from rewardstream_telemetry import InvalidEventError, TelemetryError, Trajectory
from serving.gateway.metadata import extract_metadata


def test_an_editor_names_the_trajectory_the_gateway_gives_the_agents_trace() -> None:
    tracer = TracerProvider().get_tracer("agent")
    with tracer.start_as_current_span("invoke_agent coder") as span:
        carrier: dict[str, str] = {}
        TraceContextTextMapPropagator().inject(carrier)  # what the agent's HTTP client sends
        current = Trajectory.from_current_span(user="dev-1", checkpoint_id="ckpt-7")
    from_header = Trajectory.from_traceparent(carrier["traceparent"], user="dev-1",
                                              checkpoint_id="ckpt-7", arm="canary")
    trace_hex = format(span.get_span_context().trace_id, "032x")
    assert current.trajectory_id == from_header.trajectory_id == trace_hex
    assert current.session_id == trace_hex and from_header.arm == "canary"
    assert extract_metadata(carrier, {}).trajectory_id == trace_hex  # the gateway's view


def test_without_a_trace_it_says_so() -> None:
    with pytest.raises(TelemetryError, match="no OpenTelemetry span is current"):
        Trajectory.from_current_span(user="u", checkpoint_id="c")
    with pytest.raises(InvalidEventError, match="traceparent: not a W3C traceparent"):
        Trajectory.from_traceparent("00-zz", user="u", checkpoint_id="c")
