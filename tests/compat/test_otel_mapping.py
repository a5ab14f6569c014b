"""The docs' table of spans to events (docs/ingest-and-sdks.md) is what happens, row for row:
each row's spans are made in a trace of their own, the model calls by the official OpenAI
instrumentation (latest conventions with messages on spans, and the older v1.30 ones) calling
the gateway, the rest with the OpenTelemetry SDK; all are exported to ingest with the OTLP/HTTP
exporter, and each trace's events on ``events.raw`` are compared with its row."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import openai
import pytest
from opentelemetry.trace import Tracer

from tests.support.compat_agent_model import TASK, TIME, TOOLS
from tests.support.compat_agent_runs import Wire
from tests.support.compat_stack import CompatStack
from tests.support.service_keys import GATEWAY_KEY

pytestmark = [pytest.mark.kafka, pytest.mark.slow, pytest.mark.timeout(900)]

DOCS = Path(__file__).resolve().parents[2] / "docs" / "ingest-and-sdks.md"
_EVENT_TYPES = ("trajectory.ended", "tool.called")
AGENT = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "mapper"}


def documented_rows() -> dict[str, list[str]]:
    """The first table under "Spans to events": {span column: the event types it names}."""
    text = DOCS.read_text()
    section = text[text.index("### Spans to events"):]
    table = section[section.index("\n| span |"):].strip().split("\n\n")[0]
    rows = {}
    for line in table.splitlines()[2:]:
        span, event = (cell.strip() for cell in line.strip("|").split("|")[:2])
        rows[span] = [t for t in re.findall(r"`([a-z_.]+)`", event) if t in _EVENT_TYPES]
    return rows


def _ask(stack: CompatStack, messages: list[dict[str, Any]], tools: bool = True) -> None:
    """A chat call through the gateway under the current trace (the instrumentation's span)."""
    client = openai.OpenAI(base_url=stack.gateway_url, api_key=GATEWAY_KEY, max_retries=0,
                           http_client=Wire().client())
    client.chat.completions.create(model="rewardstream", messages=messages, max_tokens=60,
                                   temperature=0, **({"tools": TOOLS} if tools else {}))


def _producers(stack: CompatStack) -> dict[str, Callable[[Tracer], None]]:
    """How this test makes each documented row's spans (inside a plain root span, which makes
    no event itself, unless the row is about roots)."""
    weather = [{"role": "user", "content": TASK}]

    def older_conventions(tracer: Tracer) -> None:
        with stack.tracing.older_conventions():
            _ask(stack, weather)
        _ask(stack, [*weather, {"role": "tool", "content": TIME}], tools=False)  # a text reply

    return {
        "`invoke_agent` that is its trace's local root": lambda tracer: tracer.start_span(
            "invoke_agent mapper", attributes=AGENT).end(),
        "any span with `rewardstream.trajectory.outcome`": lambda tracer: tracer.start_span(
            "give up", attributes={"rewardstream.trajectory.outcome": "aborted"}).end(),
        "`execute_tool`": lambda tracer: tracer.start_span("execute_tool get_weather", attributes={
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "get_weather"}).end(),
        "a model call (`chat`": lambda tracer: _ask(stack, weather),
        "a model call without tool-call parts": older_conventions,
        "`invoke_agent` below its trace's root": lambda tracer: tracer.start_span(
            "invoke_agent helper", attributes=AGENT).end(),
        "any other span": lambda tracer: tracer.start_span(
            "GET /health", attributes={"http.route": "/health"}).end(),
    }


def test_the_docs_mapping_table_is_what_the_official_instrumentation_produces(
        compat_stack: CompatStack) -> None:
    tracer = compat_stack.tracing.provider.get_tracer("compat-mapping")
    documented = documented_rows()
    traces: dict[str, str] = {}
    for start, produce in _producers(compat_stack).items():
        [row] = [span for span in documented if span.startswith(start)]
        if start.endswith("local root"):
            produce(tracer)  # the root itself
            trace_id = compat_stack.tracing.spans.get_finished_spans()[-1].context.trace_id
        else:
            with tracer.start_as_current_span(f"row {len(traces)}") as root:
                produce(tracer)
            trace_id = root.get_span_context().trace_id
        traces[row] = format(trace_id, "032x")
    # Ingest answers an export once Kafka has its events: after the flush they are all there.
    compat_stack.tracing.provider.force_flush()
    assert set(traces) == set(documented)  # every row is produced
    for row, trajectory_id in traces.items():
        events = compat_stack.events(trajectory_id, 0)
        from_spans = [e["type"] for e in events if e["producer"].startswith("ingest:")]
        assert from_spans == documented[row], row
    chat_spans = [s for s in compat_stack.tracing.spans.get_finished_spans()
                  if s.attributes.get("gen_ai.operation.name") == "chat"]
    # Both generations of the conventions were produced by the instrumentation itself.
    assert any("gen_ai.system" in s.attributes and "gen_ai.provider.name" not in s.attributes
               for s in chat_spans)
    assert any("gen_ai.provider.name" in s.attributes
               and "gen_ai.output.messages" in s.attributes for s in chat_spans)
