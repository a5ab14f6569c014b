"""Quarantine: records a consumer found on a topic and could not use.

Ingest rejects bad events before they reach the log (they go to ``events.deadletter``). A
record that is on a topic anyway (an old event, a topic written by another tool, a bug) is
quarantined by each consumer that cannot use it: the record's bytes go to the ``quarantine``
topic with the consumer, the reason and where it was found, and the consumer goes on with the
next record. Nothing is skipped silently and nothing stops a consumer.

The key names the consumer and the source position, so a consumer that repeats a quarantine
after a restart writes the same key: counting distinct keys counts each poison record once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from schemas.errors import RewardstreamError
from schemas.events import first_error
from schemas.topics import topic_name

__all__ = [
    "EMPTY_VALUE",
    "QUARANTINE_MAX_BYTES",
    "Quarantined",
    "UnusableRecord",
    "decode_record",
    "quarantine_headers",
    "quarantine_key",
    "quarantine_message",
    "read_quarantined",
]

M = TypeVar("M", bound=BaseModel)

# The quarantined copy keeps the head of an oversize record, so it stays under the broker's
# message size limit while still showing what was there; the header keeps the full size.
QUARANTINE_MAX_BYTES = 256 * 1024
_REASON_MAX_CHARS = 1000
EMPTY_VALUE = "the value is empty (a tombstone or a null record)"


@dataclass(frozen=True)
class Quarantined:
    """One quarantined record: who could not use it, why, and where it was."""

    consumer: str  # e.g. "reward-join", "archiver", "trainer"
    reason: str  # names the field and what is wrong with it
    source_topic: str
    source_partition: int
    source_offset: int
    at: datetime  # when the consumer quarantined it (wall clock: for operators only)
    original_bytes: int = 0
    value: bytes = b""

    @classmethod
    def of(cls, consumer: str, reason: str, source_topic: str, source_partition: int,
           source_offset: int, raw: bytes | None, at: datetime) -> Quarantined:
        raw = raw or b""
        return cls(consumer, reason[:_REASON_MAX_CHARS], source_topic, source_partition,
                   source_offset, at, len(raw), raw[:QUARANTINE_MAX_BYTES])

    @property
    def key(self) -> bytes:
        return quarantine_key(self.consumer, self.source_topic, self.source_partition,
                              self.source_offset)


def quarantine_key(consumer: str, topic: str, partition: int, offset: int) -> bytes:
    return f"{consumer}|{topic}|{partition}|{offset}".encode()


def quarantine_headers(record: Quarantined) -> list[tuple[str, bytes]]:
    return [
        ("consumer", record.consumer.encode()),
        ("reason", record.reason.encode()),
        ("source_topic", record.source_topic.encode()),
        ("source_partition", str(record.source_partition).encode()),
        ("source_offset", str(record.source_offset).encode()),
        ("time", record.at.isoformat().encode()),
        ("original_bytes", str(record.original_bytes).encode()),
    ]


def _int(text: str | None) -> int:
    try:
        return int(text or "")
    except ValueError:
        return -1


def _time(text: str | None) -> datetime:
    try:
        return datetime.fromisoformat(text or "")
    except ValueError:
        return datetime.min.replace(tzinfo=UTC)


def read_quarantined(headers: Sequence[tuple[str, bytes]], value: bytes | None) -> Quarantined:
    """The record a ``quarantine`` topic entry describes; never raises, since anything can be
    written to a topic (unreadable headers read as "?" and -1)."""
    found = {str(name): bytes(raw or b"").decode(errors="replace") for name, raw in headers}
    return Quarantined(
        consumer=found.get("consumer", "?"), reason=found.get("reason", "?"),
        source_topic=found.get("source_topic", "?"),
        source_partition=_int(found.get("source_partition")),
        source_offset=_int(found.get("source_offset")), at=_time(found.get("time")),
        original_bytes=_int(found.get("original_bytes")), value=value or b"",
    )


def quarantine_message(
    topic_prefix: str, record: Quarantined,
) -> tuple[str, bytes, bytes, list[tuple[str, bytes]]]:
    """(topic, key, value, headers) to send for ``record``, whatever the Kafka client."""
    return (topic_name(topic_prefix, "quarantine"), record.key, record.value,
            quarantine_headers(record))


class UnusableRecord(RewardstreamError):
    """A record on a topic is not what the topic's contract says; the message says why."""


def decode_record(model: type[M], value: bytes | None) -> M:
    """``value`` as ``model``; raises :class:`UnusableRecord` naming the field at fault."""
    if value is None:
        raise UnusableRecord(f"(record): {EMPTY_VALUE}")
    try:
        return model.model_validate_json(value)
    except ValidationError as exc:
        field, message = first_error(exc)
        if field == "(event)":  # first_error's name for the whole value; here any topic's record
            field = "(record)"
        raise UnusableRecord(f"{field}: {message}") from None
