"""What the console shows, rebuilt by folding the alerts, metrics, checkpoints and quarantine
topics.

A background thread follows the topics from their beginning; reads take a lock and get plain
JSON-able views of what the reader's grant sees (``grants.py``). Actions publish events and wait
until the follower has folded them, so the page never shows a state older than the action the
operator just took. While Kafka is away the console keeps answering from what it folded, says it
is not ready, and the follower goes on from where it was once a broker answers.
"""

from __future__ import annotations

import threading
import time
from collections import Counter, defaultdict, deque
from datetime import UTC, datetime
from typing import Any

from kafka.consumer.fetcher import ConsumerRecord

from infra.kafka_health import BrokerWatch, ride_out
from infra.kafka_io import TopicReader, make_producer, send
from infra.quarantine import QuarantineSink
from infra.settings import Settings
from schemas.alert_lifecycle import AlertRecord, AlertState, apply, silenced_by
from schemas.alerts import Alert, AlertEvent, alert_event_key
from schemas.checkpoints import CheckpointEvent, Registry
from schemas.metrics import MetricStat, MetricWindow, histogram_quantile, read_window
from schemas.quarantine import Quarantined, UnusableRecord, decode_record, read_quarantined
from schemas.topics import topic_name
from serving.console.grants import Grant
from serving.console.samples import SampleQuery, query_for
from serving.ingest.keys import ALL
from streams.monitors.config import MonitorConfig

__all__ = ["CONSUMER_NAME", "ConsoleState"]

_MAX_WINDOWS = 720  # per key: 12 hours of one-minute windows
_ACTION_WAIT_S = 15.0
_RECENT_QUARANTINED = 50
CONSUMER_NAME = "console"  # how quarantined records name this consumer


class _QuarantineView:
    """Quarantined records counted once per key (a consumer that replays repeats its own),
    per (consumer, source topic), and the most recent ones."""

    def __init__(self) -> None:
        self.keys: set[bytes] = set()
        self.counts: Counter[tuple[str, str]] = Counter()
        self.recent: deque[Quarantined] = deque(maxlen=_RECENT_QUARANTINED)

    def add(self, record: Quarantined) -> None:
        if record.key in self.keys:
            return
        self.keys.add(record.key)
        self.counts[(record.consumer, record.source_topic)] += 1
        self.recent.append(record)


class _Series:
    """Windows of one (scope, checkpoint, arm, org), partials from several partitions merged.
    The metrics worker is at-least-once: a partial that comes again (same window and
    partition) replaces the one it repeats instead of adding to it."""

    def __init__(self) -> None:
        self.windows: dict[float, dict[tuple[int, str], MetricWindow]] = {}

    def add(self, window: MetricWindow) -> None:
        start = window.window_start.timestamp()
        self.windows.setdefault(start, {})[(window.partition, window.org_id)] = window
        while len(self.windows) > _MAX_WINDOWS:
            del self.windows[min(self.windows)]

    def _merged(self, start: float) -> tuple[dict[str, MetricStat], list[int]]:
        stats: dict[str, MetricStat] = {}
        hist: list[int] = []
        for window in self.windows[start].values():
            for name, stat in window.stats.items():
                stats[name] = stats.get(name, MetricStat()) + stat
            if window.latency_histogram:
                hist = [a + b for a, b in zip(hist or [0] * len(window.latency_histogram),
                                              window.latency_histogram, strict=True)]
        return stats, hist

    def points(self, metric: str) -> list[list[float]]:
        out = []
        for start in sorted(self.windows):
            stats, hist = self._merged(start)
            if metric in ("latency_p50_ms", "latency_p95_ms"):
                if hist:
                    q = 0.5 if metric == "latency_p50_ms" else 0.95
                    out.append([start * 1000, histogram_quantile(hist, q),
                                float(sum(hist))])
            elif metric == "ingest_events":
                stat = stats.get(metric, MetricStat())
                out.append([start * 1000, stat.sum, stat.n])
            elif metric in stats and stats[metric].n > 0:
                out.append([start * 1000, stats[metric].mean, stats[metric].n])
        return out


def _utc(at: datetime | None) -> str | None:
    return None if at is None else at.astimezone(UTC).isoformat()


def _record_view(record: AlertRecord, state: AlertState, now: datetime) -> dict[str, Any]:
    silence = silenced_by(state, record.alert, now)
    return {
        **record.alert.model_dump(mode="json"), "status": record.status,
        "window_end": _utc(record.alert.window_end),
        "opened_window_end": _utc(record.opened_window_end),
        "started_at": _utc(record.started_at), "updated_at": _utc(record.updated_at),
        "resolved_at": _utc(record.resolved_at),
        "acknowledged_by": record.acknowledged_by, "resolved_by": record.resolved_by,
        "duplicates": record.duplicates, "history": record.history,
        "silenced_by": silence.model_dump(mode="json") if silence else None,
    }


