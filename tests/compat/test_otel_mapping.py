"""The docs' table of spans to events (docs/ingest-and-sdks.md) is what happens, row for row and
field by field: each row's spans are made in a trace of their own, the model calls by the
official OpenAI instrumentation (latest conventions with messages on spans, and the older v1.30
ones) calling the gateway, the rest with the OpenTelemetry SDK; all are exported to ingest with
the OTLP/HTTP exporter, and each trace's events on ``events.raw`` are compared with its row.

The fields column is read as rules, ``field`` ← source, else source ...: a source is an
attribute (a backticked dotted name, read from the span), a backticked literal (optionally
"for ..."/"when ..." a condition), or a phrase; the first that applies gives the value, and a
field none applies to is absent. Phrases and conditions are checked by the functions named by
their exact words below (``_PHRASES``, ``_CONDITIONS``), so a rule the test cannot read fails,
quoting it, rather than passing unchecked.

A row that makes no event is believed only once a later span of its trace (a sentinel tool
call, exported after the row's spans) has made its event: the exporter sends one export at a
time and ingest answers each once Kafka has its events, so nothing of the row can still come.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, get_args

import openai
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import Status, StatusCode, Tracer

from schemas.events import ToolErrorKind
from tests.support.compat_agent_model import TASK, TIME, TOOLS
from tests.support.compat_agent_runs import Wire
from tests.support.compat_stack import CompatStack
from tests.support.service_keys import GATEWAY_KEY
from tests.support.waits import wait_for

pytestmark = [pytest.mark.kafka, pytest.mark.slow, pytest.mark.timeout(900)]

DOCS = Path(__file__).resolve().parents[2] / "docs" / "ingest-and-sdks.md"
_EVENT_TYPES = ("trajectory.ended", "tool.called")
AGENT = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "mapper"}
TOOL = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "get_weather"}
SENTINEL = "execute_tool sentinel"


@dataclass(frozen=True)
class Row:
    events: list[str]  # the event types it names
    per_part: bool  # one event per tool-call part of the span's output messages
    rules: dict[str, str] = field(default_factory=dict)  # payload field -> its sources, as written


def _top_level_split(text: str, sep: str) -> list[str]:
    """``text`` split at ``sep`` outside parentheses."""
    parts, depth, start, i = [], 0, 0, 0
    while i < len(text):
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        if depth == 0 and text.startswith(sep, i):
            parts.append(text[start:i])
            start = i = i + len(sep)
            continue
        i += 1
    return [*parts, text[start:]]


def documented_rows() -> dict[str, Row]:
    """The first table under "Spans to events": {span column: its row}."""
    text = DOCS.read_text()
    section = text[text.index("### Spans to events"):]
    table = section[section.index("\n| span |"):].strip().split("\n\n")[0]
    rows: dict[str, Row] = {}
    previous: dict[str, str] = {}
    for line in table.splitlines()[2:]:
        span, event, fields = (cell.strip() for cell in line.strip().strip("|").split("|"))
        rules: dict[str, str] = {}
        if fields == "as above":
            rules = dict(previous)
        elif fields != "—":
            for clause in _top_level_split(fields, "; "):
                names, arrow, sources = clause.partition(" ← ")
                assert arrow, f"not a `field` ← source rule: {clause!r}"
                for name in re.findall(r"`([a-z_]+)`", names):
                    rules[name] = sources
        previous = rules
        rows[span] = Row([t for t in re.findall(r"`([a-z_.]+)`", event) if t in _EVENT_TYPES],
                         "per part" in event, rules)
    return rows


@dataclass(frozen=True)
class _Made:
    """What one event was made from: the span, and for a model call the tool-call part."""

    span: ReadableSpan
    part: dict[str, Any] | None = None
    n: int = 0
    gateway_verdicts: dict[str, dict[str, Any]] = field(default_factory=dict)  # broken calls

    @property
    def attributes(self) -> dict[str, Any]:
        return dict(self.span.attributes or {})


def _failed(made: _Made) -> bool:
    return (made.span.status.status_code == StatusCode.ERROR
            or "error.type" in made.attributes
            or any(e.name == "exception" for e in made.span.events))


def _error_kind(made: _Made) -> str | None:
    if not _failed(made):
        return None
    named = made.attributes.get("error.type") or next(
        (e.attributes.get("exception.type") for e in made.span.events
         if e.name == "exception" and e.attributes and "exception.type" in e.attributes), None)
    if named in get_args(ToolErrorKind):
        return str(named)
    return "timeout" if named and "timeout" in str(named).lower() else "tool_error"


def _call_id(made: _Made) -> str:
    return f"{made.attributes['gen_ai.response.id']}-t{made.n}"


def _gateway_verdict(made: _Made, name: str) -> Any:
    # The gateway writes each broken call it served as a tool.called; a sound one it does not.
    return made.gateway_verdicts.get(_call_id(made), {"valid": True}).get(name)


_PHRASES: dict[str, Callable[[_Made, str], Any]] = {
    "the span id": lambda made, _: format(made.span.context.span_id, "016x"),
    "end − start": lambda made, _: (made.span.end_time - made.span.start_time) / 1e6,
    "the part's `name`": lambda made, _: made.part["name"] if made.part else None,
    "`<gen_ai.response.id>-t<n>`, as the gateway names calls": lambda made, _: _call_id(made),
    "when the call failed, `error.type` (else `exception.type`) when it is a platform kind "
    "(`bad_arguments`, `timeout` …), `timeout` when it names one, else `tool_error`":
        lambda made, _: _error_kind(made),
    "as the gateway judges the call (below)": _gateway_verdict,
}
_CONDITIONS: dict[str, Callable[[_Made], bool]] = {
    "for an ERROR status": lambda made: made.span.status.status_code == StatusCode.ERROR,
    "when the call failed (an ERROR status, an `error.type` or an `exception` span event)":
        _failed,
}


def _literal(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def documented_value(name: str, sources: str, made: _Made) -> Any:
    """What the rule ``sources`` gives the field ``name`` of the event ``made`` made; None for
    a field the rule leaves absent."""
    if sources in _PHRASES:
        return _PHRASES[sources](made, name)
    for source in _top_level_split(sources, ", else "):
        if source in _PHRASES:
            value = _PHRASES[source](made, name)
            if value is not None:
                return value
            continue
        found = re.fullmatch(r"`([^`]+)`(?: (.+))?", source)
        assert found, f"the test cannot read {name}'s rule {sources!r} (at {source!r})"
        token, condition = found.groups()
        if condition is not None:
            assert condition in _CONDITIONS, f"the test cannot read the condition {condition!r}"
            if not _CONDITIONS[condition](made):
                continue
        elif "." in token and not re.fullmatch(r"[\d.]+", token):  # an attribute
            if token in made.attributes:
                return made.attributes[token]
            continue
        return _literal(token)
    return None


def _ask(stack: CompatStack, messages: list[dict[str, Any]], tools: bool = True) -> None:
    """A chat call through the gateway under the current trace (the instrumentation's span)."""
    client = openai.OpenAI(base_url=stack.gateway_url, api_key=GATEWAY_KEY, max_retries=0,
                           http_client=Wire().client())
    client.chat.completions.create(model="rewardstream", messages=messages, max_tokens=60,
                                   temperature=0, **({"tools": TOOLS} if tools else {}))


def _failing_tools(tracer: Tracer) -> None:
    """A sound call (no call id: the span's id), one whose error.type names a timeout, one
    with an exception event."""
    tracer.start_span("execute_tool get_weather", attributes=TOOL).end()
    timed_out = tracer.start_span("execute_tool get_weather", attributes={
        **TOOL, "gen_ai.tool.call.id": "call-timed-out", "error.type": "ReadTimeoutError"})
    timed_out.set_status(Status(StatusCode.ERROR))
    timed_out.end()
    raised = tracer.start_span("execute_tool get_weather", attributes={
        **TOOL, "gen_ai.tool.call.id": "call-raised"})
    raised.record_exception(ValueError("no such city"))
    raised.end()


def _explicit_end(tracer: Tracer) -> None:
    span = tracer.start_span("give up", attributes={"rewardstream.trajectory.outcome": "aborted"})
    span.set_status(Status(StatusCode.ERROR))  # the attribute wins over the status
    span.end()


def _producers(stack: CompatStack) -> dict[str, Callable[[Tracer], None]]:
    """How this test makes each documented row's spans (inside a plain root span, which makes
    no event itself, unless the row is about roots)."""
    weather = [{"role": "user", "content": TASK}]

    def older_conventions(tracer: Tracer) -> None:
        with stack.tracing.older_conventions():
            _ask(stack, weather)
        _ask(stack, [*weather, {"role": "tool", "content": TIME}], tools=False)  # a text reply

    return {
        "`invoke_agent` that is its trace's local root": lambda tracer: None,  # the root itself
        "any span with `rewardstream.trajectory.outcome`": _explicit_end,
        "`execute_tool`": _failing_tools,
        "a model call (`chat`": lambda tracer: _ask(stack, weather),
        "a model call without tool-call parts": older_conventions,
        "`invoke_agent` below its trace's root": lambda tracer: tracer.start_span(
            "invoke_agent helper", attributes=AGENT).end(),
        "any other span": lambda tracer: tracer.start_span(
            "GET /health", attributes={"http.route": "/health"}).end(),
    }


def _sentinel(tracer: Tracer, n: int, context: Any = None) -> str:
    """A tool span ending after the row's spans, so exported after them; its call id."""
    call_id = f"sentinel-{n}"
    tracer.start_span(SENTINEL, context, attributes={
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "sentinel",
        "gen_ai.tool.call.id": call_id}).end()
    return call_id


def _produce_row(tracer: Tracer, start: str, produce: Callable[[Tracer], None],
                 n: int) -> tuple[int, str]:
    """Make one row's spans in a trace of their own: its trace id and its sentinel's call id."""
    if start.endswith("local root"):
        root = tracer.start_span("invoke_agent mapper", attributes={
            **AGENT, "rewardstream.trajectory.turns": 3,
            "rewardstream.trajectory.task_family": "mapping"})
        root.end()
        return root.get_span_context().trace_id, _sentinel(
            tracer, n, trace.set_span_in_context(root))
    with tracer.start_as_current_span(f"row {n}") as root:
        produce(tracer)
        return root.get_span_context().trace_id, _sentinel(tracer, n)


def _made(row: Row, spans: list[ReadableSpan], events: list[dict[str, Any]]) -> list[_Made]:
    """What each of the row's events must have been made from."""
    made = []
    broken = {e["payload"]["call_id"]: e["payload"] for e in events
              if e["type"] == "tool.called" and not e["producer"].startswith("ingest:")}
    for span in spans:
        if not row.per_part:
            made.append(_Made(span))
            continue
        messages = json.loads(str((span.attributes or {}).get("gen_ai.output.messages", "[]")))
        parts = [p for m in messages for p in m.get("parts", []) if p.get("type") == "tool_call"]
        made += [_Made(span, part, n, broken) for n, part in enumerate(parts)]
    return made


def _fields(payload: dict[str, Any], rules: dict[str, str]) -> dict[str, Any]:
    return {name: payload[name] for name in rules if payload.get(name) is not None}


def test_the_docs_mapping_table_is_what_the_official_instrumentation_produces(
        compat_stack: CompatStack) -> None:
    tracer = compat_stack.tracing.provider.get_tracer("compat-mapping")
    documented = documented_rows()
    traces: dict[str, tuple[int, str]] = {}
    for start, produce in _producers(compat_stack).items():
        [row] = [span for span in documented if span.startswith(start)]
        traces[row] = _produce_row(tracer, start, produce, len(traces))
    compat_stack.tracing.provider.force_flush()
    assert set(traces) == set(documented)  # every row is produced
    finished = compat_stack.tracing.spans.get_finished_spans()
    for name, (trace_id, sentinel) in traces.items():
        row, trajectory_id = documented[name], format(trace_id, "032x")

        def arrived(trajectory_id: str = trajectory_id, sentinel: str = sentinel) -> Any:
            events = compat_stack.events(trajectory_id, 0, timeout_s=0)
            return events if any(e["payload"].get("call_id") == sentinel for e in events) \
                else None

        events = wait_for(arrived, 60, f"the sentinel span of the row {name!r}", interval_s=0.5)
        from_spans = [e for e in events if e["producer"].startswith("ingest:")
                      and e["payload"].get("call_id") != sentinel]
        assert sorted({e["type"] for e in from_spans}) == sorted(row.events), name
        spans = [s for s in finished if s.context.trace_id == trace_id
                 and s.name != SENTINEL and not s.name.startswith("row ")]
        expected = [{field_name: value for field_name, sources in row.rules.items()
                     if (value := documented_value(field_name, sources, made)) is not None}
                    for made in _made(row, spans, events)] if row.events else []
        got = [_fields(e["payload"], row.rules) for e in from_spans]
        key = lambda payload: json.dumps(payload, sort_keys=True)  # noqa: E731
        assert sorted(got, key=key) == sorted(expected, key=key), name
    chat_spans = [s for s in finished if s.attributes.get("gen_ai.operation.name") == "chat"]
    # Both generations of the conventions were produced by the instrumentation itself.
    assert any("gen_ai.system" in s.attributes and "gen_ai.provider.name" not in s.attributes
               for s in chat_spans)
    assert any("gen_ai.provider.name" in s.attributes
               and "gen_ai.output.messages" in s.attributes for s in chat_spans)

