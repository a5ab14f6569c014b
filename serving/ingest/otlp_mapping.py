"""OTLP spans to platform events, after the OpenTelemetry GenAI semantic conventions: pure.

Both generations of the conventions are read: the provider as ``gen_ai.provider.name`` (the
latest) or ``gen_ai.system`` (v1.30 and before), the messages as ``gen_ai.output.messages`` on
the span (the latest; older versions logged them as separate events, which carry no span).
Which span becomes which event:

- a tool execution span (``gen_ai.operation.name`` = ``execute_tool``) → ``tool.called``: ``tool``
  from ``gen_ai.tool.name``, ``call_id`` from ``gen_ai.tool.call.id`` (else the span id),
  ``duration_ms`` from the span's start and end. The call is invalid when the span's status is
  ERROR, it has an ``error.type`` attribute or an ``exception`` span event; ``error_kind`` is
  ``error.type`` (else the exception event's ``exception.type``) when that is one of the
  platform's kinds (``timeout``, ``bad_arguments`` ...), ``timeout`` when it names a timeout,
  and ``tool_error`` otherwise.
- a model call (``chat``, ``text_completion``, ``generate_content``, ``embeddings``, or a span
  with a provider and no operation) → one ``tool.called`` per tool-call part of its
  ``gen_ai.output.messages``, valid or broken as the gateway judges it
  (``serving.ingest.otlp_calls``), and nothing else: ``completion.served`` carries the token ids
  and behaviour logprobs the trainer corrects against, and only the gateway that sampled them
  writes it. A span has neither, and no client key may make one. A model call without
  tool-call parts is counted as ignored, as are spans of other operations.
- the end of a trajectory → ``trajectory.ended``: the agent's span (``invoke_agent``) that is
  its trace's local root (no parent, or a remote one) when the trajectory is the trace, and in
  any mode a span with ``rewardstream.trajectory.outcome`` (an explicit end). Never a model
  call: an agent makes many. ``outcome`` is that attribute, else ``error`` for an ERROR status
  and ``completed`` otherwise; ``turns`` and ``task_family`` are
  ``rewardstream.trajectory.turns`` (else 0: spans of one trace may arrive in different
  exports, so they cannot be counted) and ``rewardstream.trajectory.task_family`` (else the
  schema's ``default``).

The envelope, read from the span's attributes, then its resource's: ``trajectory_id`` is the
trace id (32 hex digits, the form the gateway gives a request's ``traceparent``) or the
configured attribute (e.g. ``gen_ai.conversation.id``); ``session_id`` is ``session.id``, else
``gen_ai.conversation.id``, else the trajectory; ``user`` is ``user.id``, else ``enduser.id``,
else the API key's ``default_user``, else the span is refused saying so (ingest pseudonymises
every user); ``checkpoint_id`` is ``rewardstream.checkpoint_id``, else
``gen_ai.response.model``, else ``gen_ai.request.model``, else ``unknown``; ``arm`` is
``rewardstream.arm``. ``occurred_at`` is the span's end; OTLP carries no send time, so
``sent_at`` is the time ingest received it and the event time is the span's, within the same
window checks as every event. The event id is a UUIDv7 of the span's end, its other bits a hash
of org, trace id, span id and event type (a call's: of org and call, ``call_event_id``): a
retried export gets the same ids and is answered as a duplicate.

Every event made here is then judged like a posted event; ``sources`` names the attribute or
span field each of its fields came from, so a rejection can name what to fix in the span.
"""

from __future__ import annotations

import json
import logging
from collections import ChainMap, Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span, SpanFlags

from schemas.bounds import EARLIEST_TIME, LATEST_TIME, TOOL_NAME_MAX_CHARS
from schemas.events import TOOL_CALLED, TRAJECTORY_ENDED
from schemas.ids import call_event_id, derived_uuid7
from schemas.tracecontext import trajectory_id_of_trace
from serving.ingest.otlp_attributes import (
    AGENT,
    ERROR_TYPE,
    OPERATION,
    OUTCOME,
    PROVIDERS,
    RESPONSE_ID,
    TASK_FAMILY,
    TOOL_CALL_ID,
    TOOL_NAME,
    TURNS,
    attributes,
    tool_called,
    trajectory_ended,
)
from serving.ingest.otlp_calls import (
    OUTPUT_MESSAGES,
    TOOL_DEFINITIONS,
    TooManyCalls,
    judged_calls,
)

__all__ = ["MappedEvent", "RequestMapping", "SpanProblem", "SpanRef", "map_request"]

log = logging.getLogger(__name__)

