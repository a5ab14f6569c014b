"""OTLP spans built directly from opentelemetry-proto messages, with every field under the
test's control (ids, parents, flags, times), for the unit, integration and abuse tests."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span, Status

__all__ = ["RESOURCE", "attributes", "export", "length_delimited", "span", "tool_span",
           "unix_ns"]

RESOURCE = {"service.name": "editor-agent", "user.id": "user-42", "session.id": "session-1",
            "rewardstream.checkpoint_id": "ckpt-7"}


def unix_ns(when: datetime | None = None) -> int:
    since_1970 = (when or datetime.now(UTC)) - datetime(1970, 1, 1, tzinfo=UTC)
    return since_1970 // timedelta(microseconds=1) * 1000


def _value(value: Any) -> AnyValue:
    if isinstance(value, bool):
        return AnyValue(bool_value=value)
    if isinstance(value, int):
        return AnyValue(int_value=value)
    if isinstance(value, float):
        return AnyValue(double_value=value)
    if isinstance(value, bytes):
        return AnyValue(bytes_value=value)
    if isinstance(value, AnyValue):
        return value
    return AnyValue(string_value=str(value))


def attributes(values: Mapping[str, Any]) -> list[KeyValue]:
    return [KeyValue(key=key, value=_value(value)) for key, value in values.items()]


def span(name: str, values: Mapping[str, Any], *, trace_id: bytes, parent: bytes = b"",
         span_id: bytes | None = None, duration_ms: float = 40.0, end_ns: int | None = None,
         error: bool = False, events: Iterable[tuple[str, Mapping[str, Any]]] = (),
         flags: int = 0) -> Span:
    end = end_ns if end_ns is not None else unix_ns()
    return Span(
        trace_id=trace_id, span_id=span_id or os.urandom(8), parent_span_id=parent, name=name,
        kind=Span.SPAN_KIND_INTERNAL, start_time_unix_nano=max(0, end - int(duration_ms * 1e6)),
        end_time_unix_nano=end, attributes=attributes(values), flags=flags,
        events=[Span.Event(name=n, time_unix_nano=end, attributes=attributes(a))
                for n, a in events],
        status=Status(code=Status.STATUS_CODE_ERROR if error else Status.STATUS_CODE_OK))


def tool_span(tool: str, *, trace_id: bytes, parent: bytes, **kwargs: Any) -> Span:
    values = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool,
              **kwargs.pop("values", {})}
    return span(f"execute_tool {tool}", values, trace_id=trace_id, parent=parent, **kwargs)


def export(spans: Sequence[Span],
           resource: Mapping[str, Any] = RESOURCE) -> ExportTraceServiceRequest:
    return ExportTraceServiceRequest(resource_spans=[ResourceSpans(
        resource=Resource(attributes=attributes(resource)),
        scope_spans=[ScopeSpans(spans=list(spans))])])


def length_delimited(tag: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field framed by hand, to frame what protobuf would not."""
    length, prefix = len(payload), bytearray([tag])
    while length >= 0x80:
        prefix.append(length & 0x7F | 0x80)
        length >>= 7
    return bytes(prefix) + bytes([length]) + payload
