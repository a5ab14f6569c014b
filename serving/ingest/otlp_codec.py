"""OTLP/HTTP bodies: an ``ExportTraceServiceRequest`` from protobuf or OTLP/JSON (identity,
gzip or zstd, within the batch caps), and answers in the encoding the request used.

Parsing builds every message of the request at once, and an empty message costs far more
memory and time than the few bytes it is sent in (measured in
docs/ingest-and-sdks.md#answers-and-limits). So the messages a body holds are counted before it
is parsed: in protobuf by walking the wire format with the official message descriptors (nothing
is built), in JSON by counting the objects and arrays outside strings. OTLP/JSON differs from
protobuf's JSON mapping in one way that matters here: trace and span ids are hex, not base64.
"""

from __future__ import annotations

import base64
from typing import Any

from google.protobuf import json_format
from google.protobuf.descriptor import Descriptor
from google.protobuf.message import DecodeError, Message
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from serving.ingest.body import decompress
from serving.ingest.errors import BadBody, PayloadTooLarge
from serving.ingest.limits import Caps
from serving.jsonscan import load_object, more_containers_than
from serving.request_body import UnsupportedMediaType

__all__ = ["JSON", "PROTOBUF", "decode_request", "encode", "media_type"]

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
# A legitimate export of 512 spans with 20 attributes each holds about 25,000 messages.
# What the two bounds below cost at most, in memory and in time: the docs page above.
MAX_PROTOBUF_MESSAGES = 500_000
MAX_JSON_CONTAINERS = 100_000
MAX_JSON_DEPTH = 64  # each nested attribute value takes three levels
_ID_FIELDS = ("traceId", "spanId", "parentSpanId")


def media_type(content_type: str | None) -> str | None:
    """PROTOBUF or JSON from a Content-Type header, None for anything else."""
    media = (content_type or "").split(";", 1)[0].strip().lower()
    return media if media in (PROTOBUF, JSON) else None


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while shift < 64:
        if pos >= len(data):
            raise ValueError("a varint runs past the end of its message")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7
    raise ValueError("a varint is longer than 10 bytes")


def _more_messages_than(data: bytes, descriptor: Descriptor, limit: int) -> bool:
    """Whether the protobuf ``data`` holds more than ``limit`` messages, counted from the wire
    format (iteratively, nothing built); raises ValueError where the framing is broken."""
    if len(data) // 2 <= limit:
        return False  # a message takes at least two bytes: the answer for every usual export
    count, stack = 1, [(descriptor, 0, len(data))]
    while stack:
        message, pos, end = stack.pop()
        while pos < end:
            key, pos = _varint(data, pos)
            wire_type = key & 7
            if wire_type == 0:
                _, pos = _varint(data, pos)
            elif wire_type in (1, 5):
                pos += 8 if wire_type == 1 else 4
            elif wire_type == 2:
                length, pos = _varint(data, pos)
                field = message.fields_by_number.get(key >> 3)
                if field is not None and field.message_type is not None:
                    count += 1
                    if count > limit:
                        return True
                    stack.append((field.message_type, pos, min(pos + length, end)))
                pos += length
            else:
                raise ValueError(f"wire type {wire_type} does not occur in OTLP")
            if pos > end:
                raise ValueError("a field runs past the end of its message")
    return False


def _from_protobuf(data: bytes) -> ExportTraceServiceRequest:
    try:
        too_many = _more_messages_than(data, ExportTraceServiceRequest.DESCRIPTOR,
                                       MAX_PROTOBUF_MESSAGES)
        if not too_many:
            return ExportTraceServiceRequest.FromString(data)
    except (ValueError, DecodeError) as exc:
        raise BadBody(f"the body is not an OTLP ExportTraceServiceRequest in protobuf: {exc}") \
            from None
    raise PayloadTooLarge(f"the request holds over {MAX_PROTOBUF_MESSAGES} protobuf messages "
                          "(spans, attributes, values); send smaller batches")


def _hex_to_base64(value: Any, path: str) -> Any:
    if not isinstance(value, str):
        return value  # the JSON parser below names the wrong type
    try:
        return base64.b64encode(bytes.fromhex(value)).decode()
    except ValueError:
        raise BadBody(f"{path}: {value[:40]!r} is not hex; OTLP/JSON writes ids as hex") from None


def _ids_as_base64(document: dict[str, Any]) -> None:
    """Rewrite the hex trace and span ids of spans and their links in place, for protobuf's
    JSON parser (which reads bytes as base64); anything of an unexpected shape is left to it."""
    for i, resource_spans in enumerate(_items(document, "resourceSpans")):
        for j, scope_spans in enumerate(_items(resource_spans, "scopeSpans")):
            for k, span in enumerate(_items(scope_spans, "spans")):
                path = f"resourceSpans[{i}].scopeSpans[{j}].spans[{k}]"
                holders = [(path, span)] + [(f"{path}.links[{n}]", link)
                                            for n, link in enumerate(_items(span, "links"))]
                for where, holder in holders:
                    for name in _ID_FIELDS:
                        if name in holder:
                            holder[name] = _hex_to_base64(holder[name], f"{where}.{name}")


def _items(parent: Any, key: str) -> list[Any]:
    items = parent.get(key) if isinstance(parent, dict) else None
    return [item for item in items if isinstance(item, dict)] if isinstance(items, list) else []


def _from_json(data: bytes) -> ExportTraceServiceRequest:
    if more_containers_than(data, MAX_JSON_CONTAINERS):
        raise PayloadTooLarge(f"the request holds over {MAX_JSON_CONTAINERS} JSON objects and "
                              "arrays; send smaller batches, or protobuf")
    document = load_object(data, MAX_JSON_DEPTH)
    _ids_as_base64(document)
    try:
        return json_format.ParseDict(document, ExportTraceServiceRequest(),
                                     ignore_unknown_fields=True)
    except (json_format.ParseError, ValueError, TypeError) as exc:
        raise BadBody(f"the body is not an OTLP ExportTraceServiceRequest in JSON: "
                      f"{str(exc)[:500]}") from None


def decode_request(body: bytes, content_type: str | None, content_encoding: str | None,
                   caps: Caps) -> ExportTraceServiceRequest:
    """The export request a body holds; raises an error with the HTTP status to answer."""
    media = media_type(content_type)
    if media is None:
        raise UnsupportedMediaType(f"Content-Type {(content_type or '')[:100]!r} is not OTLP; "
                                   f"send {PROTOBUF} or {JSON}")
    data = decompress(body, content_encoding, caps)
    request = _from_protobuf(data) if media == PROTOBUF else _from_json(data)
    spans = sum(len(scope.spans) for resource in request.resource_spans
                for scope in resource.scope_spans)
    if spans > caps.max_batch_events:
        raise PayloadTooLarge(f"the request has {spans} spans, over the {caps.max_batch_events} "
                              "cap; send smaller batches")
    return request


def encode(message: Message, media: str) -> bytes:
    """``message`` in the request's encoding: protobuf, or OTLP/JSON (lowerCamelCase keys)."""
    if media == PROTOBUF:
        return message.SerializeToString()
    return json_format.MessageToJson(message, indent=None).encode()