_MODEL_CALLS = frozenset({"chat", "text_completion", "generate_content", "embeddings"})
# Envelope fields: the attributes read for each, in order of preference.
_ENVELOPE = {
    "session_id": ("session.id", "gen_ai.conversation.id"),
    "user": ("user.id", "enduser.id"),
    "checkpoint_id": ("rewardstream.checkpoint_id", "gen_ai.response.model",
                      "gen_ai.request.model"),
    "arm": ("rewardstream.arm",),
}
_WANTED = frozenset({OPERATION, TOOL_NAME, TOOL_CALL_ID, ERROR_TYPE, OUTCOME, TURNS, TASK_FAMILY,
                     RESPONSE_ID, OUTPUT_MESSAGES, TOOL_DEFINITIONS, *PROVIDERS,
                     *(name for names in _ENVELOPE.values() for name in names)})
_EARLIEST_NS = int(EARLIEST_TIME.timestamp()) * 10**9
_LATEST_NS = int(LATEST_TIME.timestamp()) * 10**9
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_REMOTE_KNOWN = SpanFlags.SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK
_REMOTE = SpanFlags.SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK


@dataclass(frozen=True, slots=True)
class SpanRef:
    """Which span of the request an answer is about (ids in hex, name clipped)."""

    trace_id: str
    span_id: str
    name: str


@dataclass(frozen=True, slots=True)
class MappedEvent:
    span: int  # index into RequestMapping.spans
    raw: bytes  # the event's JSON, judged like any posted event
    sources: Mapping[str, str]  # event field -> the span attribute or field it came from


@dataclass(frozen=True, slots=True)
class SpanProblem:
    """A span that should have become events but cannot: its ids or times are unusable."""

    span: int
    kind: str  # a verdicts.REJECTION_KINDS value
    field: str | None
    reason: str
    original: bytes  # the span as protobuf, for the dead-letter topic


@dataclass
class RequestMapping:
    spans: list[SpanRef] = field(default_factory=list)
    events: list[MappedEvent] = field(default_factory=list)
    problems: list[SpanProblem] = field(default_factory=list)
    ignored: Counter[str] = field(default_factory=Counter)  # reason -> spans


