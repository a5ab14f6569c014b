"""The detector process: metric windows in, alert lifecycle events out.

On start it replays ``checkpoints`` and ``alerts`` to their ends (the alert state and the
registry), then ``metrics`` from the beginning through the detectors. Detector transitions carry
deterministic event ids, so a replay recognises what it already published and sends only what
is new: the detector state is a function of the log, like everything else.

A silent ingest stream closes no windows; once caught up, the runner publishes an empty ingest
window when three window lengths (plus grace) passed without one, so a stop shows up as a volume
drop — on the topic, where a replay sees it too.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from kafka import TopicPartition

from infra.settings import Settings
from schemas.alerts import AlertEvent, alert_event_key
from schemas.checkpoints import CheckpointEvent
from schemas.metrics import MetricWindow, metric_key
from schemas.topics import topic_name
from streams.monitors.config import MonitorConfig
from streams.monitors.detectors import MonitorState, evaluate, note_checkpoint
from streams.monitors.kafka_io import make_producer, replay_consumer, send
from streams.monitors.lifecycle import AlertState, apply, plan
from streams.monitors.rollback import CheckpointHistory, auto_protect_target, rollback_event

__all__ = ["DetectorRunner", "run_forever"]

log = logging.getLogger(__name__)


class DetectorRunner:
    def __init__(self, settings: Settings, config: MonitorConfig,
                 clock: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self.settings, self.config, self.clock = settings, config, clock
        self.detectors = MonitorState()
        self.alerts = AlertState()
        self.history = CheckpointHistory()
        self.producer = make_producer(settings)
        self.published = 0
        self._last_ingest_end: datetime | None = None

    def _topic(self, name: str) -> str:
        return topic_name(self.settings.topic_prefix, name)

    def _handle(self, topic: str, value: bytes) -> None:
        if topic == self._topic("checkpoints"):
            event = CheckpointEvent.model_validate_json(value)
            self.history.add(event)
            note_checkpoint(self.detectors, event)
        elif topic == self._topic("alerts"):
            apply(self.alerts, AlertEvent.model_validate_json(value))
        else:
            self._on_window(MetricWindow.model_validate_json(value))

    def _on_window(self, window: MetricWindow) -> None:
        if window.scope == "ingest" and window.checkpoint_id == "*":
            if self._last_ingest_end is None or window.window_end > self._last_ingest_end:
                self._last_ingest_end = window.window_end
        for event in plan(self.alerts, evaluate(self.detectors, window, self.config)):
            send(self.producer, self.settings, "alerts", alert_event_key(event),
                 event.model_dump_json().encode())
            apply(self.alerts, event)
            self.published += 1
            if self.config.auto_protect and event.kind == "fired" and event.alert:
                self._protect(event)

    def _protect(self, event: AlertEvent) -> None:
        assert event.alert is not None
        target = auto_protect_target(self.history, event.alert)
        if target is None:
            return
        rollback = rollback_event(self.history, target, actor="auto-protect",
                                  reason=f"critical alert: {event.alert.title}",
                                  now=self.clock(), alert_fingerprint=event.fingerprint)
        send(self.producer, self.settings, "checkpoints", target.encode(),
             rollback.model_dump_json().encode())
        self.history.add(rollback)
        log.warning("auto-protect rolled back %s after %s", target, event.alert.title)

    def _heartbeat(self) -> None:
        """Publish empty ingest windows for window lengths that passed with no window."""
        if self._last_ingest_end is None:
            return
        length = timedelta(seconds=self.config.window_s)
        # Three window lengths of slack so a merely slow metrics agent is not mistaken for silence.
        due = self.clock() - timedelta(seconds=self.config.grace_s) - 3 * length
        while self._last_ingest_end <= due:
            start = self._last_ingest_end
            window = MetricWindow(scope="ingest", window_start=start, window_end=start + length,
                                  checkpoint_id="*", arm="*")
            send(self.producer, self.settings, "metrics", metric_key("*", "*"),
                 window.model_dump_json().encode())
            self._on_window(window)

    def _drain(self, names: list[str]) -> dict[TopicPartition, int]:
        """Read the named topics to their current ends; returns the end positions."""
        consumer = replay_consumer(self.settings, names)
        try:
            ends = consumer.end_offsets(list(consumer.assignment()))
            while any(consumer.position(tp) < end for tp, end in ends.items()):
                for records in consumer.poll(timeout_ms=1000).values():
                    for record in records:
                        self._handle(record.topic, record.value)
            return ends
        finally:
            consumer.close()

    def run(self, stop: threading.Event, heartbeat: bool = True) -> None:
        """Replay, then follow all three topics until ``stop`` is set."""
        ends = self._drain(["checkpoints", "alerts"])
        consumer = replay_consumer(self.settings, ["metrics"])
        consumer.assign(list(consumer.assignment()) + list(ends))
        for tp, end in ends.items():
            consumer.seek(tp, end)
        consumer.seek_to_beginning(*[tp for tp in consumer.assignment() if tp not in ends])
        try:
            while not stop.is_set():
                batch = consumer.poll(timeout_ms=500)
                for records in batch.values():
                    for record in records:
                        self._handle(record.topic, record.value)
                if not batch and heartbeat:
                    self._heartbeat()
        finally:
            consumer.close()
            self.producer.close()


def run_forever(settings: Settings, config: MonitorConfig) -> None:
    """``rewardstream monitors detect``: run until interrupted."""
    stop = threading.Event()
    runner = DetectorRunner(settings, config)
    try:
        runner.run(stop)
    except KeyboardInterrupt:
        stop.set()
