"""OTLP spans to platform events, after the OpenTelemetry GenAI semantic conventions: pure.

Which span becomes which event:

- a tool execution span (``gen_ai.operation.name`` = ``execute_tool``) → ``tool.called``: ``tool``
  from ``gen_ai.tool.name``, ``call_id`` from ``gen_ai.tool.call.id`` (else the span id),
  ``duration_ms`` from the span's start and end. The call is invalid when the span's status is
  ERROR, it has an ``error.type`` attribute or an ``exception`` span event; ``error_kind`` is
  ``error.type`` (else the exception event's ``exception.type``) when that is one of the
  platform's kinds (``timeout``, ``bad_arguments`` ...), ``timeout`` when it names a timeout,
  and ``tool_error`` otherwise.
- a span that ends its trajectory → ``trajectory.ended``: a root span (no parent, or a remote
  one) with a ``gen_ai.operation.name`` when the trajectory is the trace, and in any mode a span
  with ``rewardstream.trajectory.outcome``. ``outcome`` is that attribute, else ``error`` for
  an ERROR status and ``completed`` otherwise; ``turns`` and ``task_family`` are
  ``rewardstream.trajectory.turns`` (else 0: spans of one trace may arrive in different
  exports, so they cannot be counted) and ``rewardstream.trajectory.task_family``.
- model calls (``chat``, ``text_completion``, ``generate_content``, ``embeddings``) become no
  event, counted as ignored: ``completion.served`` carries the token ids and behaviour
  logprobs the trainer corrects against, and only the gateway that sampled them writes it. A
  span has neither, and no client key may make one. Other spans are ignored likewise.

The envelope, read from the span's attributes, then its resource's: ``trajectory_id`` is the
trace id (32 hex digits) or the configured attribute (e.g. ``gen_ai.conversation.id``);
``session_id`` is ``session.id``, else ``gen_ai.conversation.id``, else the trajectory;
``user`` is ``user.id``, else ``enduser.id`` (required: ingest pseudonymises it);
``checkpoint_id`` is ``rewardstream.checkpoint_id``, else ``gen_ai.response.model``, else
``gen_ai.request.model``, else ``unknown``; ``arm`` is ``rewardstream.arm``. ``occurred_at`` is
the span's end; OTLP carries no send time, so ``sent_at`` is the time ingest received it and the
event time is the span's, within the same window checks as every event. The event id is a
UUIDv7 of the span's end, its other bits a hash of org, trace id, span id and event type: a
retried export gets the same ids and is answered as a duplicate.

Every event made here is then judged like a posted event; ``sources`` names the attribute or
span field each of its fields came from, so a rejection can name what to fix in the span.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import math
from collections import ChainMap, Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, get_args
from uuid import UUID

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span, SpanFlags, Status

from schemas.bounds import EARLIEST_TIME, LATEST_TIME
from schemas.events import TOOL_CALLED, TRAJECTORY_ENDED, ToolErrorKind

__all__ = ["MappedEvent", "RequestMapping", "SpanProblem", "SpanRef", "map_request"]

log = logging.getLogger(__name__)

OPERATION = "gen_ai.operation.name"
TOOL_NAME, TOOL_CALL_ID, ERROR_TYPE = "gen_ai.tool.name", "gen_ai.tool.call.id", "error.type"
OUTCOME = "rewardstream.trajectory.outcome"
TURNS = "rewardstream.trajectory.turns"
TASK_FAMILY = "rewardstream.trajectory.task_family"
_MODEL_CALLS = frozenset({"chat", "text_completion", "generate_content", "embeddings"})
_ERROR_KINDS = frozenset(get_args(ToolErrorKind))
# Envelope fields: the attributes read for each, in order of preference.
_ENVELOPE = {
    "session_id": ("session.id", "gen_ai.conversation.id"),
    "user": ("user.id", "enduser.id"),
    "checkpoint_id": ("rewardstream.checkpoint_id", "gen_ai.response.model",
                      "gen_ai.request.model"),
    "arm": ("rewardstream.arm",),
}
_WANTED = frozenset({OPERATION, TOOL_NAME, TOOL_CALL_ID, ERROR_TYPE, OUTCOME, TURNS, TASK_FAMILY,
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


def _scalar(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind in ("string_value", "bool_value", "int_value"):
        return getattr(value, kind)
    if kind == "double_value":  # JSON has no NaN: a non-finite number is refused as a string
        return value.double_value if math.isfinite(value.double_value) else str(value.double_value)
    if kind == "bytes_value":
        return base64.b64encode(value.bytes_value).decode()
    if kind == "array_value":  # no field takes one: a short stand-in the schema refuses
        return {"arrayValue": len(value.array_value.values)}
    if kind == "kvlist_value":
        return {"kvlistValue": len(value.kvlist_value.values)}
    return None


def _attributes(pairs: Iterable[KeyValue], wanted: frozenset[str]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for pair in pairs:  # a key given twice: the first counts
        if pair.key in wanted and pair.key not in found:
            found[pair.key] = _scalar(pair.value)
    return found


def _event_id(unix_ms: int, *parts: bytes) -> UUID:
    """A UUIDv7 at ``unix_ms`` whose other bits are a hash of ``parts``: the same span gives the
    same id in every export of it."""
    raw = bytearray(hashlib.sha256(b"\x00".join(parts)).digest()[:16])
    raw[0:6] = unix_ms.to_bytes(6, "big")
    raw[6] = 0x70 | raw[6] & 0x0F  # version 7
    raw[8] = 0x80 | raw[8] & 0x3F  # RFC 9562 variant
    return UUID(bytes=bytes(raw))


def _iso(unix_ns: int) -> str:
    return (_EPOCH + timedelta(microseconds=unix_ns // 1000)).isoformat()


def _error_kind(error_type: Any) -> str:
    if isinstance(error_type, str):
        if error_type in _ERROR_KINDS:
            return error_type
        if "timeout" in error_type.lower():
            return "timeout"
    return "tool_error"


def _tool_called(span: Span, attrs: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    exceptions = [_attributes(e.attributes, frozenset({"exception.type"}))
                  for e in span.events if e.name == "exception"]
    failed = span.status.code == Status.STATUS_CODE_ERROR or ERROR_TYPE in attrs or exceptions
    payload: dict[str, Any] = {
        "call_id": attrs.get(TOOL_CALL_ID, span.span_id.hex()),
        "valid": not failed,
        "duration_ms": (span.end_time_unix_nano - span.start_time_unix_nano) / 1e6,
    }
    if TOOL_NAME in attrs:
        payload["tool"] = attrs[TOOL_NAME]
    if failed:
        error_type = attrs.get(ERROR_TYPE) or next(
            (e["exception.type"] for e in exceptions if "exception.type" in e), None)
        payload["error_kind"] = _error_kind(error_type)
    sources = {"payload.tool": TOOL_NAME, "payload.error_kind": ERROR_TYPE,
               "payload.call_id": TOOL_CALL_ID if TOOL_CALL_ID in attrs else "spanId",
               "payload.duration_ms": "startTimeUnixNano"}
    return payload, sources


def _trajectory_ended(span: Span,
                      attrs: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    failed = span.status.code == Status.STATUS_CODE_ERROR
    payload: dict[str, Any] = {"outcome": attrs.get(OUTCOME, "error" if failed else "completed"),
               "turns": attrs.get(TURNS, 0)}
    if TASK_FAMILY in attrs:
        payload["task_family"] = attrs[TASK_FAMILY]
    sources = {"payload.outcome": OUTCOME, "payload.turns": TURNS,
               "payload.task_family": TASK_FAMILY}
    return payload, sources


_PAYLOADS = {TOOL_CALLED: _tool_called, TRAJECTORY_ENDED: _trajectory_ended}


def _is_local_root(span: Span) -> bool:
    if not span.parent_span_id:
        return True
    return bool(span.flags & _REMOTE_KNOWN and span.flags & _REMOTE)


def _event_types(span: Span, attrs: Mapping[str, Any], by_trace: bool) -> list[str]:
    operation = attrs.get(OPERATION)
    types = [TOOL_CALLED] if operation == "execute_tool" else []
    if OUTCOME in attrs or (by_trace and operation is not None and _is_local_root(span)):
        types.append(TRAJECTORY_ENDED)
    return types


def _ignored_reason(attrs: Mapping[str, Any]) -> str:
    operation = attrs.get(OPERATION)
    if operation is None:
        return "not_genai"
    return "model_call" if operation in _MODEL_CALLS else "operation_not_mapped"


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
        envelope["trajectory_id"], sources["trajectory_id"] = span.trace_id.hex(), "traceId"
    else:
        sources["trajectory_id"] = trajectory_attribute
        if trajectory_attribute in values:
            envelope["trajectory_id"] = values[trajectory_attribute]
    for name, attributes in _ENVELOPE.items():
        source = next((a for a in attributes if a in values), None)
        sources[name] = source or attributes[0]
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


def _map_span(span: Span, resource: dict[str, Any], index: int, export: _Export,
              out: RequestMapping) -> None:
    attrs = _attributes(span.attributes, export.wanted)
    types = _event_types(span, attrs, by_trace=export.trajectory_attribute is None)
    if not types:
        out.ignored[_ignored_reason(attrs)] += 1
        return
    unusable = _unusable(span)
    if unusable is not None:
        out.problems.append(SpanProblem(index, "schema_violation", *unusable,
                                        span.SerializeToString()))
        return
    envelope, sources = _envelope(span, ChainMap(attrs, resource), export.trajectory_attribute,
                                  export.received_at)
    for event_type in types:
        payload, payload_sources = _PAYLOADS[event_type](span, attrs)
        event_id = _event_id(span.end_time_unix_nano // 10**6, export.org_id.encode(),
                             span.trace_id, span.span_id, event_type.encode())
        event = {"event_id": str(event_id), "type": event_type, **envelope, "payload": payload}
        raw = json.dumps(event, ensure_ascii=False, allow_nan=False).encode()
        out.events.append(MappedEvent(index, raw, {**sources, **payload_sources}))


def map_request(request: ExportTraceServiceRequest, org_id: str,
                trajectory_attribute: str | None, received_at: datetime) -> RequestMapping:
    """The events an export request's spans make, the spans that cannot make theirs, and the
    count of spans ignored by reason."""
    wanted = _WANTED | {trajectory_attribute} if trajectory_attribute else _WANTED
    export = _Export(org_id, trajectory_attribute, received_at, wanted)
    out = RequestMapping()
    for resource_spans in request.resource_spans:
        resource = _attributes(resource_spans.resource.attributes, wanted)
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
