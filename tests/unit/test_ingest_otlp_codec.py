"""OTLP/HTTP bodies: protobuf and OTLP/JSON decode to the same request; hostile bodies are
refused as a whole with the status that says why, before they are built in memory."""

from __future__ import annotations

import gzip
import json

import pytest
from google.protobuf import json_format
from google.rpc import status_pb2
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from serving.ingest.errors import BadBody, PayloadTooLarge, UnsupportedEncoding
from serving.ingest.limits import Caps
from serving.ingest.otlp_codec import (
    JSON,
    MAX_JSON_CONTAINERS,
    MAX_JSON_DEPTH,
    MAX_PROTOBUF_MESSAGES,
    PROTOBUF,
    decode_request,
    encode,
)
from serving.jsonscan import MalformedJson
from serving.request_body import UnsupportedMediaType
from tests.support.otlp_spans import export, length_delimited, span, tool_span

CAPS = Caps()
TRACE = bytes.fromhex("5b8efff798038103d269b633813fc60c")
ROOT = bytes.fromhex("eee19b7ec3c1b174")
REQUEST = export([tool_span("read_file", trace_id=TRACE, parent=ROOT),
                  span("agent", {"gen_ai.operation.name": "invoke_agent"}, trace_id=TRACE,
                       span_id=ROOT)])


def _otlp_json(request: ExportTraceServiceRequest) -> dict:
    """OTLP/JSON as a client writes it: protobuf's JSON mapping with ids in hex."""
    document = json_format.MessageToDict(request)
    for span_json, span_pb in zip(document["resourceSpans"][0]["scopeSpans"][0]["spans"],
                                  request.resource_spans[0].scope_spans[0].spans, strict=True):
        span_json["traceId"], span_json["spanId"] = span_pb.trace_id.hex(), span_pb.span_id.hex()
        if span_pb.parent_span_id:
            span_json["parentSpanId"] = span_pb.parent_span_id.hex()
    return document


def test_protobuf_and_otlp_json_decode_to_the_same_request() -> None:
    from_protobuf = decode_request(REQUEST.SerializeToString(), PROTOBUF, None, CAPS)
    text = json.dumps(_otlp_json(REQUEST)).encode()
    from_json = decode_request(gzip.compress(text), "application/json; charset=utf-8", "gzip",
                               CAPS)
    assert from_protobuf == REQUEST and from_json == REQUEST


def test_answers_are_in_the_request_encoding() -> None:
    status = status_pb2.Status(code=3, message="bad")
    assert status_pb2.Status.FromString(encode(status, PROTOBUF)) == status
    assert json.loads(encode(status, JSON)) == {"code": 3, "message": "bad"}


def test_ids_that_are_not_hex_name_their_place() -> None:
    document = _otlp_json(REQUEST)
    base64_id = "W47/95gDgQPSabYzgT/GDA=="  # protobuf's JSON mapping, not OTLP's
    document["resourceSpans"][0]["scopeSpans"][0]["spans"][1]["traceId"] = base64_id
    with pytest.raises(BadBody, match=r"spans\[1\]\.traceId: .* is not hex"):
        decode_request(json.dumps(document).encode(), JSON, None, CAPS)


@pytest.mark.parametrize(("body", "content_type", "encoding", "error", "match"), [
    (b"\x0a\xff\xff\xff\xff\x0f", PROTOBUF, None, BadBody, "not an OTLP .* in protobuf"),
    (b"\x0b\x00", PROTOBUF, None, BadBody, "not an OTLP .* in protobuf"),
    (b'{"resourceSpans": 7}', JSON, None, BadBody, "not an OTLP .* in JSON"),
    (b'{"resourceSpans": [}', JSON, None, MalformedJson, "not valid JSON"),
    (b'{"a": 1, "a": 2}', JSON, None, MalformedJson, "twice"),
    (b"[" * (MAX_JSON_DEPTH + 1) + b"]" * (MAX_JSON_DEPTH + 1), JSON, None, MalformedJson,
     "nested deeper"),
    (b"{}", "text/plain", None, UnsupportedMediaType, "not OTLP"),
    (b"{}", None, None, UnsupportedMediaType, "not OTLP"),
    (b"{}", JSON, "br", UnsupportedEncoding, "'br' is not supported"),
    (b"not gzip", JSON, "gzip", BadBody, "not valid gzip"),
])
def test_bodies_that_cannot_be_read_are_refused_saying_why(
        body: bytes, content_type: str | None, encoding: str | None, error: type[Exception],
        match: str) -> None:
    with pytest.raises(error, match=match):
        decode_request(body, content_type, encoding, CAPS)


def test_bodies_of_too_many_messages_are_refused_before_they_are_built() -> None:
    empty_spans = b"\x12\x00" * (MAX_PROTOBUF_MESSAGES + 1)  # 1 MB: ~85 MB once parsed
    body = length_delimited(0x0A, length_delimited(0x12, empty_spans))
    with pytest.raises(PayloadTooLarge, match="protobuf messages"):
        decode_request(body, PROTOBUF, None, CAPS)
    with pytest.raises(BadBody, match="wire type 3 does not occur"):  # counted, then refused
        decode_request(b"\x0b" + bytes(len(body)), PROTOBUF, None, CAPS)
    spans = b",".join([b"{}"] * MAX_JSON_CONTAINERS)
    document = b'{"resourceSpans": [{"scopeSpans": [{"spans": [' + spans + b"]}]}]}"
    with pytest.raises(PayloadTooLarge, match="JSON objects and arrays"):
        decode_request(document, JSON, None, CAPS)
    braces_in_strings = json.dumps({"resourceSpans": [], "x": "{" * 200_000}).encode()
    assert decode_request(braces_in_strings, JSON, None, CAPS) == ExportTraceServiceRequest()


def test_more_spans_than_the_batch_cap_are_refused() -> None:
    spans = [tool_span("ls", trace_id=TRACE, parent=ROOT) for _ in range(4)]
    with pytest.raises(PayloadTooLarge, match="4 spans, over the 3 cap"):
        decode_request(export(spans).SerializeToString(), PROTOBUF, None,
                       Caps(max_batch_events=3))
