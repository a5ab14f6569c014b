"""What the console shows, rebuilt by folding the alerts, metrics and checkpoints topics.

A background thread follows the three topics from their beginning; reads take a lock and get
plain JSON-able views. Actions publish events and wait until the follower has folded them, so
the page never shows a state older than the action the operator just took.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from datetime import UTC, datetime
from typing import Any

from infra.settings import Settings
from schemas.alerts import AlertEvent, alert_event_key
from schemas.checkpoints import CheckpointEvent
from schemas.metrics import LATENCY_BUCKET_BOUNDS_MS, MetricStat, MetricWindow
from schemas.topics import topic_name
from streams.monitors.kafka_io import make_producer, replay_consumer, send
from streams.monitors.lifecycle import AlertRecord, AlertState, apply, silenced_by
from streams.monitors.rollback import CheckpointHistory
from streams.monitors.stats import histogram_quantile

__all__ = ["ConsoleState"]

_MAX_WINDOWS = 720  # per key: 12 hours of one-minute windows
_ACTION_WAIT_S = 15.0


class _Series:
    """Windows of one (scope, checkpoint, arm), partials from several partitions merged."""

    def __init__(self) -> None:
        self.windows: dict[float, tuple[dict[str, MetricStat], list[int]]] = {}

    def add(self, window: MetricWindow) -> None:
        start = window.window_start.timestamp()
        stats, hist = self.windows.get(start, ({}, []))
        for name, stat in window.stats.items():
            stats[name] = stats.get(name, MetricStat()) + stat
        if window.latency_histogram:
            hist = [a + b for a, b in zip(hist or [0] * len(window.latency_histogram),
                                          window.latency_histogram)]
        self.windows[start] = (stats, hist)
        while len(self.windows) > _MAX_WINDOWS:
            del self.windows[min(self.windows)]

    def points(self, metric: str) -> list[list[float]]:
        out = []
        for start in sorted(self.windows):
            stats, hist = self.windows[start]
            if metric in ("latency_p50_ms", "latency_p95_ms"):
                if hist:
                    q = 0.5 if metric == "latency_p50_ms" else 0.95
                    out.append([start * 1000, histogram_quantile(hist, LATENCY_BUCKET_BOUNDS_MS, q),
                                float(sum(hist))])
            elif metric == "ingest_events":
                stat = stats.get(metric, MetricStat())
                out.append([start * 1000, stat.sum, stat.n])
            elif metric in stats and stats[metric].n > 0:
                out.append([start * 1000, stats[metric].mean, stats[metric].n])
        return out


def _record_view(record: AlertRecord, state: AlertState, now: datetime) -> dict[str, Any]:
    silence = silenced_by(state, record.alert, now)
    return {
        **record.alert.model_dump(mode="json"), "status": record.status,
        "started_at": record.started_at.isoformat(), "updated_at": record.updated_at.isoformat(),
        "resolved_at": record.resolved_at.isoformat() if record.resolved_at else None,
        "acknowledged_by": record.acknowledged_by, "resolved_by": record.resolved_by,
        "duplicates": record.duplicates, "history": record.history,
        "silenced_by": silence.model_dump(mode="json") if silence else None,
    }


class ConsoleState:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.lock = threading.Lock()
        self.alerts = AlertState()
        self.checkpoints = CheckpointHistory()
        self.series: dict[tuple[str, str, str], _Series] = defaultdict(_Series)
        self.producer = make_producer(settings)
        self._stop = threading.Event()
        self._seen_ids: set[str] = set()
        self._thread = threading.Thread(target=self._follow, name="console-follow", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        self.producer.close()

    def _fold(self, topic: str, value: bytes) -> None:
        if topic == topic_name(self.settings.topic_prefix, "alerts"):
            event = AlertEvent.model_validate_json(value)
            apply(self.alerts, event)
        elif topic == topic_name(self.settings.topic_prefix, "checkpoints"):
            checkpoint = CheckpointEvent.model_validate_json(value)
            self.checkpoints.add(checkpoint)
            self._seen_ids.add(checkpoint.event_id)
        else:
            window = MetricWindow.model_validate_json(value)
            self.series[(window.scope, window.checkpoint_id, window.arm)].add(window)

    def _follow(self) -> None:
        consumer = replay_consumer(self.settings, ["alerts", "metrics", "checkpoints"])
        try:
            while not self._stop.is_set():
                for records in consumer.poll(timeout_ms=300).values():
                    with self.lock:
                        for record in records:
                            self._fold(record.topic, record.value)
        finally:
            consumer.close()

    # ------------------------------------------------------------------------------ writes

    def _wait_for(self, seen: Any) -> None:
        deadline = time.monotonic() + _ACTION_WAIT_S
        while time.monotonic() < deadline:
            with self.lock:
                if seen():
                    return
            time.sleep(0.05)

    def publish_alert_event(self, event: AlertEvent) -> None:
        send(self.producer, self.settings, "alerts", alert_event_key(event),
             event.model_dump_json().encode())
        self._wait_for(lambda: event.event_id in self.alerts.seen)

    def publish_checkpoint_event(self, event: CheckpointEvent) -> None:
        send(self.producer, self.settings, "checkpoints", event.checkpoint_id.encode(),
             event.model_dump_json().encode())
        self._wait_for(lambda: event.event_id in self._seen_ids)

    # ------------------------------------------------------------------------------- reads

    def alert_views(self) -> list[dict[str, Any]]:
        now = datetime.now(UTC)
        order = {"firing": 0, "acknowledged": 1, "resolved": 2}
        with self.lock:
            views = [_record_view(r, self.alerts, now) for r in self.alerts.alerts.values()]
        return sorted(views, key=lambda v: (order[v["status"]], v["severity"] != "critical",
                                            v["started_at"]))

    def silence_views(self) -> list[dict[str, Any]]:
        now = datetime.now(UTC)
        with self.lock:
            return [s.model_dump(mode="json") for s in self.alerts.silences.values()
                    if s.ends_at > now]

    def series_view(self, scope: str, metric: str) -> list[dict[str, Any]]:
        with self.lock:
            return [{"checkpoint": ck, "arm": arm, "points": s.points(metric)}
                    for (sc, ck, arm), s in sorted(self.series.items()) if sc == scope]

    def checkpoint_views(self) -> list[dict[str, Any]]:
        with self.lock:
            events = sorted(self.checkpoints.events, key=lambda e: e.sequence, reverse=True)
            return [e.model_dump(mode="json") for e in events]