def _iso(unix_ns: int) -> str:
    return (_EPOCH + timedelta(microseconds=unix_ns // 1000)).isoformat()


@dataclass(frozen=True, slots=True)
class _Made:
    """An event a span makes, before its envelope."""

    type: str
    payload: dict[str, Any]
    sources: dict[str, str]
    event_id: UUID


def _is_local_root(span: Span) -> bool:
    if not span.parent_span_id:
        return True
    return bool(span.flags & _REMOTE_KNOWN and span.flags & _REMOTE)


def _is_model_call(attrs: Mapping[str, Any]) -> bool:
    operation = attrs.get(OPERATION)
    return operation in _MODEL_CALLS or (operation is None and any(p in attrs for p in PROVIDERS))


def _span_event_id(span: Span, org_id: str, event_type: str) -> UUID:
    return derived_uuid7(span.end_time_unix_nano // 10**6, org_id.encode(), span.trace_id,
                         span.span_id, event_type.encode())


def _calls_reported(span: Span, attrs: Mapping[str, Any], org_id: str) -> list[_Made]:
    """The tool calls a model span's output messages hold, judged (``otlp_calls``)."""
    completion_id = str(attrs.get(RESPONSE_ID) or span.span_id.hex())
    made = []
    for call in judged_calls(attrs, completion_id):
        payload: dict[str, Any] = {"call_id": call.call_id,
                                   "tool": call.tool[:TOOL_NAME_MAX_CHARS],
                                   "valid": call.broken is None}
        if call.broken is not None:
            payload["error_kind"] = call.broken.error_kind
        sources = {"payload.tool": OUTPUT_MESSAGES, "payload.call_id": RESPONSE_ID}
        made.append(_Made(TOOL_CALLED, payload, sources, call_event_id(
            org_id, call.call_id, completion_id, span.end_time_unix_nano // 10**6)))
    return made


def _events_made(span: Span, attrs: Mapping[str, Any], org_id: str,
                 by_trace: bool) -> list[_Made]:
    operation = attrs.get(OPERATION)
    made = []
    if operation == "execute_tool":
        made.append(_Made(TOOL_CALLED, *tool_called(span, attrs),
                          _span_event_id(span, org_id, TOOL_CALLED)))
    if _is_model_call(attrs):
        made += _calls_reported(span, attrs, org_id)
    if OUTCOME in attrs or (by_trace and operation == AGENT and _is_local_root(span)):
        made.append(_Made(TRAJECTORY_ENDED, *trajectory_ended(span, attrs),
                          _span_event_id(span, org_id, TRAJECTORY_ENDED)))
    return made


def _ignored_reason(attrs: Mapping[str, Any]) -> str:
    if _is_model_call(attrs):
        return "model_call"
    return "not_genai" if attrs.get(OPERATION) is None else "operation_not_mapped"


def _unusable(span: Span) -> tuple[str, str] | None:
    """The span field that keeps it from becoming an event, and why; None when none does."""
    if len(span.trace_id) != 16 or not any(span.trace_id):
        return "traceId", "traceId: must be 16 bytes (32 hex digits in JSON), not all zero"
    if len(span.span_id) != 8 or not any(span.span_id):
        return "spanId", "spanId: must be 8 bytes (16 hex digits in JSON), not all zero"
    if not _EARLIEST_NS <= span.end_time_unix_nano < _LATEST_NS:
        return "endTimeUnixNano", (f"endTimeUnixNano: {span.end_time_unix_nano} is not a time "
                                   "from 2000 to 2100 in nanoseconds since 1970")
    return None


def _envelope(span: Span, values: Mapping[str, Any], trajectory_attribute: str | None,
              received_at: datetime) -> tuple[dict[str, Any], dict[str, str]]:
    envelope: dict[str, Any] = {
        "occurred_at": _iso(span.end_time_unix_nano), "sent_at": received_at.isoformat()}
    sources = {"occurred_at": "endTimeUnixNano"}
    if trajectory_attribute is None:
        envelope["trajectory_id"] = trajectory_id_of_trace(span.trace_id)
        sources["trajectory_id"] = "traceId"
    else:
        sources["trajectory_id"] = trajectory_attribute
        if trajectory_attribute in values:
            envelope["trajectory_id"] = values[trajectory_attribute]
    for name, names in _ENVELOPE.items():
        source = next((a for a in names if a in values), None)
        sources[name] = source or names[0]
        if source is not None:
            envelope[name] = values[source]
    if "session_id" not in envelope and "trajectory_id" in envelope:
        envelope["session_id"], sources["session_id"] = (envelope["trajectory_id"],
                                                         sources["trajectory_id"])
    envelope.setdefault("checkpoint_id", "unknown")
    return envelope, sources


@dataclass(frozen=True, slots=True)
class _Export:
    """What every span of one export request is mapped with."""

    org_id: str
    trajectory_attribute: str | None
    received_at: datetime
    wanted: frozenset[str]  # the attributes read
    default_user: str | None  # the API key's, for spans that name no user


def _no_user(index: int, span: Span) -> SpanProblem:
    return SpanProblem(
        index, "schema_violation", "user.id",
        "user.id: the span and its resource name no user (user.id, else enduser.id) and the "
        "API key has no default_user; set user.id on the resource (or give the key a default "
        "user: keys create --default-user)", span.SerializeToString())


def _map_span(span: Span, resource: dict[str, Any], index: int, export: _Export,
              out: RequestMapping) -> None:
    attrs = attributes(span.attributes, export.wanted)
    try:
        made = _events_made(span, attrs, export.org_id, export.trajectory_attribute is None)
    except TooManyCalls as exc:
        out.problems.append(SpanProblem(index, "schema_violation", OUTPUT_MESSAGES, str(exc),
                                        span.SerializeToString()))
        return
    if not made:
        out.ignored[_ignored_reason(attrs)] += 1
        return
    unusable = _unusable(span)
    if unusable is not None:
        out.problems.append(SpanProblem(index, "schema_violation", *unusable,
                                        span.SerializeToString()))
        return
    envelope, sources = _envelope(span, ChainMap(attrs, resource), export.trajectory_attribute,
                                  export.received_at)
    if "user" not in envelope:
        if export.default_user is None:
            out.problems.append(_no_user(index, span))
            return
        envelope["user"], sources["user"] = export.default_user, "the API key's default_user"
    for event in made:
        raw = json.dumps({"event_id": str(event.event_id), "type": event.type, **envelope,
                          "payload": event.payload}, ensure_ascii=False, allow_nan=False).encode()
        out.events.append(MappedEvent(index, raw, {**sources, **event.sources}))


def map_request(request: ExportTraceServiceRequest, org_id: str,
                trajectory_attribute: str | None, received_at: datetime,
                default_user: str | None = None) -> RequestMapping:
    """The events an export request's spans make, the spans that cannot make theirs, and the
    count of spans ignored by reason; ``default_user`` is the API key's."""
    wanted = _WANTED | {trajectory_attribute} if trajectory_attribute else _WANTED
    export = _Export(org_id, trajectory_attribute, received_at, wanted, default_user)
    out = RequestMapping()
    for resource_spans in request.resource_spans:
        resource = attributes(resource_spans.resource.attributes, wanted)
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                index = len(out.spans)
                out.spans.append(SpanRef(span.trace_id[:16].hex(), span.span_id[:8].hex(),
                                         span.name[:128]))
                try:
                    _map_span(span, resource, index, export, out)
                except Exception as exc:  # a bug here must cost this span, not the request
                    log.exception("ingest could not map span %d of an OTLP export", index)
                    out.problems.append(SpanProblem(
                        index, "unprocessable", None,
                        f"ingest could not map this span ({type(exc).__name__}); it is kept on "
                        "the dead-letter topic", span.SerializeToString()))
    return out
