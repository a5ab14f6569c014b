"""Where registry events live: the compacted ``checkpoints`` topic, or a JSONL file offline.

Both stores answer the same two calls (one contract test runs against both); the registry
itself is always the fold (``schemas.checkpoints``) of the events, so it can be rebuilt from
the log at any time.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from infra.kafka_io import TopicReader, make_producer, send
from infra.quarantine import QuarantineSink
from infra.settings import Settings
from schemas.checkpoints import CheckpointEvent, Registry, fold
from schemas.quarantine import UnusableRecord, decode_record

__all__ = ["CONSUMER_NAME", "JsonlRegistryStore", "KafkaRegistryStore", "RegistryStore"]

CONSUMER_NAME = "trainer-registry"  # how quarantined records name this consumer


class RegistryStore(Protocol):
    def read(self) -> Registry: ...

    def publish(self, events: Sequence[CheckpointEvent]) -> None: ...


class JsonlRegistryStore:
    """An append-only file of events, one JSON object a line (offline runs and experiments)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def read(self) -> Registry:
        if not self.path.exists():
            return fold([])
        lines = self.path.read_text().splitlines()
        return fold(CheckpointEvent.model_validate_json(line) for line in lines if line.strip())

    def publish(self, events: Sequence[CheckpointEvent]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a") as handle:
            for event in events:
                handle.write(event.model_dump_json() + "\n")
            handle.flush()
            os.fsync(handle.fileno())


class KafkaRegistryStore:
    """Reads the whole ``checkpoints`` topic to its end; publishes with acks=all, keyed by id.
    A record that is not a registry event is quarantined and left out of the fold."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    def read(self) -> Registry:
        registry = Registry()
        quarantine: QuarantineSink | None = None
        with TopicReader(self.settings, ["checkpoints"], client_id=CONSUMER_NAME) as reader:
            for record in reader.until_end():
                try:
                    registry.add(decode_record(CheckpointEvent, record.value))
                except UnusableRecord as exc:
                    quarantine = quarantine or QuarantineSink(self.settings, CONSUMER_NAME)
                    quarantine.put(record.topic, record.partition, record.offset,
                                   record.value, str(exc))
        if quarantine is not None:
            quarantine.close()
        return registry

    def publish(self, events: Sequence[CheckpointEvent]) -> None:
        producer = make_producer(self.settings, CONSUMER_NAME)
        try:
            for event in events:
                send(producer, self.settings, "checkpoints", event.checkpoint_id.encode(),
                     event.model_dump_json().encode())
        finally:
            producer.close()
