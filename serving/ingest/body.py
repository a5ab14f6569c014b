"""Request bodies: decompress within the caps, then split into each event's bytes.

A body is a JSON array of event objects or NDJSON (one object a line). Splitting keeps each
event's exact bytes, so validation and the dead-letter topic see what the client sent. NDJSON
is split at newlines without parsing, so each line is judged alone, however broken; a JSON
array has to be parsed to be split, so an array too deep, not UTF-8 or malformed anywhere is
refused as a whole (400), after its depth was measured without recursing.
"""

from __future__ import annotations

import io
import json
import re
import zlib

import zstandard

from serving.ingest.errors import BadBody, PayloadTooLarge, UnsupportedEncoding
from serving.ingest.limits import Caps
from serving.jsonscan import deeper_than

__all__ = ["decompress", "split_events"]

_WHITESPACE = " \t\r\n"
_DECODER = json.JSONDecoder()
_NOT_WHITESPACE = re.compile(r"[^ \t\r\n]")
_NDJSON_LINE = re.compile(rb"[^\s][^\n]*")  # a line, from its first non-blank character


def _inflate_gzip(body: bytes, limit: int) -> bytes:
    inflater = zlib.decompressobj(wbits=31)
    try:
        out = inflater.decompress(body, limit + 1)
    except zlib.error as exc:
        raise BadBody(f"the body is not valid gzip: {exc}") from None
    if len(out) <= limit and (not inflater.eof or inflater.unused_data):
        raise BadBody("the gzip body is truncated or has trailing data; send one complete member")
    return out


def _inflate_zstd(body: bytes, limit: int) -> bytes:
    reader = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(body), read_across_frames=True)
    try:
        return reader.read(limit + 1)
    except zstandard.ZstdError as exc:
        raise BadBody(f"the body is not valid zstd: {exc}") from None


def decompress(body: bytes, content_encoding: str | None, caps: Caps) -> bytes:
    """The body decoded per its Content-Encoding, refused once it grows past the batch cap or
    past ``max_compression_ratio`` times its compressed size (a decompression bomb). Any body
    may decompress to one event's size, so a single highly repetitive event always gets in."""
    encoding = (content_encoding or "").strip().lower() or "identity"
    if encoding == "identity":
        if len(body) > caps.max_batch_bytes:
            raise PayloadTooLarge(f"the body is over the {caps.max_batch_bytes} byte batch cap; "
                                  "send smaller batches")
        return body
    if encoding not in ("gzip", "x-gzip", "zstd"):
        raise UnsupportedEncoding(
            f"Content-Encoding {encoding!r} is not supported; use identity, gzip or zstd")
    by_ratio = max(caps.max_compression_ratio * len(body), caps.max_event_bytes)
    limit = min(caps.max_batch_bytes, by_ratio)
    out = (_inflate_zstd if encoding == "zstd" else _inflate_gzip)(body, limit)
    if len(out) <= limit:
        return out
    if limit == caps.max_batch_bytes:
        raise PayloadTooLarge(f"the decompressed body is over the {caps.max_batch_bytes} byte "
                              "batch cap; send smaller batches")
    raise PayloadTooLarge(f"the body decompresses to over {caps.max_compression_ratio} times its "
                          f"{len(body)} compressed bytes (the compression ratio cap)")


def _split_array(data: bytes, caps: Caps) -> list[bytes]:
    # Decoding parses each element, and Python's json recurses per level: measure first.
    if deeper_than(data, caps.max_json_depth + 1):
        raise BadBody(f"the JSON array nests deeper than {caps.max_json_depth} levels inside "
                      "an element; no event is that deep")
    try:
        text = data.decode()
    except UnicodeDecodeError as exc:
        raise BadBody(f"the JSON array is not UTF-8 (byte {exc.start}: {exc.reason}); send "
                      "NDJSON to have only the events with bad text rejected") from None
    events: list[bytes] = []
    pos = _skip_ws(text, 1)
    if pos < len(text) and text[pos] == "]":
        return events
    while True:
        try:
            _, end = _DECODER.raw_decode(text, pos)
        except ValueError as exc:  # JSONDecodeError, or an integer of over 4,300 digits
            raise BadBody(f"the JSON array is malformed at element {len(events)}: {exc}") from None
        events.append(text[pos:end].encode())
        if len(events) > caps.max_batch_events:
            raise PayloadTooLarge(f"the batch has over {caps.max_batch_events} events; send "
                                  "smaller batches")
        pos = _skip_ws(text, end)
        if pos < len(text) and text[pos] == "]":
            if text[pos + 1:].strip(_WHITESPACE):
                raise BadBody("unexpected data after the closing ']' of the JSON array")
            return events
        if pos >= len(text) or text[pos] != ",":
            raise BadBody(f"expected ',' or ']' after element {len(events) - 1} of the JSON array")
        pos = _skip_ws(text, pos + 1)


def _skip_ws(text: str, pos: int) -> int:
    found = _NOT_WHITESPACE.search(text, pos)
    return len(text) if found is None else found.start()


def _split_ndjson(data: bytes, max_events: int) -> list[bytes]:
    events: list[bytes] = []
    # A regex rather than data.split(): blank lines are skipped by the regex engine, and a body
    # of millions of tiny lines never becomes a list longer than the cap.
    for line in _NDJSON_LINE.finditer(data):
        events.append(line.group())
        if len(events) > max_events:
            raise PayloadTooLarge(f"the batch has over {max_events} events, the cap; send "
                                  "smaller batches")
    return events


def split_events(data: bytes, caps: Caps) -> list[bytes]:
    """Each event's bytes from a decompressed body (JSON array or NDJSON)."""
    head = data.lstrip(_WHITESPACE.encode())
    if not head:
        raise BadBody("the body is empty; send a JSON array or NDJSON of events")
    if head[:1] == b"[":
        return _split_array(head, caps)
    if head[:1] == b"{":
        return _split_ndjson(head, caps.max_batch_events)
    raise BadBody("the body must be a JSON array of events or NDJSON (one event object a line)")
