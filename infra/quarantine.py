"""The quarantine sink of the platform's kafka-python consumers (see ``schemas.quarantine``).

A consumer that meets a record it cannot use hands it here and goes on: the record's bytes, the
reason and where it was are sent to the ``quarantine`` topic and acknowledged before ``put``
returns, so a consumer that then commits its position past the record has not lost it.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

from infra.kafka_io import make_producer, send
from infra.settings import Settings
from schemas.quarantine import Quarantined, quarantine_message

__all__ = ["QuarantineSink"]

log = logging.getLogger("rewardstream.quarantine")


class QuarantineSink:
    """Quarantines records on behalf of one consumer; ``count`` is this process's total."""

    def __init__(self, settings: Settings, consumer: str, producer: Any = None) -> None:
        self.settings = settings
        self.consumer = consumer
        self.count = 0
        self._own_producer = producer is None
        self._producer = producer or make_producer(settings, f"{consumer}-quarantine")

    def put(self, topic: str, partition: int, offset: int, value: bytes | None,
            reason: str) -> Quarantined:
        record = Quarantined.of(self.consumer, reason, topic, partition, offset, value,
                                datetime.now(UTC))
        _, key, body, headers = quarantine_message(self.settings.topic_prefix, record)
        send(self._producer, self.settings, "quarantine", key, body, headers)
        self.count += 1
        log.warning("%s quarantined %s/%d/%d (%d so far): %s", self.consumer, topic, partition,
                    offset, self.count, reason)
        return record

    def close(self) -> None:
        if self._own_producer:
            self._producer.close()
