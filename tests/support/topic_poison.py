"""Poisoned topics for the consumer abuse tests: records no consumer can use, written straight to
a topic between good ones, and the check that each ended up quarantined with its reason.

A poison record is bytes (or no value at all) plus the fragment its quarantine reason must hold:
the field path for a record that breaks its topic's model, the parser's complaint otherwise.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kafka import KafkaProducer
from pydantic import BaseModel

from infra.settings import Settings
from schemas.quarantine import QUARANTINE_MAX_BYTES, Quarantined
from schemas.topics import topic_name
from streams.sources import read_quarantine
from tests.support.waits import wait_for

__all__ = [
    "NON_FINITE",
    "Entry",
    "Poison",
    "Written",
    "assert_quarantined",
    "interleave",
    "not_a_record",
    "out_of_range",
    "poison_kinds",
    "quarantined_by",
    "write",
]

# json.dumps cannot write 1e999, a JSON number that overflows a float to inf: out_of_range
# writes this placeholder and swaps the number in.
NON_FINITE = "__1e999__"


@dataclass(frozen=True)
class Poison:
    kind: str
    value: bytes | None  # None: a record with no value (a tombstone)
    reason: str  # what the quarantine reason must contain


# What any topic may hold by mistake or malice, whatever its model.
_GENERIC: tuple[Poison, ...] = (
    Poison("not JSON", b"this is not JSON {", "Invalid JSON"),
    Poison("invalid UTF-8", b"\xff\xfe\x80 \xc3\x28", "Invalid JSON"),
    Poison("invalid UTF-8 in a string", b'"\xff\xfe\x80"', "invalid unicode code point"),
    Poison("a JSON array", b"[1, 2, 3]", "Input should be an object"),
    Poison("empty", b"", "Invalid JSON: EOF while parsing"),
    Poison("no value (a tombstone)", None, "the value is empty"),
    Poison("nested 100,000 deep", b"[" * 100_000 + b"]" * 100_000,
           "Invalid JSON: recursion limit exceeded"),
)


def not_a_record(reason: str) -> Poison:
    """A JSON object of some other kind; ``reason`` names the first field the topic's model
    misses in it."""
    return Poison("JSON, not a record of the topic", b'{"hello": "world"}', reason)


def out_of_range(kind: str, good: BaseModel, path: str, value: Any,
                 reason: str | None = None) -> Poison:
    """``good`` with the field at ``path`` (dotted, list indexes as numbers) set to ``value``;
    the reason must start with ``path`` unless another ``reason`` is given."""
    data = json.loads(good.model_dump_json())
    *parents, leaf = [int(part) if part.isdigit() else part for part in path.split(".")]
    target = data
    for part in parents:
        target = target[part]
    target[leaf] = value
    raw = json.dumps(data).replace(json.dumps(NON_FINITE), "1e999")
    return Poison(kind, raw.encode(), reason or f"{path}: ")


def poison_kinds(first_field_missing: str, *specific: Poison) -> list[Poison]:
    """Every generic kind, an object of another kind, and the topic's own out-of-range ones."""
    return [*_GENERIC, not_a_record(first_field_missing), *specific]


@dataclass(frozen=True)
class Entry:
    key: bytes | None
    value: bytes | None
    poison: Poison | None = None
    timestamp_ms: int | None = None


@dataclass(frozen=True)
class Written:
    topic: str
    partition: int
    offset: int
    poison: Poison | None


def interleave(good: Sequence[Entry], poison: Sequence[Poison]) -> list[Entry]:
    """``good`` with the poison spread evenly between its records (never first or last)."""
    out = list(good)
    step = len(good) / (len(poison) + 1)
    for i, item in reversed(list(enumerate(poison))):
        at = max(1, round(step * (i + 1)))
        out.insert(at, Entry(b"poison", item.value, item))
    return out


def write(settings: Settings, name: str, entries: Sequence[Entry]) -> list[Written]:
    """Produce ``entries`` to a platform topic in order; where each one landed."""
    producer = KafkaProducer(bootstrap_servers=settings.bootstrap_servers, acks="all",
                             max_request_size=4 << 20)
    topic = topic_name(settings.topic_prefix, name)
    try:
        futures = [(producer.send(topic, key=e.key, value=e.value, timestamp_ms=e.timestamp_ms),
                    e.poison) for e in entries]
        producer.flush()
        return [Written(topic, meta.partition, meta.offset, poison)
                for meta, poison in ((f.get(timeout=30), p) for f, p in futures)]
    finally:
        producer.close()


def quarantined_by(settings: Settings, consumer: str) -> list[Quarantined]:
    return [q for q in read_quarantine(settings) if q.consumer == consumer]


def assert_quarantined(settings: Settings, consumer: str, written: Sequence[Written], *,
                       timeout_s: float = 30.0, repeats: bool = False) -> list[Quarantined]:
    """Wait until every poison record of ``written`` is quarantined under ``consumer``, then check
    that nothing else is, that each is there once (per distinct key, when the consumer
    ``repeats`` its replay), and that its reason and bytes are right. Returns what was found."""
    expected = {(w.topic, w.partition, w.offset): w.poison for w in written if w.poison}
    assert expected, "no poison was written"

    def complete() -> list[Quarantined] | None:
        found = quarantined_by(settings, consumer)
        where = {(q.source_topic, q.source_partition, q.source_offset) for q in found}
        return found if where >= expected.keys() else None

    found = wait_for(complete, timeout_s, f"{len(expected)} records quarantined by {consumer}")
    copies = Counter(q.key for q in found)
    assert repeats or max(copies.values()) == 1, f"{consumer} quarantined a record twice"
    for q in found:
        poison = expected.get((q.source_topic, q.source_partition, q.source_offset))
        assert poison is not None, f"{consumer} quarantined a good record: {q}"
        assert poison.reason in q.reason, (poison.kind, q.reason)
        raw = poison.value or b""
        assert (q.value, q.original_bytes) == (raw[:QUARANTINE_MAX_BYTES], len(raw)), poison.kind
    return found
