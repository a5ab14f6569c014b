"""UUIDv7 event ids: time-ordered, made by the client, used as idempotency keys."""

from __future__ import annotations

import os
import time
import uuid

__all__ = ["uuid7"]


def uuid7(unix_ms: int | None = None) -> uuid.UUID:
    """A fresh RFC 9562 version-7 UUID: 48 bits of Unix milliseconds, then 74 random bits."""
    ms = time.time_ns() // 1_000_000 if unix_ms is None else unix_ms
    if not 0 <= ms < 1 << 48:
        raise ValueError(f"unix_ms {ms} does not fit the 48-bit UUIDv7 timestamp")
    rand = int.from_bytes(os.urandom(10), "big")
    rand_a = rand >> 62 & 0xFFF
    rand_b = rand & ((1 << 62) - 1)
    value = ms << 80 | 0x7 << 76 | rand_a << 64 | 0b10 << 62 | rand_b
    return uuid.UUID(int=value)
