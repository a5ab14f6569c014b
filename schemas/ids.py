"""UUIDv7 event ids: time-ordered, made by the client, used as idempotency keys.

Some events are made by more than one service from the same facts (a span exported twice, a
tool call the gateway judged and the client's span reports too); their ids are derived from
those facts (:func:`derived_uuid7`), so every copy has the same id and the log and the reward
join keep one.
"""

from __future__ import annotations

import hashlib
import re
import uuid

from rewardstream_telemetry.ids import uuid7  # producers make the ids; one implementation

__all__ = ["call_event_id", "derived_uuid7", "is_uuid7", "uuid7", "uuid7_time_ms"]

_EMBEDDED_UUID = re.compile(r"([0-9a-f]{32})$")


def is_uuid7(value: uuid.UUID) -> bool:
    """Version 7 of the RFC 4122 variant, read from the bits (``value.version`` and
    ``value.variant`` say the same in several Python steps; this runs once per event read)."""
    bits = value.int
    return bits >> 62 & 0b11 == 0b10 and bits >> 76 & 0xF == 7


def uuid7_time_ms(value: uuid.UUID) -> int:
    """The Unix milliseconds a UUIDv7 was made at."""
    return value.int >> 80


def derived_uuid7(unix_ms: int, *parts: bytes) -> uuid.UUID:
    """A UUIDv7 at ``unix_ms`` whose other bits are a hash of ``parts``: the same facts give
    the same id wherever they are turned into an event."""
    raw = bytearray(hashlib.sha256(b"\x00".join(parts)).digest()[:16])
    raw[0:6] = unix_ms.to_bytes(6, "big")
    raw[6] = 0x70 | raw[6] & 0x0F  # version 7
    raw[8] = 0x80 | raw[8] & 0x3F  # RFC 9562 variant
    return uuid.UUID(bytes=bytes(raw))


def call_event_id(org_id: str, call_id: str, completion_id: str,
                  fallback_ms: int) -> uuid.UUID:
    """The event id of the ``tool.called`` that judges call ``call_id`` of a completion: at
    the time of the completion id when it embeds a UUIDv7 (the gateway's do), else at
    ``fallback_ms``; the same for the gateway and for a span reporting the same call."""
    found = _EMBEDDED_UUID.search(completion_id)
    unix_ms = fallback_ms
    if found is not None and is_uuid7(embedded := uuid.UUID(hex=found.group(1))):
        unix_ms = uuid7_time_ms(embedded)
    return derived_uuid7(unix_ms, org_id.encode(), call_id.encode(), b"judged call")
