"""Where the gateway's ``completion.served`` events go: anything with ``emit(event)``.

:class:`KafkaEventSink` produces straight to ``events.raw`` (acks=all, keyed by trajectory id,
the same bytes the ingest API would write); :class:`MemoryEventSink` keeps them in a list for
in-process consumers (benchmarks, the GPU check). ``emit`` must not block the event loop for
long: the Kafka producer batches in its own thread.
"""

from __future__ import annotations

import logging
import threading
from typing import Protocol

from schemas.events import Event, EventAdapter
from schemas.topics import topic_name

__all__ = ["EventSink", "KafkaEventSink", "MemoryEventSink"]

log = logging.getLogger(__name__)


class EventSink(Protocol):
    def emit(self, event: Event) -> None: ...

    def close(self) -> None: ...


class MemoryEventSink:
    def __init__(self) -> None:
        self._events: list[Event] = []
        self._lock = threading.Lock()

    def emit(self, event: Event) -> None:
        with self._lock:
            self._events.append(event)

    @property
    def events(self) -> list[Event]:
        with self._lock:
            return list(self._events)

    def close(self) -> None:
        pass


class KafkaEventSink:
    def __init__(self, bootstrap_servers: str, topic_prefix: str = "") -> None:
        from kafka import KafkaProducer

        self.topic = topic_name(topic_prefix, "events.raw")
        self._producer = KafkaProducer(
            bootstrap_servers=bootstrap_servers, acks="all", linger_ms=5, max_block_ms=5000,
        )
        self._producer.partitions_for(self.topic)  # fetch metadata now, not on the first emit

    def emit(self, event: Event) -> None:
        future = self._producer.send(
            self.topic, key=event.trajectory_id.encode(), value=EventAdapter.dump_json(event)
        )
        future.add_errback(lambda exc: log.error("event %s not produced: %s", event.event_id, exc))

    def close(self) -> None:
        self._producer.flush(10)
        self._producer.close(10)
