"""The demo's readers of the log: a cycle's reward records, and alerts as they fire."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from schemas.alerts import AlertEvent
from schemas.rewards import RewardRecord
from schemas.topics import topic_name
from trainer.prepare import ConsumedRecord

__all__ = ["AlertFollower", "RewardReader"]


def _consumer(bootstrap_servers: str, topic: str):  # -> KafkaConsumer, assigned from the start
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap_servers, enable_auto_commit=False)
    partitions = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or {0})]
    consumer.assign(partitions)
    consumer.seek_to_beginning(*partitions)
    return consumer


class RewardReader:
    """Follows the ``rewards`` topic; hands out the records of the trajectories a cycle ran."""

    def __init__(self, bootstrap_servers: str, topic_prefix: str) -> None:
        self.topic = topic_name(topic_prefix, "rewards")
        self._consumer = _consumer(bootstrap_servers, self.topic)
        self._seen: dict[str, ConsumedRecord] = {}

    def collect(self, trajectory_ids: set[str], timeout_s: float,
                on_progress: Callable[[int], None] = lambda n: None) -> list[ConsumedRecord]:
        """The records of ``trajectory_ids`` in log order; what is in when ``timeout_s`` ends."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for records in self._consumer.poll(timeout_ms=300).values():
                for r in records:
                    record = RewardRecord.model_validate_json(r.value)
                    self._seen[record.trajectory_id] = ConsumedRecord(
                        r.key.decode(), record, r.topic, r.partition, r.offset)
            found = trajectory_ids & self._seen.keys()
            on_progress(len(found))
            if len(found) == len(trajectory_ids):
                break
        ordered = [self._seen[t] for t in trajectory_ids & self._seen.keys()]
        return sorted(ordered, key=lambda c: (c.partition or 0, c.offset or 0))

    def close(self) -> None:
        self._consumer.close()


class AlertFollower:
    """A background thread calling ``on_event`` for every alert event from the start."""

    def __init__(self, bootstrap_servers: str, topic_prefix: str,
                 on_event: Callable[[AlertEvent], None]) -> None:
        self._args = (bootstrap_servers, topic_name(topic_prefix, "alerts"))
        self._on_event = on_event
        self._stop = threading.Event()
        self.events: list[AlertEvent] = []
        self._thread = threading.Thread(target=self._run, name="demo-alerts", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        consumer = _consumer(*self._args)
        try:
            while not self._stop.is_set():
                for records in consumer.poll(timeout_ms=500).values():
                    for r in records:
                        event = AlertEvent.model_validate_json(r.value)
                        self.events.append(event)
                        self._on_event(event)
        finally:
            consumer.close()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