class ConsoleState:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.lock = threading.Lock()
        self.alerts = AlertState()
        self.checkpoints = Registry()
        self.series: dict[tuple[str, str, str, str], _Series] = defaultdict(_Series)
        self.quarantined = _QuarantineView()
        self.watch = BrokerWatch(settings, CONSUMER_NAME)
        self._producer: Any = None  # made when first needed: Kafka may be away at the start
        self._producer_lock = threading.Lock()
        self._stop = threading.Event()
        self.caught_up = threading.Event()  # folded up to the topics' ends (since it resumed)
        self._positions: dict[str, int] | None = None  # where the follower resumes
        self._seen_ids: set[str] = set()
        self._thread = threading.Thread(target=self._follow, name="console-follow", daemon=True)

    @property
    def producer(self) -> Any:
        with self._producer_lock:  # not self.lock: folds, which hold it, may quarantine
            if self._producer is None:
                self._producer = make_producer(self.settings, CONSUMER_NAME)
            return self._producer

    def start(self) -> None:
        self.watch.start()
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self.watch.stop()
        self._thread.join(timeout=10)
        if self._producer is not None:
            self._producer.close()

    def not_ready(self) -> str | None:
        """Why the console cannot show the current state, or None."""
        if not self.watch.up:
            return f"Kafka does not answer: {self.watch.reason}"
        return None if self.caught_up.is_set() else "catching up with the topics"

    def _fold(self, record: ConsumerRecord) -> None:
        topic, value = record.topic, record.value
        if topic == topic_name(self.settings.topic_prefix, "alerts"):
            apply(self.alerts, decode_record(AlertEvent, value))
        elif topic == topic_name(self.settings.topic_prefix, "checkpoints"):
            checkpoint = decode_record(CheckpointEvent, value)
            if checkpoint.event_id not in self._seen_ids:  # folded again after an outage
                self.checkpoints.add(checkpoint)
                self._seen_ids.add(checkpoint.event_id)
        elif topic == topic_name(self.settings.topic_prefix, "quarantine"):
            self.quarantined.add(read_quarantined(record.headers or [], value))
        else:
            window = read_window(value)
            key = (window.scope, window.checkpoint_id, window.arm, window.org_id)
            self.series[key].add(window)

    def _fold_or_quarantine(self, record: ConsumerRecord) -> None:
        try:
            self._fold(record)
        except UnusableRecord as exc:
            QuarantineSink(self.settings, CONSUMER_NAME, self.producer).put(
                record.topic, record.partition, record.offset, record.value, str(exc))

    def _follow(self) -> None:
        ride_out(self._follow_from_positions, self._stop, self.settings, CONSUMER_NAME,
                 on_restart=self.caught_up.clear)

    def _follow_from_positions(self) -> None:
        with TopicReader(self.settings, ["alerts", "metrics", "checkpoints", "quarantine"],
                         client_id=CONSUMER_NAME, positions=self._positions) as reader:
            for record in reader.until_end():
                with self.lock:
                    self._fold_or_quarantine(record)
            self._positions = reader.positions()
            self.caught_up.set()
            while not self._stop.is_set():
                records = reader.poll(timeout_ms=300)
                with self.lock:
                    for record in records:
                        self._fold_or_quarantine(record)
                if records:
                    self._positions = reader.positions()

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

    def publish_checkpoint_events(self, events: list[CheckpointEvent]) -> None:
        for event in events:
            send(self.producer, self.settings, "checkpoints", event.checkpoint_id.encode(),
                 event.model_dump_json().encode())
        self._wait_for(lambda: all(e.event_id in self._seen_ids for e in events))

    # ------------------------------------------------------------------------------- reads

    def alert_visible(self, fingerprint: str, grant: Grant) -> bool:
        record = self.alerts.alerts.get(fingerprint)
        return record is not None and grant.sees(record.alert.labels.get("org"))

    def silence_visible(self, silence_id: str, grant: Grant) -> bool:
        silence = self.alerts.silences.get(silence_id)
        return silence is not None and grant.sees(silence.matchers.get("org"))

    def checkpoint_visible(self, checkpoint_id: str, grant: Grant) -> bool:
        latest = self.checkpoints.latest.get(checkpoint_id)
        return latest is not None and grant.sees_record(latest.model_dump(mode="json"))

    def rollback_offered(self, checkpoint_id: str, grant: Grant) -> bool:
        """Roll back is offered for what the platform serves and the staff member may act on."""
        return self.checkpoints.platform_serves(checkpoint_id) \
            and self.checkpoint_visible(checkpoint_id, grant)

    def alert_views(self, grant: Grant) -> list[dict[str, Any]]:
        now = datetime.now(UTC)
        order = {"firing": 0, "acknowledged": 1, "resolved": 2}
        with self.lock:
            views = [{**_record_view(r, self.alerts, now), "rollback_offered":
                      self.rollback_offered(r.alert.labels.get("checkpoint", ""), grant)}
                     for r in self.alerts.alerts.values()
                     if grant.sees(r.alert.labels.get("org"))]
        return sorted(views, key=lambda v: (order[v["status"]], v["severity"] != "critical",
                                            v["started_at"]))

    def samples_query(self, fingerprint: str, grant: Grant,
                      limit: int) -> tuple[SampleQuery, Alert] | None:
        """The query of an alert's sample trajectories, and the alert; None for an alert the
        staff member may not see, as for one that does not exist."""
        with self.lock:
            if not self.alert_visible(fingerprint, grant):
                return None
            record = self.alerts.alerts[fingerprint]
            return query_for(record, self._window_s(), limit), record.alert

    def _window_s(self) -> float:
        """How long the monitors' windows are: the first folded window says (every window of
        a deployment is as long); the monitors' default before any is folded."""
        for series in self.series.values():
            for partials in series.windows.values():
                for window in partials.values():
                    return (window.window_end - window.window_start).total_seconds()
        return float(MonitorConfig.window_s)

    def silence_views(self, grant: Grant) -> list[dict[str, Any]]:
        now = datetime.now(UTC)
        with self.lock:
            return [s.model_dump(mode="json") for s in self.alerts.silences.values()
                    if s.ends_at > now and grant.sees(s.matchers.get("org"))]

    def series_view(self, scope: str, metric: str, grant: Grant) -> list[dict[str, Any]]:
        with self.lock:
            return [{"checkpoint": ck, "arm": arm, "org": org, "points": s.points(metric)}
                    for (sc, ck, arm, org), s in sorted(self.series.items())
                    if sc == scope and grant.sees(org)]

    def quarantine_view(self, grant: Grant) -> dict[str, Any]:
        """Quarantined records name no org (they could not be read): the fleet's alone."""
        if not grant.fleet:
            return {"total": 0, "by_consumer": [], "recent": [], "fleet_only": True}
        with self.lock:
            view = self.quarantined
            return {
                "total": len(view.keys), "fleet_only": False,
                "by_consumer": [{"consumer": c, "source_topic": t, "records": n}
                                for (c, t), n in sorted(view.counts.items())],
                "recent": [{"consumer": q.consumer, "reason": q.reason,
                            "source": f"{q.source_topic}/{q.source_partition}/{q.source_offset}",
                            "at": q.at.isoformat(), "bytes": q.original_bytes}
                           for q in reversed(view.recent)],
            }

    def checkpoint_views(self, grant: Grant) -> list[dict[str, Any]]:
        """Every registry event, newest first; ``served_by_platform``: whether the platform
        serves its checkpoint now (and so can roll it back)."""
        with self.lock:
            events = sorted(self.checkpoints.events, key=lambda e: e.sequence, reverse=True)
            views = [{**e.model_dump(mode="json"),
                      "served_by_platform": self.checkpoints.platform_serves(e.checkpoint_id)}
                     for e in events]
        return [view for view in views if grant.sees_record(view)]

    def canary_views(self, grant: Grant) -> list[dict[str, Any]]:
        """Checkpoints in the canary status, running ones first: the canary's spec, and its
        newest look (the A/B table, the rule's bounds and state, the trajectories a decision
        still needs), as the release controller recorded it. A running canary's A/B is of its
        scope's traffic: a fleet canary is shown to fleet staff, an org's to that org's."""
        with self.lock:
            found = sorted(self.checkpoints.by_status("canary"),
                           key=lambda e: (e.canary is None, -e.sequence))
            views = [{"checkpoint_id": e.checkpoint_id, "model": e.model, "kind": e.kind,
                      "occurred_at": e.occurred_at.isoformat(),
                      "orgs": [*e.orgs, *([e.canary.org or ALL] if e.canary else [])],
                      "canary": e.canary.model_dump(mode="json") if e.canary else None,
                      "look": e.evidence.get("ab")} for e in found]
        return [view for view in views if grant.sees_record(view)]
