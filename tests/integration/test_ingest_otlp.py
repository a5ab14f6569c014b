"""OTLP/HTTP ingest on the real broker, fed by the official OpenTelemetry SDK and its OTLP HTTP
exporter: spans sent → events on events.raw, retries answered as duplicates, partial success
with dead letters, refusals as google.rpc.Status, and a broker outage the exporter rides out
on 503 with Retry-After."""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import httpx
import pytest
from google.protobuf import json_format
from google.rpc import status_pb2
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SimpleSpanProcessor,
    SpanExportResult,
)
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode

from infra import broker
from infra.settings import Settings
from tests.support.ingest_support import (
    EDIT_ONLY_KEY,
    TEST_KEY,
    ingest_config,
    read_topic,
    running_server,
)
from tests.support.metrics import metric
from tests.support.otlp_spans import RESOURCE, export, span, tool_span
from tests.support.waits import wait_for

pytestmark = pytest.mark.kafka

TOOLS_PER_RUN = 2


def _exporter(url: str, key: str = TEST_KEY, timeout_s: float = 30) -> OTLPSpanExporter:
    return OTLPSpanExporter(endpoint=f"{url}/v1/traces", headers={"Authorization": f"Bearer {key}"},
                            compression=Compression.Gzip, timeout=timeout_s)


@contextmanager
def _tracing(exporter: OTLPSpanExporter | None) -> Iterator[tuple[Any, InMemorySpanExporter]]:
    """A tracer whose spans go to ``exporter`` in batches (when given) and to memory."""
    provider = TracerProvider(resource=Resource.create(RESOURCE))
    memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    if exporter is not None:
        provider.add_span_processor(BatchSpanProcessor(exporter, max_export_batch_size=32,
                                                       schedule_delay_millis=200))
    try:
        yield provider.get_tracer("coding-agent"), memory
    finally:
        provider.shutdown()


