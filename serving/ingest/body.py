"""Request bodies: decompress within the caps, then split into each event's original bytes.

A body is a JSON array of event objects or NDJSON (one object a line). Splitting keeps each
event's exact bytes, so validation and the dead-letter topic see what the client sent.
"""

from __future__ import annotations

import io
import json
import zlib

import zstandard

from serving.ingest.errors import BadBody, PayloadTooLarge, UnsupportedEncoding
from serving.ingest.limits import Caps

__all__ = ["decompress", "split_events"]

_WHITESPACE = " \t\r\n"
_DECODER = json.JSONDecoder()


def _too_large(max_bytes: int) -> PayloadTooLarge:
    return PayloadTooLarge(
        f"the decompressed body is over the {max_bytes} byte batch cap; send smaller batches"
    )


def _gunzip(body: bytes, max_bytes: int) -> bytes:
    inflater = zlib.decompressobj(wbits=31)
    try:
        out = inflater.decompress(body, max_bytes + 1)
    except zlib.error as exc:
        raise BadBody(f"the body is not valid gzip: {exc}") from None
    if len(out) > max_bytes:
        raise _too_large(max_bytes)
    if not inflater.eof or inflater.unused_data:
        raise BadBody("the gzip body is truncated or has trailing data; send one complete member")
    return out


def _unzstd(body: bytes, max_bytes: int) -> bytes:
    reader = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(body), read_across_frames=True)
    try:
        out = reader.read(max_bytes + 1)
    except zstandard.ZstdError as exc:
        raise BadBody(f"the body is not valid zstd: {exc}") from None
    if len(out) > max_bytes:
        raise _too_large(max_bytes)
    return out


def decompress(body: bytes, content_encoding: str | None, max_bytes: int) -> bytes:
    """The body decoded per its Content-Encoding, refused once it grows past ``max_bytes``."""
    encoding = (content_encoding or "identity").strip().lower()
    if encoding == "identity":
        if len(body) > max_bytes:
            raise _too_large(max_bytes)
        return body
    if encoding in ("gzip", "x-gzip"):
        return _gunzip(body, max_bytes)
    if encoding == "zstd":
        return _unzstd(body, max_bytes)
    raise UnsupportedEncoding(
        f"Content-Encoding {encoding!r} is not supported; use identity, gzip or zstd"
    )


def _skip_ws(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in _WHITESPACE:
        pos += 1
    return pos


def _split_array(text: str, max_events: int) -> list[bytes]:
    events: list[bytes] = []
    pos = _skip_ws(text, 1)
    if pos < len(text) and text[pos] == "]":
        return events
    while True:
        try:
            _, end = _DECODER.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            raise BadBody(f"the JSON array is malformed at element {len(events)}: {exc}") from None
        events.append(text[pos:end].encode())
        if len(events) > max_events:
            raise PayloadTooLarge(f"the batch has over {max_events} events; send smaller batches")
        pos = _skip_ws(text, end)
        if pos < len(text) and text[pos] == "]":
            if _skip_ws(text, pos + 1) != len(text):
                raise BadBody("unexpected data after the closing ']' of the JSON array")
            return events
        if pos >= len(text) or text[pos] != ",":
            raise BadBody(f"expected ',' or ']' after element {len(events) - 1} of the JSON array")
        pos = _skip_ws(text, pos + 1)


def _split_ndjson(data: bytes, max_events: int) -> list[bytes]:
    events = [line for line in data.split(b"\n") if line.strip()]
    if len(events) > max_events:
        raise PayloadTooLarge(f"the batch has {len(events)} events, over the cap of {max_events}")
    return events


def split_events(data: bytes, caps: Caps) -> list[bytes]:
    """Each event's bytes from a decompressed body (JSON array or NDJSON)."""
    head = data.lstrip()
    if not head:
        raise BadBody("the body is empty; send a JSON array or NDJSON of events")
    if head[:1] == b"[":
        try:
            text = head.decode()
        except UnicodeDecodeError as exc:
            raise BadBody(f"the body is not UTF-8: {exc}") from None
        return _split_array(text, caps.max_batch_events)
    if head[:1] == b"{":
        return _split_ndjson(head, caps.max_batch_events)
    raise BadBody("the body must be a JSON array of events or NDJSON (one event object a line)")
