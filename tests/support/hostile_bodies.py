"""Hostile requests to the ingest API: batches of hostile events in NDJSON or a JSON array, and
bodies that are bad as a whole (nesting, oversize, compression bombs, encodings, keys, random
bytes). Each request says which statuses it may get and, where the server splits it, what each
of its events must become."""

from __future__ import annotations

import gzip
import json
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import zstandard

from serving.ingest.keys import hash_key
from serving.ingest.limits import Caps
from tests.support.hostile_events import EVENT_CLASSES, Expect, Hostile, HostileEvents

__all__ = ["ALL_TYPES_KEY", "EDITS_ONLY_KEY", "BODY_CLASSES", "Probe", "batch", "key_entries"]

ALL_TYPES_KEY = "rsk_abuse-all-types"
EDITS_ONLY_KEY = "rsk_abuse-edits-only"
MiB = 1 << 20
# Classes whose events Python's json cannot split out of an array (the whole array is a 400).
_NOT_IN_ARRAYS = {"invalid UTF-8", "nesting"}


def key_entries(org_id: str) -> list[dict[str, object]]:
    """The key file of an abuse run: a key for every type (the gateway's completion.served
    included, which no client key may send) and one for edits only, unthrottled."""
    return [{"name": "all", "key_sha256": hash_key(ALL_TYPES_KEY), "org_id": org_id,
             "event_types": ["*", "completion.served"], "rate_per_s": 1e9, "burst": 1e9},
            {"name": "edits", "key_sha256": hash_key(EDITS_ONLY_KEY), "org_id": org_id,
             "event_types": ["edit.proposed", "edit.decided"], "rate_per_s": 1e9, "burst": 1e9}]


@dataclass
class Probe:
    kind: str  # the class of bad input, for the figures
    body: bytes = b""
    chunks: Callable[[], Iterator[bytes]] | None = None  # streamed instead, no Content-Length
    headers: dict[str, str] = field(default_factory=dict)
    key: str | None = ALL_TYPES_KEY  # None: no API key at all
    events: list[Hostile] | None = None  # what the server splits the body into, in order
    statuses: frozenset[int] = frozenset({200, 207})


def _encode(body: bytes, encoding: str) -> bytes:
    if encoding == "gzip":
        return gzip.compress(body, compresslevel=1)
    if encoding == "zstd":
        return zstandard.ZstdCompressor(level=1).compress(body)
    return body


def batch(kind: str, events: list[Hostile], rng: random.Random, array_ok: bool = True) -> Probe:
    """The events as NDJSON or (when Python's json can split them) a JSON array, compressed or
    not."""
    encoding = rng.choice(["identity", "gzip", "zstd"])
    headers = {} if encoding == "identity" else {"Content-Encoding": encoding}
    if array_ok and rng.random() < 0.3:
        body = b"[" + b", ".join(e.raw for e in events) + b"]"
    else:
        body = b"\n".join(e.raw for e in events) + b"\n"
    sent = _encode(body, encoding)
    caps = Caps()
    if encoding != "identity" and \
            len(body) > max(caps.max_compression_ratio * len(sent), caps.max_event_bytes):
        # Hostile events repeat a byte thousands of times: together they make a bomb.
        return Probe(kind, sent, headers=headers, statuses=frozenset({413}))
    return Probe(kind, sent, headers=headers, events=events)


def _mixed(gen: HostileEvents, rng: random.Random) -> Probe:
    names = rng.sample(list(EVENT_CLASSES), rng.randint(1, 4))
    events = [EVENT_CLASSES[name](gen) for name in names for _ in range(rng.randint(1, 3))]
    events += [gen.good_event() for _ in range(rng.randint(1, 6))]
    rng.shuffle(events)
    return batch("mixed good and bad batches", events, rng,
                 array_ok=not _NOT_IN_ARRAYS & set(names) and not _huge_literal(events))


def _huge_literal(events: list[Hostile]) -> bool:
    return any(b"9" * 4301 in e.raw for e in events)  # past Python's integer digits


def _deep_bodies(gen: HostileEvents, rng: random.Random) -> Probe:
    depth = rng.choice([34, 1_000, 100_000])
    choice = rng.randrange(3)
    if choice == 0:
        return Probe("nesting (whole bodies)", b"[" * depth + b"]" * depth,
                     statuses=frozenset({400}))
    if choice == 1:
        return Probe("nesting (whole bodies)", b'[{"a": ' + b"[" * depth + b"]" * depth + b"}]",
                     statuses=frozenset({400}))
    line = Hostile(b"{" * depth, Expect("malformed_json", "(event)"))
    return batch("nesting (whole bodies)", [line, gen.good_event()], rng, array_ok=False)


