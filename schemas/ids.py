"""UUIDv7 event ids: time-ordered, made by the client, used as idempotency keys."""

from __future__ import annotations

import uuid

from rewardstream_telemetry.ids import uuid7  # producers make the ids; one implementation

__all__ = ["is_uuid7", "uuid7", "uuid7_time_ms"]


def is_uuid7(value: uuid.UUID) -> bool:
    """Version 7 of the RFC 4122 variant, read from the bits (``value.version`` and
    ``value.variant`` say the same in several Python steps; this runs once per event read)."""
    bits = value.int
    return bits >> 62 & 0b11 == 0b10 and bits >> 76 & 0xF == 7


def uuid7_time_ms(value: uuid.UUID) -> int:
    """The Unix milliseconds a UUIDv7 was made at."""
    return value.int >> 80