def _agent_runs(tracer: Any, runs: int) -> None:
    """Each run: an invoke_agent root, and per turn a chat call and a tool call; every third
    run's last tool call times out."""
    for run in range(runs):
        with tracer.start_as_current_span("invoke_agent coder", attributes={
                "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "coder"}):
            for turn in range(TOOLS_PER_RUN):
                with tracer.start_as_current_span("chat rewardstream", attributes={
                        "gen_ai.operation.name": "chat", "gen_ai.request.model": "rewardstream",
                        "gen_ai.usage.input_tokens": 120, "gen_ai.usage.output_tokens": 24}):
                    pass
                with tracer.start_as_current_span("execute_tool read_file", attributes={
                        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "read_file",
                        "gen_ai.tool.call.id": f"call-{run}-{turn}"}) as tool:
                    if run % 3 == 0 and turn == TOOLS_PER_RUN - 1:
                        tool.record_exception(TimeoutError("the tool took too long"))
                        tool.set_status(Status(StatusCode.ERROR))


def _raw(settings: Settings) -> list[dict[str, Any]]:
    return [json.loads(r.value) for r in read_topic(settings, "events.raw")]


def test_spans_from_the_official_exporter_become_events_once(
        kafka: Settings, report_figures: Callable[[str], None]) -> None:
    runs = 30
    with running_server(kafka) as server:
        with _tracing(_exporter(server.url)) as (tracer, memory):
            _agent_runs(tracer, runs)
        spans: Sequence[ReadableSpan] = memory.get_finished_spans()
        events = _raw(kafka)
        again = _exporter(server.url).export(spans)  # a retried export: every span again
        duplicates = metric(server.url, "rewardstream_ingest_events_duplicate_total")
        requests = metric(server.url, "rewardstream_ingest_otlp_requests_total", status="200")
    report_figures(f"OTLP: {len(spans)} spans sent in {requests - 1:.0f} exports → {len(events)} "
              f"events on events.raw ({dict(Counter(e['type'] for e in events))}); the same "
              f"spans again → {duplicates:.0f} duplicates, {len(_raw(kafka)) - len(events)} new")
    assert len(spans) == runs * (1 + 2 * TOOLS_PER_RUN)
    types = Counter(e["type"] for e in events)
    assert types == {"tool.called": runs * TOOLS_PER_RUN, "trajectory.ended": runs}
    assert len({e["event_id"] for e in events}) == len(events)
    traces = {format(s.context.trace_id, "032x") for s in spans}
    assert {e["trajectory_id"] for e in events} == traces
    assert all(e["org_id"] == "org-test" and e["user"].startswith("u_") for e in events)
    assert {(e["session_id"], e["checkpoint_id"]) for e in events} == {("session-1", "ckpt-7")}
    broken = [e["payload"] for e in events if e["type"] == "tool.called"
              and not e["payload"]["valid"]]
    assert len(broken) == len(range(0, runs, 3))
    assert {p["error_kind"] for p in broken} == {"timeout"}
    assert {e["payload"]["outcome"] for e in events if e["type"] == "trajectory.ended"} == \
        {"completed"}
    tool_spans = {s.attributes["gen_ai.tool.call.id"]: s for s in spans
                  if s.attributes.get("gen_ai.operation.name") == "execute_tool"}
    for event in (e for e in events if e["type"] == "tool.called"):
        source = tool_spans[event["payload"]["call_id"]]
        assert event["payload"]["duration_ms"] == pytest.approx(
            (source.end_time - source.start_time) / 1e6)
    assert again == SpanExportResult.SUCCESS
    assert duplicates == len(events) and len(_raw(kafka)) == len(events)


def _otlp_json(spans: Sequence[Any]) -> bytes:
    """OTLP/JSON as clients write it: protobuf's JSON mapping, with the ids in hex."""
    document = json_format.MessageToDict(export(spans, RESOURCE))
    for span_json, source in zip(document["resourceSpans"][0]["scopeSpans"][0]["spans"], spans,
                                 strict=True):
        span_json.update(traceId=source.trace_id.hex(), spanId=source.span_id.hex(),
                         parentSpanId=source.parent_span_id.hex())
    return json.dumps(document).encode()


def test_otlp_json_gets_partial_success_and_dead_letters_name_the_attribute(
        kafka: Settings) -> None:
    trace, parent = bytes.fromhex("4bf92f3577b34da6a3ce929d0e0e4736"), bytes.fromhex(
        "00f067aa0ba902b7")
    spans = [tool_span("grep", trace_id=trace, parent=parent),
             tool_span("g" * 65, trace_id=trace, parent=parent),
             span("chat", {"gen_ai.operation.name": "chat"}, trace_id=trace, parent=parent)]
    headers = {"Content-Type": "application/json"}
    with running_server(kafka) as server:
        answer = httpx.post(f"{server.url}/v1/traces", content=_otlp_json(spans), timeout=30,
                            headers={**headers, "Authorization": f"Bearer {TEST_KEY}"})
        edits_only = httpx.post(f"{server.url}/v1/traces", content=_otlp_json(spans[::2]),
                                timeout=30,
                                headers={**headers, "Authorization": f"Bearer {EDIT_ONLY_KEY}"})
        anonymous = httpx.post(f"{server.url}/v1/traces", content=b"",
                               headers={"Content-Type": "application/x-protobuf"}, timeout=30)
    assert answer.status_code == 200, answer.text
    partial = answer.json()["partialSuccess"]
    assert partial["rejectedSpans"] == "1"
    assert "gen_ai.tool.name: String should have at most 64 characters" in \
        partial["errorMessage"] and "1 model calls" in partial["errorMessage"]
    assert [e["payload"]["tool"] for e in _raw(kafka)] == ["grep"]
    assert edits_only.status_code == 403 and edits_only.json()["code"] == 7  # PERMISSION_DENIED
    assert "may not send 'tool.called' events" in edits_only.json()["message"]
    assert anonymous.status_code == 401
    assert status_pb2.Status.FromString(anonymous.content).code == 16  # UNAUTHENTICATED
    dead = [{k: v.decode() for k, v in r.headers} for r in read_topic(kafka, "events.deadletter")]
    assert [(d["kind"], d["field"]) for d in dead] == [
        ("schema_violation", "gen_ai.tool.name"), ("type_not_allowed", "type")]


@pytest.mark.slow
def test_the_exporter_rides_out_a_broker_outage_on_503_and_retry_after(
        outage_broker: Settings) -> None:
    config = ingest_config(ack_timeout_s=1.5, unavailable_retry_after_s=4)
    with running_server(outage_broker, config) as server:
        with _tracing(None) as (tracer, memory):
            _agent_runs(tracer, 6)
        spans = memory.get_finished_spans()
        exporter = _exporter(server.url, timeout_s=120)
        assert exporter.export(spans[:15]) == SpanExportResult.SUCCESS
        broker.stop(outage_broker)
        result: list[SpanExportResult] = []
        sender = threading.Thread(target=lambda: result.append(exporter.export(spans[15:])))
        sender.start()
        wait_for(lambda: metric(server.url, "rewardstream_ingest_otlp_requests_total",
                                status="503"), 60, "a 503 while the broker is down", 0.5)
        broker.start(outage_broker)
        sender.join(timeout=120)
    assert result == [SpanExportResult.SUCCESS]
    events = _raw(outage_broker)
    assert Counter(e["type"] for e in events) == {"tool.called": 12, "trajectory.ended": 6}
    assert len({e["event_id"] for e in events}) == len(events)  # each exactly once
