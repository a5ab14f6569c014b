"""Where the gateway's ``completion.served`` events go: anything with ``emit(event)``.

:class:`KafkaEventSink` writes each event to its durable spool (``spool.py``) and from there to
``events.raw`` (acks=all, keyed by trajectory id, the same bytes the ingest API would write),
so what the gateway served reaches the log even through a broker outage or a restart of the
gateway; :class:`MemoryEventSink` keeps them in a list for in-process consumers (benchmarks,
the GPU check). ``emit`` only appends a line to a file: it never waits for Kafka.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from kafka.errors import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    KafkaError,
    KafkaTimeoutError,
    MessageSizeTooLargeError,
    RecordListTooLargeError,
)
from prometheus_client import CollectorRegistry

from infra.kafka_io import make_producer
from infra.settings import Settings, cache_dir
from schemas.events import Event, EventAdapter
from schemas.topics import topic_name
from serving.gateway.spool import EventSpool, Outcome

__all__ = ["EventSink", "KafkaEventSink", "MemoryEventSink", "default_spool_dir"]

_DELIVERY_TIMEOUT_MS = 30_000
# What is wrong with the record itself: sending it again cannot help. Anything else (no
# leader, too few in-sync replicas, no authorisation yet) is retried until it passes.
_REFUSED = (CorruptRecordError, InvalidRecordError, InvalidTimestampError,
            MessageSizeTooLargeError, RecordListTooLargeError)
_SPOOL_MAX_BYTES = 1 << 30
_SPOOL_MAX_EVENTS = 1_000_000


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


def default_spool_dir(settings: Settings) -> Path:
    """One spool per cluster and topic: what waits there belongs to that topic."""
    topic = topic_name(settings.topic_prefix, "events.raw")
    digest = hashlib.sha256(f"{settings.bootstrap_servers}\x00{topic}".encode()).hexdigest()
    return cache_dir() / "gateway-spool" / digest[:16]


def _trajectory_key(line: bytes) -> bytes | None:
    try:
        return str(json.loads(line)["trajectory_id"]).encode()
    except (ValueError, KeyError, TypeError):
        return None


def _outcome(future: Any, gave_up: Callable[[], bool]) -> Outcome:
    """Wait for one send; RETRY when it failed in a way that may pass, or the spool gave up."""
    while True:
        try:
            future.get(timeout=0.25)
            return Outcome.ACKNOWLEDGED
        except KafkaTimeoutError:
            if future.is_done:  # the producer's delivery timeout: not acknowledged
                return Outcome.RETRY
            if gave_up():
                return Outcome.RETRY
        except _REFUSED:
            return Outcome.REFUSED
        except KafkaError:
            return Outcome.RETRY


class KafkaEventSink:
    def __init__(self, settings: Settings, spool_dir: Path | None = None, *,
                 registry: CollectorRegistry | None = None,
                 max_spool_bytes: int = _SPOOL_MAX_BYTES) -> None:
        self.topic = topic_name(settings.topic_prefix, "events.raw")
        # A short reconnect backoff: after an outage the backlog goes as soon as Kafka is back.
        # Not idempotent: once a batch expired while every broker was down, kafka-python's
        # idempotent producer reset its producer id and never got a new one (nothing was
        # acknowledged again after the cluster came back). The spool sends again whatever was
        # not acknowledged, so a completion may be logged twice, identical, and every consumer
        # counts a completion id once. No retries inside the producer: a send it repeated after
        # a lost acknowledgement would be logged twice uncounted; the spool's resends are counted.
        self._producer = make_producer(
            settings, "gateway", max_block_ms=5000, delivery_timeout_ms=_DELIVERY_TIMEOUT_MS,
            request_timeout_ms=10_000, reconnect_backoff_max_ms=1000, enable_idempotence=False,
            retries=0)
        self._producer.partitions_for(self.topic)  # fetch metadata now, not on the first emit
        self.registry = registry or CollectorRegistry()
        self.spool = EventSpool(spool_dir or default_spool_dir(settings), self._deliver,
                                self.registry, max_bytes=max_spool_bytes,
                                max_events=_SPOOL_MAX_EVENTS)

    def emit(self, event: Event) -> None:
        self.spool.put(EventAdapter.dump_json(event))

    def _deliver(self, lines: list[bytes], gave_up: Callable[[], bool]) -> list[Outcome]:
        sent: list[Any] = []
        for line in lines:
            key = _trajectory_key(line)
            if key is None:  # cannot be: the spool holds only what emit wrote
                sent.append(Outcome.REFUSED)
                continue
            try:
                sent.append(self._producer.send(self.topic, key=key, value=line))
            except _REFUSED:
                sent.append(Outcome.REFUSED)
            except KafkaError:  # no metadata or a full buffer within max_block_ms
                sent.append(Outcome.RETRY)
        return [s if isinstance(s, Outcome) else _outcome(s, gave_up) for s in sent]

    def close(self) -> None:
        self.spool.close(10)
        self._producer.close(10)
