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
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import get_args

from kafka.consumer.fetcher import ConsumerRecord

from infra.health_http import Figure
from infra.kafka_io import TopicReader, make_producer, send
from infra.quarantine import QuarantineSink
from infra.settings import Settings
from schemas.alert_lifecycle import AlertState, apply
from schemas.alerts import AlertEvent, AlertEventKind, alert_event_key
from schemas.checkpoints import CheckpointEvent, Registry, rollback
from schemas.metrics import MetricWindow, metric_key, read_window
from schemas.quarantine import UnusableRecord, decode_record
from schemas.topics import TopicName, topic_name
from streams.monitors.config import MonitorConfig
from streams.monitors.detectors import MonitorState, evaluate, note_checkpoint
from streams.monitors.lifecycle import plan
from streams.monitors.protect import auto_protect_target

__all__ = ["CONSUMER_NAME", "DETECT_FIGURES", "DetectTotals", "DetectorRunner", "run_forever"]

log = logging.getLogger(__name__)
CONSUMER_NAME = "monitors-detect"  # how quarantined records name this consumer


@dataclass
class DetectTotals:
    """Since the process started (across the runs an outage makes); read by its /metrics."""

    windows: int = 0  # metric windows read, replays included
    published: Counter[str] = field(default_factory=Counter)  # alert events sent, by kind
    open_alerts: int = 0


DETECT_FIGURES = (
    Figure("rewardstream_detect_windows", "windows", "counter",
           "Metric windows the detectors read since start (a restart replays the topic)"),
    Figure("rewardstream_detect_alert_events", "published", "counter",
           "Alert lifecycle events the detectors published since start, by kind", "kind",
           get_args(AlertEventKind)),
    Figure("rewardstream_detect_open_alerts", "open_alerts", "gauge",
           "Alerts firing or acknowledged, as the detectors see them"),
)


class DetectorRunner:
    def __init__(self, settings: Settings, config: MonitorConfig,
                 clock: Callable[[], datetime] = lambda: datetime.now(UTC),
                 totals: DetectTotals | None = None) -> None:
        self.settings, self.config, self.clock = settings, config, clock
        self.totals = totals or DetectTotals()
        self.detectors = MonitorState()
        self.alerts = AlertState()
        self.registry = Registry()
        self.producer = make_producer(settings, CONSUMER_NAME)
        self.quarantine = QuarantineSink(settings, CONSUMER_NAME, self.producer)
        self.published = 0
        self._last_ingest_end: datetime | None = None

    def _topic(self, name: TopicName) -> str:
        return topic_name(self.settings.topic_prefix, name)

    def _handle(self, record: ConsumerRecord) -> None:
        try:
            if record.topic == self._topic("checkpoints"):
                event = decode_record(CheckpointEvent, record.value)
                self.registry.add(event)
                note_checkpoint(self.detectors, event)
            elif record.topic == self._topic("alerts"):
                apply(self.alerts, decode_record(AlertEvent, record.value))
                self._count_open()
            else:
                self._on_window(read_window(record.value))
        except UnusableRecord as exc:
            self.quarantine.put(record.topic, record.partition, record.offset, record.value,
                                str(exc))

    def _on_window(self, window: MetricWindow) -> None:
        self.totals.windows += 1
        if window.scope == "ingest" and window.checkpoint_id == "*":
            if self._last_ingest_end is None or window.window_end > self._last_ingest_end:
                self._last_ingest_end = window.window_end
        for event in plan(self.alerts, evaluate(self.detectors, window, self.config)):
            send(self.producer, self.settings, "alerts", alert_event_key(event),
                 event.model_dump_json().encode())
            apply(self.alerts, event)
            self.published += 1
            self.totals.published[event.kind] += 1
            self._count_open()
            if self.config.auto_protect and event.kind == "fired" and event.alert:
                self._protect(event)

    def _count_open(self) -> None:
        self.totals.open_alerts = sum(r.open for r in self.alerts.alerts.values())

    def _protect(self, event: AlertEvent) -> None:
        assert event.alert is not None
        target = auto_protect_target(self.registry, event.alert)
        if target is None:
            return
        events = rollback(self.registry, target, self.clock(), "auto-protect",
                          f"critical alert: {event.alert.title}",
                          {"alert_fingerprint": event.fingerprint})
        for each in events:
            send(self.producer, self.settings, "checkpoints", each.checkpoint_id.encode(),
                 each.model_dump_json().encode())
            self.registry.add(each)
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

    def _replay_state(self) -> dict[str, int]:
        """Fold checkpoints and alerts to their current ends; returns where they stopped."""
        with TopicReader(self.settings, ["checkpoints", "alerts"],
                         client_id=CONSUMER_NAME) as reader:
            for record in reader.until_end():
                self._handle(record)
            return reader.positions()

    def run(self, stop: threading.Event, heartbeat: bool = True,
            ready: threading.Event | None = None) -> None:
        """Replay the registry and the alerts, then the metric windows from their start, then
        follow all three topics until ``stop`` is set; ``ready`` is set once the metric windows
        are replayed."""
        positions = self._replay_state()
        try:
            with TopicReader(self.settings, ["metrics", "checkpoints", "alerts"],
                             client_id=CONSUMER_NAME, positions=positions) as reader:
                for record in reader.until_end():
                    self._handle(record)
                if ready is not None:
                    ready.set()
                while not stop.is_set():
                    records = reader.poll(timeout_ms=500)
                    for record in records:
                        self._handle(record)
                    if not records and heartbeat:
                        self._heartbeat()
        finally:
            self.producer.close()


def run_forever(settings: Settings, config: MonitorConfig, metrics_port: int | None = None,
                metrics_host: str = "127.0.0.1") -> None:
    """``rewardstream monitors detect``: run until SIGTERM or SIGINT. While Kafka is away it
    waits, then replays the log again: what it published before is recognised by its ids."""
    from infra.health_http import FiguresCollector
    from infra.service_run import run_service

    totals = DetectTotals()

    def work(stop: threading.Event, ready: threading.Event) -> None:
        DetectorRunner(settings, config, totals=totals).run(stop, ready=ready)

    run_service(CONSUMER_NAME, settings, work,
                collectors=(FiguresCollector(totals, DETECT_FIGURES),),
                metrics_port=metrics_port, metrics_host=metrics_host)
