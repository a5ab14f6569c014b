"""Quarantine from inside a faust app (see ``schemas.quarantine``), through the app's producer:
the one faust flushes before it commits offsets, so a committed offset never passes a record
whose quarantine copy was lost."""

from __future__ import annotations

import logging
from collections.abc import Awaitable
from datetime import UTC, datetime
from typing import Any

from schemas.quarantine import Quarantined, quarantine_message

__all__ = ["send_quarantine"]

log = logging.getLogger("rewardstream.quarantine")


async def send_quarantine(app: Any, topic_prefix: str, consumer: str, source_topic: str,
                          partition: int, offset: int, raw: bytes | None,
                          reason: str) -> Awaitable[Any]:
    """Hand the quarantine record to the producer; await the result for Kafka's ack."""
    record = Quarantined.of(consumer, reason, source_topic, partition, offset, raw,
                            datetime.now(UTC))
    log.warning("%s quarantined %s/%d/%d: %s", consumer, source_topic, partition, offset, reason)
    topic, key, value, headers = quarantine_message(topic_prefix, record)
    return await app.producer.send(topic, key, value, None, None, headers)