def _oversize(gen: HostileEvents, rng: random.Random) -> Probe:
    choice = rng.randrange(5)
    if choice == 0:
        event = gen.good()
        event["user"] = "u" * (MiB + 10)
        big = Hostile(json.dumps(event).encode(), Expect("event_too_large"))
        events = [gen.good_event(), big, gen.good_event()]
        # Not compressed: a megabyte of one letter is far over the compression ratio cap.
        return Probe("oversize", b"\n".join(e.raw for e in events), events=events)
    if choice == 1:
        return Probe("oversize", b"{}\n" * 5_001, statuses=frozenset({413}))
    if choice == 2:
        return Probe("oversize", b"[" + b"{}," * 5_000 + b"{}]", statuses=frozenset({413}))
    if choice == 3:
        return Probe("oversize", b"{" * (10 * MiB + 1), statuses=frozenset({413}))

    def stream() -> Iterator[bytes]:
        for _ in range(12):
            yield b" " * MiB
    return Probe("oversize", chunks=stream, statuses=frozenset({413}))


def _bomb(gen: HostileEvents, rng: random.Random) -> Probe:
    good = b"\n".join(gen.good_event().raw for _ in range(3))
    choice = rng.randrange(6)
    encoding = rng.choice(["gzip", "zstd"])
    headers = {"Content-Encoding": encoding}
    if choice == 0:  # a ratio far over the cap
        return Probe("compression bombs", _encode(b" " * (9 * MiB), encoding), headers=headers,
                     statuses=frozenset({413}))
    if choice == 1:  # past the decompressed cap
        return Probe("compression bombs", _encode(b"\n" * (64 * MiB), encoding),
                     headers=headers, statuses=frozenset({413}))
    if choice == 2:
        return Probe("compression bombs", gzip.compress(good)[:-7],
                     headers={"Content-Encoding": "gzip"}, statuses=frozenset({400}))
    if choice == 3:
        return Probe("compression bombs", gzip.compress(good) + b"trailing",
                     headers={"Content-Encoding": "gzip"}, statuses=frozenset({400}))
    if choice == 4:  # says it is compressed, is not
        return Probe("compression bombs", good, headers=headers, statuses=frozenset({400}))
    return Probe("compression bombs", good, statuses=frozenset({415}),
                 headers={"Content-Encoding": rng.choice(["br", "deflate", "gzip, zstd", "x"])})


def _content_type_or_key(gen: HostileEvents, rng: random.Random) -> Probe:
    events = [gen.good_event() for _ in range(rng.randint(1, 3))]
    body = b"\n".join(e.raw for e in events)
    choice = rng.randrange(5)
    if choice == 0:
        content_type = rng.choice(["text/plain", "application/xml", "multipart/form-data",
                                   "image/png", "application/json; charset=latin-1", ";;"])
        return Probe("content types and keys", body, headers={"Content-Type": content_type},
                     events=events)
    if choice == 1:
        return Probe("content types and keys", body, key=None, statuses=frozenset({401}))
    if choice == 2:
        return Probe("content types and keys", body, key="rsk_" + "x" * rng.randint(0, 300),
                     statuses=frozenset({401}))
    if choice == 3:
        return Probe("content types and keys", body, headers={"Content-Encoding": ""},
                     events=events)
    edits, tools = gen.good("edit.decided"), gen.good("tool.called")
    mixed = [Hostile(json.dumps(edits).encode(), Expect()),
             Hostile(json.dumps(tools).encode(), Expect("type_not_allowed", "type"))]
    only_tools = rng.random() < 0.5
    chosen = mixed[1:] if only_tools else mixed
    return Probe("content types and keys", b"\n".join(e.raw for e in chosen), key=EDITS_ONLY_KEY,
                 events=chosen, statuses=frozenset({403} if only_tools else {207}))


def _random_bytes(gen: HostileEvents, rng: random.Random) -> Probe:
    size = rng.choice([0, 1, 2, 16, 300, 3000])
    body = bytes(rng.getrandbits(8) for _ in range(size))
    if rng.random() < 0.5:
        body = rng.choice([b"{", b"[", b"\n{"]) + body
    encoding = rng.choice(["identity", "gzip", "zstd"])
    lie = rng.random() < 0.3
    headers = {} if encoding == "identity" else {"Content-Encoding": encoding}
    return Probe("random bytes", body if lie else _encode(body, encoding), headers=headers,
                 statuses=frozenset({200, 207, 400, 415}))


BODY_CLASSES: dict[str, tuple[int, Callable[[HostileEvents, random.Random], Probe]]] = {
    # name: (requests, builder)
    "mixed good and bad batches": (1500, _mixed),
    "nesting (whole bodies)": (150, _deep_bodies),
    "oversize": (25, _oversize),
    "compression bombs": (120, _bomb),
    "content types and keys": (800, _content_type_or_key),
    "random bytes": (700, _random_bytes),
}
