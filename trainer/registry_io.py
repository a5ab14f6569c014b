"""Where registry events live: the compacted ``checkpoints`` topic, or a JSONL file offline.

Both stores answer the same two calls; the registry itself is always ``registry.fold`` of what
``read`` returns, so it can be rebuilt from the log at any time.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from schemas.checkpoints import CheckpointEvent
from trainer.registry import Registry, fold

__all__ = ["JsonlRegistryStore", "KafkaRegistryStore", "RegistryStore"]


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
    """Reads the whole ``checkpoints`` topic to its end; publishes with acks=all, keyed by id."""

    def __init__(self, bootstrap_servers: str, topic: str, timeout_s: float = 30.0) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.topic = topic
        self.timeout_s = timeout_s

    def read(self) -> Registry:
        from kafka import KafkaConsumer, TopicPartition

        consumer = KafkaConsumer(bootstrap_servers=self.bootstrap_servers, enable_auto_commit=False)
        try:
            partitions = [TopicPartition(self.topic, p)
                          for p in sorted(consumer.partitions_for_topic(self.topic) or ())]
            consumer.assign(partitions)
            consumer.seek_to_beginning(*partitions)
            end = consumer.end_offsets(partitions)
            events: list[CheckpointEvent] = []
            deadline = time.monotonic() + self.timeout_s
            while any(consumer.position(tp) < end[tp] for tp in partitions):
                if time.monotonic() > deadline:
                    raise TimeoutError(f"reading {self.topic} took over {self.timeout_s} s")
                for records in consumer.poll(timeout_ms=200).values():
                    events.extend(CheckpointEvent.model_validate_json(r.value) for r in records
                                  if r.value is not None)
            return fold(events)
        finally:
            consumer.close()

    def publish(self, events: Sequence[CheckpointEvent]) -> None:
        from kafka import KafkaProducer

        producer = KafkaProducer(bootstrap_servers=self.bootstrap_servers, acks="all")
        try:
            for event in events:
                producer.send(self.topic, key=event.checkpoint_id.encode(),
                              value=event.model_dump_json().encode())
            producer.flush()
        finally:
            producer.close()
