"""Agent runs as an instrumented team runs them: the official OpenAI instrumentation
(``opentelemetry-instrumentation-openai-v2``, latest GenAI conventions, message content on
spans) and the OTLP/HTTP exporter to ingest, an ``invoke_agent`` span around each run, and the
run's HTTP calls carrying its trace context (``traceparent`` and ``baggage``, through httpx
event hooks: the openai client does not propagate context itself). What each client sent and
was answered is recorded, so a test can check the protocol and the docs' table of features."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx
from opentelemetry import baggage, context, propagate
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from schemas.tracecontext import trajectory_id_of_trace

__all__ = ["AGENT_USER", "AgentRun", "AgentTracing", "Wire", "instrumented"]

AGENT_USER = "dev-1"
LATEST_CONVENTIONS = {"OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental",
                      "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "SPAN_ONLY"}


@dataclass
class Wire:
    """What a client sent (JSON bodies and trace headers) and the statuses it got."""

    bodies: list[dict[str, Any]] = field(default_factory=list)
    traceparents: list[str | None] = field(default_factory=list)
    statuses: list[int] = field(default_factory=list)
    replies: list[dict[str, Any]] = field(default_factory=list)  # the whole (non-SSE) ones

    def _sent(self, request: httpx.Request) -> None:
        propagate.inject(request.headers)  # traceparent and baggage of the current context
        self.traceparents.append(request.headers.get("traceparent"))
        self.bodies.append(json.loads(request.content or b"{}"))

    def _answered(self, response: httpx.Response) -> None:
        self.statuses.append(response.status_code)
        if response.headers.get("content-type", "").startswith("application/json"):
            response.read()
            self.replies.append(response.json())

    async def _answered_async(self, response: httpx.Response) -> None:
        self.statuses.append(response.status_code)
        if response.headers.get("content-type", "").startswith("application/json"):
            await response.aread()
            self.replies.append(response.json())

    def client(self) -> httpx.Client:
        return httpx.Client(timeout=120, event_hooks={"request": [self._sent],
                                                      "response": [self._answered]})

    def async_client(self) -> httpx.AsyncClient:
        async def sent(request: httpx.Request) -> None:
            self._sent(request)

        return httpx.AsyncClient(timeout=120, event_hooks={
            "request": [sent], "response": [self._answered_async]})

    def features(self) -> set[str]:
        """The protocol features these requests used, in the docs table's words."""
        messages = [m for body in self.bodies for m in body.get("messages", [])]
        found = {
            "streamed": any(body.get("stream") for body in self.bodies),
            "tools": any(body.get("tools") for body in self.bodies),
            "tool_choice required": any(body.get("tool_choice") == "required"
                                        for body in self.bodies),
            "role: tool replies": any(m.get("role") == "tool" for m in messages),
            "stop": any(body.get("stop") for body in self.bodies),
            "content parts": any(isinstance(m.get("content"), list) for m in messages),
            "null parameters": any(v is None for body in self.bodies for v in body.values()),
        }
        return {name for name, used in found.items() if used}


@dataclass
class AgentRun:
    trajectory_id: str  # the run's trace id, as the gateway and OTLP ingest name it
    traceparent: str
    wire: Wire


@dataclass
class AgentTracing:
    provider: TracerProvider
    spans: InMemorySpanExporter
    instrumentor: Any

    @contextmanager
    def older_conventions(self) -> Iterator[None]:
        """The instrumentation on the GenAI conventions v1.30 (``gen_ai.system``, messages as
        log events, not on spans), for the duration. The util-genai it runs with reads only the
        latest, whatever ``OTEL_SEMCONV_STABILITY_OPT_IN`` says, so the instrumentation's own
        switch is turned."""
        import opentelemetry.instrumentation.openai_v2 as openai_v2

        latest = openai_v2.is_experimental_mode
        self.instrumentor.uninstrument()
        openai_v2.is_experimental_mode = lambda: False  # type: ignore[attr-defined]
        try:
            self.instrumentor.instrument(tracer_provider=self.provider)
            yield
        finally:
            self.instrumentor.uninstrument()
            openai_v2.is_experimental_mode = latest  # type: ignore[attr-defined]
            self.instrumentor.instrument(tracer_provider=self.provider)

    @contextmanager
    def run(self, agent: str) -> Iterator[AgentRun]:
        """An ``invoke_agent`` span (the baggage naming the user) around one agent run; its
        spans are exported to ingest when the run ends."""
        tracer = self.provider.get_tracer("compat-agent")
        token = context.attach(baggage.set_baggage("user.id", AGENT_USER))
        try:
            with tracer.start_as_current_span(f"invoke_agent {agent}", attributes={
                    "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": agent}) as span:
                carrier: dict[str, str] = {}
                propagate.inject(carrier)
                yield AgentRun(trajectory_id_of_trace(span.get_span_context().trace_id),
                               carrier["traceparent"], Wire())
        finally:
            context.detach(token)
            self.provider.force_flush()


@contextmanager
def instrumented(ingest_url: str, ingest_key: str,
                 environment: dict[str, str] | None = None) -> Iterator[AgentTracing]:
    """The official OpenAI instrumentation on a provider exporting to ``ingest_url``, for the
    duration; ``environment``: the instrumentation's settings (the latest conventions with
    message content on spans by default)."""
    from tests.support.compat_instrumentation import openai_instrumentor

    previous = {name: os.environ.get(name) for name in LATEST_CONVENTIONS}
    os.environ.update(LATEST_CONVENTIONS if environment is None else environment)
    provider = TracerProvider(resource=Resource.create({
        "service.name": "compat-agent", "user.id": AGENT_USER}))
    spans = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(
        endpoint=f"{ingest_url}/v1/traces", headers={"Authorization": f"Bearer {ingest_key}"},
        timeout=60), schedule_delay_millis=200))
    instrumentor = openai_instrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        yield AgentTracing(provider, spans, instrumentor)
    finally:
        instrumentor.uninstrument()
        provider.shutdown()
        for name, value in previous.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
