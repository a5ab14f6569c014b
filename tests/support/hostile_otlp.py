"""Hostile OTLP/HTTP requests to ``POST /v1/traces``, one generator per class. Each says which
statuses it may get and, where it is exact, how many events its spans make and how many spans
must be rejected (every mapped span here is a tool span: one event each)."""

from __future__ import annotations

import gzip
import json
import os
import random
from collections.abc import Callable
from dataclasses import dataclass, field

from google.protobuf import json_format

from tests.support.hostile_bodies import ALL_TYPES_KEY, EDITS_ONLY_KEY
from tests.support.otlp_spans import export, span, tool_span
from tests.support.otlp_spans import length_delimited as framed

__all__ = ["OTLP_CLASSES", "OtlpProbe"]

PROTOBUF, JSON = "application/x-protobuf", "application/json"
MiB = 1 << 20


@dataclass
class OtlpProbe:
    kind: str
    body: bytes
    headers: dict[str, str] = field(default_factory=lambda: {"Content-Type": PROTOBUF})
    key: str | None = ALL_TYPES_KEY
    statuses: frozenset[int] = frozenset({200})
    events: int | None = 0  # events the spans make and ingest must accept (None: unknown)
    rejected_spans: int | None = 0


def _request_of(span_bytes: list[bytes]) -> bytes:
    scope = b"".join(framed(0x12, s) for s in span_bytes)  # ScopeSpans.spans
    resource = export([]).resource_spans[0].resource.SerializeToString()
    return framed(0x0A, framed(0x0A, resource) + framed(0x12, scope))  # resource_spans


def _good(rng: random.Random, n: int | None = None) -> list:
    trace, parent = os.urandom(16), os.urandom(8)
    return [tool_span(rng.choice(["read_file", "grep", "edit_file"]), trace_id=trace,
                      parent=parent) for _ in range(rng.randint(1, 4) if n is None else n)]


def _protobuf(kind: str, spans: list, **kwargs: object) -> OtlpProbe:
    return OtlpProbe(kind, export(spans).SerializeToString(), **kwargs)  # type: ignore[arg-type]


def good_spans(rng: random.Random) -> OtlpProbe:
    spans = _good(rng)
    chat = span("chat", {"gen_ai.operation.name": "chat"}, trace_id=os.urandom(16),
                parent=os.urandom(8))
    return _protobuf("good spans (protobuf)", spans + [chat], events=len(spans))


def good_json(rng: random.Random) -> OtlpProbe:
    spans = _good(rng)
    document = json_format.MessageToDict(export(spans))
    for span_json, source in zip(document["resourceSpans"][0]["scopeSpans"][0]["spans"], spans,
                                 strict=True):
        span_json.update(traceId=source.trace_id.hex(), spanId=source.span_id.hex(),
                         parentSpanId=source.parent_span_id.hex())
    body = gzip.compress(json.dumps(document).encode())
    return OtlpProbe("good spans (JSON, gzip)", body, {"Content-Type": JSON,
                                                       "Content-Encoding": "gzip"},
                     events=len(spans))


def huge_read_attribute(rng: random.Random) -> OtlpProbe:
    size = rng.choice([65, 64 * 1024, MiB + 1, 4 * MiB])
    huge = tool_span("t" * size, trace_id=os.urandom(16), parent=os.urandom(8))
    good = _good(rng)
    return _protobuf("huge gen_ai.tool.name", good + [huge], events=len(good), rejected_spans=1)


def huge_unread_attribute(rng: random.Random) -> OtlpProbe:
    [with_content] = _good(rng, 1)
    with_content.attributes.add(key="gen_ai.input.messages").value.string_value = \
        "x" * rng.choice([MiB, 3 * MiB])
    return _protobuf("huge attribute no event reads", [with_content], events=1)


def many_attributes(rng: random.Random) -> OtlpProbe:
    [crowded] = _good(rng, 1)
    for i in range(rng.randint(5_000, 40_000)):
        crowded.attributes.add(key=f"k{i}").value.int_value = i
    return _protobuf("tens of thousands of attributes", [crowded], events=1)


def deep_protobuf(rng: random.Random) -> OtlpProbe:
    depth = rng.choice([60, 500, 20_000])
    inner = b""
    for _ in range(depth):  # AnyValue.array_value.values[0], nested
        inner = framed(0x2A, framed(0x0A, inner))
    [carrier] = _good(rng, 1)
    deep = carrier.SerializeToString() + framed(0x4A, framed(0x0A, b"deep") + framed(0x12, inner))
    return OtlpProbe("deeply nested protobuf values", _request_of([deep]),
                     statuses=frozenset({400}))


def deep_json(rng: random.Random) -> OtlpProbe:
    depth = rng.choice([25, 300, 50_000])
    value = '{"stringValue": "x"}'
    value = '{"arrayValue": {"values": [' * depth + value + "]}}" * depth
    body = ('{"resourceSpans": [{"scopeSpans": [{"spans": [{"attributes": [{"key": "deep", '
            f'"value": {value}}}]}}]}}]}}]}}').encode()
    return OtlpProbe("deeply nested JSON values", body, {"Content-Type": JSON},  # 413: too many
                     statuses=frozenset({400, 413}))  # objects is found first at 50,000 levels


