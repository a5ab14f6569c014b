"""The demo's readers of the log: a cycle's reward records, and alerts as they fire. A record
that is not what its topic promises is quarantined and skipped."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from infra.kafka_io import TopicReader
from infra.quarantine import QuarantineSink
from infra.settings import Settings
from schemas.alerts import AlertEvent
from schemas.quarantine import UnusableRecord, decode_record
from schemas.rewards import RewardRecord
from trainer.source import ConsumedRecord

__all__ = ["CONSUMER_NAME", "AlertFollower", "RewardReader"]

CONSUMER_NAME = "demo"  # how quarantined records name this consumer


class RewardReader:
    """Follows the ``rewards`` topic; hands out the records of the trajectories a cycle ran."""

    def __init__(self, settings: Settings) -> None:
        self._reader = TopicReader(settings, ["rewards"], client_id=CONSUMER_NAME)
        self._quarantine = QuarantineSink(settings, CONSUMER_NAME)
        self._seen: dict[str, ConsumedRecord] = {}

    def collect(self, trajectory_ids: set[str], timeout_s: float,
                on_progress: Callable[[int], None] = lambda n: None) -> list[ConsumedRecord]:
        """The records of ``trajectory_ids`` in log order; what is in when ``timeout_s`` ends."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for r in self._reader.poll(timeout_ms=300):
                try:
                    record = decode_record(RewardRecord, r.value)
                except UnusableRecord as exc:
                    self._quarantine.put(r.topic, r.partition, r.offset, r.value, str(exc))
                    continue
                self._seen[record.trajectory_id] = ConsumedRecord(
                    r.key.decode(), record, r.topic, r.partition, r.offset)
            found = trajectory_ids & self._seen.keys()
            on_progress(len(found))
            if len(found) == len(trajectory_ids):
                break
        ordered = [self._seen[t] for t in trajectory_ids & self._seen.keys()]
        return sorted(ordered, key=lambda c: (c.partition or 0, c.offset or 0))

    def close(self) -> None:
        self._reader.close()
        self._quarantine.close()


class AlertFollower:
    """A background thread calling ``on_event`` for every alert event from the start."""

    def __init__(self, settings: Settings, on_event: Callable[[AlertEvent], None]) -> None:
        self._settings = settings
        self._on_event = on_event
        self._stop = threading.Event()
        self.events: list[AlertEvent] = []
        self._thread = threading.Thread(target=self._run, name="demo-alerts", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        reader = TopicReader(self._settings, ["alerts"], client_id=CONSUMER_NAME)
        quarantine = QuarantineSink(self._settings, CONSUMER_NAME)
        try:
            while not self._stop.is_set():
                for r in reader.poll(timeout_ms=500):
                    try:
                        event = decode_record(AlertEvent, r.value)
                    except UnusableRecord as exc:
                        quarantine.put(r.topic, r.partition, r.offset, r.value, str(exc))
                        continue
                    self.events.append(event)
                    self._on_event(event)
        finally:
            reader.close()
            quarantine.close()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