def malformed_protobuf(rng: random.Random) -> OtlpProbe:
    """Broken framing around spans that make no event, so that whatever a parser makes of it
    adds nothing to the log."""
    plain = export([span("GET /", {"http.route": "/"}, trace_id=os.urandom(16))])
    valid = plain.SerializeToString()
    body = rng.choice([
        valid + b"\x0a\xff\xff\xff\x7f",  # a field longer than the body
        b"\x0b" + valid,  # a group: no such wire type in OTLP
        b"\x0a" + b"\xff" * 11,  # a varint that never ends
        valid[:rng.randint(1, len(valid) - 1)],  # cut off
        os.urandom(rng.randint(1, 4096)),  # may even parse, as unknown fields
    ])
    return OtlpProbe("malformed protobuf", body, statuses=frozenset({200, 400}))


def invalid_utf8(rng: random.Random) -> OtlpProbe:
    [carrier] = _good(rng, 1)
    name = framed(0x2A, b"execute_tool \xff\xfe")  # Span.name is a string: protobuf refuses it
    return OtlpProbe("invalid UTF-8 in a string", _request_of([carrier.SerializeToString()
                                                                + name]),
                     statuses=frozenset({400}))


def unusable_ids_and_times(rng: random.Random) -> OtlpProbe:
    bad = rng.choice([
        tool_span("ls", trace_id=os.urandom(3), parent=os.urandom(8)),
        tool_span("ls", trace_id=bytes(16), parent=os.urandom(8)),
        tool_span("ls", trace_id=os.urandom(16), parent=os.urandom(8), end_ns=0),
        tool_span("ls", trace_id=os.urandom(16), parent=os.urandom(8), end_ns=2**64 - 1),
        tool_span("ls", trace_id=os.urandom(16), parent=os.urandom(8), duration_ms=-1e12),
    ])
    good = _good(rng)
    return _protobuf("unusable ids and times", good + [bad], events=len(good), rejected_spans=1)


def bad_json_ids(rng: random.Random) -> OtlpProbe:
    body = json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [{
        "traceId": rng.choice(["zz", "W47/95gDgQPSabYzgT/GDA==", "12345"]),
        "spanId": "00f067aa0ba902b7"}]}]}]}).encode()
    return OtlpProbe("ids that are not hex (JSON)", body, {"Content-Type": JSON},
                     statuses=frozenset({400}))


def message_bomb(rng: random.Random) -> OtlpProbe:
    empty_spans = b"\x12\x00" * rng.choice([600_000, 2_000_000])
    body = framed(0x0A, framed(0x12, empty_spans))
    if rng.random() < 0.5:
        return OtlpProbe("a million empty spans (gzip)", gzip.compress(body),
                         {"Content-Type": PROTOBUF, "Content-Encoding": "gzip"},
                         statuses=frozenset({413}))
    return OtlpProbe("a million empty spans", body, statuses=frozenset({413}))


def json_bomb(rng: random.Random) -> OtlpProbe:
    spans = b",".join([b"{}"] * rng.choice([150_000, 1_000_000]))
    body = b'{"resourceSpans": [{"scopeSpans": [{"spans": [' + spans + b"]}]}]}"
    return OtlpProbe("a million empty JSON objects", body, {"Content-Type": JSON},
                     statuses=frozenset({413}))


def refused_whole(rng: random.Random) -> OtlpProbe:
    body = export(_good(rng)).SerializeToString()
    kind, headers, key, status = rng.choice([
        ("no API key", {"Content-Type": PROTOBUF}, None, 401),
        ("unknown API key", {"Content-Type": PROTOBUF}, "rsk_nobody", 401),
        ("not an OTLP Content-Type", {"Content-Type": "text/plain"}, ALL_TYPES_KEY, 415),
        ("unknown Content-Encoding", {"Content-Type": PROTOBUF, "Content-Encoding": "br"},
         ALL_TYPES_KEY, 415),
        ("broken gzip", {"Content-Type": PROTOBUF, "Content-Encoding": "gzip"}, ALL_TYPES_KEY,
         400),
    ])
    return OtlpProbe(kind, body, headers, key, frozenset({status}))


def type_not_allowed(rng: random.Random) -> OtlpProbe:
    spans = _good(rng)
    return _protobuf("a key that may not send tool.called", spans, key=EDITS_ONLY_KEY,
                     statuses=frozenset({403}), rejected_spans=len(spans))


def hostile_strings(rng: random.Random) -> OtlpProbe:
    name = rng.choice(["\u202eelif_daer", "read\u0000file", "🛠️" * 16, "' OR 1=1 --", "\ufeff"])
    spans = [tool_span(name, trace_id=os.urandom(16), parent=os.urandom(8),
                       values={"gen_ai.tool.call.id": name, "user.id": name})]
    if "\u0000" in name:  # a control character in an id: the span goes to the dead letters
        return _protobuf("hostile strings", spans, events=0, rejected_spans=1)
    return _protobuf("hostile strings", spans, events=1)


# class -> (requests, generator)
OTLP_CLASSES: dict[str, tuple[int, Callable[[random.Random], OtlpProbe]]] = {
    "good spans": (60, good_spans), "good JSON": (40, good_json),
    "huge read attribute": (40, huge_read_attribute),
    "huge unread attribute": (20, huge_unread_attribute),
    "many attributes": (20, many_attributes), "deep protobuf": (30, deep_protobuf),
    "deep JSON": (30, deep_json), "malformed protobuf": (60, malformed_protobuf),
    "invalid UTF-8": (20, invalid_utf8), "unusable ids and times": (50, unusable_ids_and_times),
    "bad JSON ids": (20, bad_json_ids), "message bomb": (8, message_bomb),
    "JSON bomb": (8, json_bomb), "refused whole": (50, refused_whole),
    "type not allowed": (30, type_not_allowed), "hostile strings": (40, hostile_strings),
}
