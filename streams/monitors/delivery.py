"""Alert delivery: Alertmanager's ``/api/v2/alerts`` (as Prometheus pushes) and webhooks.

Payload builders are pure. ``Deliverer`` is the thin process around them: it folds the
``alerts`` topic; events before its consumer group's committed offset only rebuild state, newer
ones are delivered and then committed (at-least-once: a receiver may see a notification twice
after a crash; ``fingerprint`` + ``status`` + ``startsAt`` identify it). Like Prometheus it
re-sends every open, unsilenced alert to Alertmanager every ``resend_s`` with ``endsAt`` a few
resend periods ahead, and a resolved alert once with its resolution time. Webhooks get
Alertmanager's webhook JSON (version 4) on ``fired`` and ``resolved``. Silenced alerts are
not notified; new silences are mirrored to Alertmanager's ``/api/v2/silences`` (lifting one
there is done in Alertmanager), and a resolution always reaches Alertmanager.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx

from infra.health_http import Figure
from infra.kafka_io import TopicReader
from infra.quarantine import QuarantineSink
from infra.redact import redact_text, redact_url
from infra.settings import Settings
from schemas.alert_lifecycle import AlertRecord, AlertState, apply, silenced_by
from schemas.alerts import AlertEvent
from schemas.quarantine import UnusableRecord, decode_record

__all__ = [
    "DELIVERY_FIGURES", "Deliverer", "DeliveryTargets", "DeliveryTotals", "alertmanager_alert",
    "post_with_retries", "run_delivery", "webhook_payload",
]

log = logging.getLogger(__name__)
_GROUP = "rewardstream-alert-delivery"
CONSUMER_NAME = "alert-delivery"  # how quarantined records name this consumer


def _iso(at: datetime) -> str:
    return at.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _annotations(record: AlertRecord) -> dict[str, str]:
    alert = record.alert
    notes = {"title": alert.title, "summary": alert.summary, "description": alert.summary,
             "runbook": alert.runbook, "evidence": json.dumps(alert.evidence, sort_keys=True),
             "fingerprint": alert.fingerprint, "lifecycle": record.status}
    if record.acknowledged_by:
        notes["acknowledged_by"] = record.acknowledged_by
    return notes


def alertmanager_alert(record: AlertRecord, now: datetime, hold_s: float,
                       console_url: str) -> dict[str, Any]:
    """One postable alert: open ones end ``hold_s`` from now unless re-sent; resolved ones end."""
    ends = record.resolved_at if record.resolved_at else now + timedelta(seconds=hold_s)
    return {"labels": dict(record.alert.labels), "annotations": _annotations(record),
            "startsAt": _iso(record.started_at), "endsAt": _iso(ends),
            "generatorURL": f"{console_url}/#alert-{record.alert.fingerprint}"}


def webhook_payload(record: AlertRecord, receiver: str, console_url: str) -> dict[str, Any]:
    """Alertmanager's webhook JSON (version 4) for one alert's firing or resolution."""
    status = "resolved" if record.status == "resolved" else "firing"
    labels = dict(record.alert.labels)
    annotations = _annotations(record)
    ends = _iso(record.resolved_at) if record.resolved_at else "0001-01-01T00:00:00Z"
    return {
        "version": "4", "groupKey": f'{{}}:{{alertname="{labels["alertname"]}"}}',
        "truncatedAlerts": 0, "status": status, "receiver": receiver,
        "groupLabels": {"alertname": labels["alertname"]}, "commonLabels": labels,
        "commonAnnotations": annotations, "externalURL": console_url,
        "alerts": [{"status": status, "labels": labels, "annotations": annotations,
                    "startsAt": _iso(record.started_at), "endsAt": ends,
                    "generatorURL": f"{console_url}/#alert-{record.alert.fingerprint}",
                    "fingerprint": record.alert.fingerprint}],
    }


def post_with_retries(client: httpx.Client, url: str, body: Any, *, attempts: int = 5,
                      backoff_s: float = 0.5, max_backoff_s: float = 8.0) -> bool:
    """POST JSON; retry connection errors, 429 and 5xx with doubling back-off. True if 2xx.
    Failures are logged with the URL cut to its host: webhook URLs carry their tokens."""
    delay = backoff_s
    for attempt in range(1, attempts + 1):
        try:
            response = client.post(url, json=body)
            if response.is_success:
                return True
            retriable = response.status_code == 429 or response.status_code >= 500
            log.warning("POST %s: HTTP %s (attempt %d/%d)", redact_url(url),
                        response.status_code, attempt, attempts)
            if not retriable:
                return False
        except httpx.HTTPError as exc:
            log.warning("POST %s: %s (attempt %d/%d)", redact_url(url), redact_text(str(exc)),
                        attempt, attempts)
        if attempt < attempts:
            time.sleep(delay)
            delay = min(delay * 2, max_backoff_s)
    return False


@dataclass(frozen=True)
class DeliveryTargets:
    alertmanager_urls: tuple[str, ...] = ()  # base URLs, e.g. http://127.0.0.1:9093
    webhook_urls: tuple[str, ...] = ()
    console_url: str = "http://127.0.0.1:8090"
    receiver: str = "rewardstream"
    resend_s: float = 60.0


@dataclass
class DeliveryTotals:
    """Since the process started (across the runs an outage makes); read by its /metrics."""

    sent: Counter[str] = field(default_factory=Counter)  # by target: alertmanager, webhook
    failed: Counter[str] = field(default_factory=Counter)  # after every retry
    open_alerts: int = 0  # open and not silenced: what Alertmanager is sent again


_TARGETS = ("alertmanager", "webhook")
DELIVERY_FIGURES = (
    Figure("rewardstream_alert_notifications_sent", "sent", "counter",
           "Posts to Alertmanager (alerts and silences) and to webhooks that were accepted",
           "target", _TARGETS),
    Figure("rewardstream_alert_notifications_failed", "failed", "counter",
           "Posts to Alertmanager and to webhooks that failed after every retry", "target",
           _TARGETS),
    Figure("rewardstream_alert_open_alerts", "open_alerts", "gauge",
           "Open alerts that are not silenced, as delivery sees them"),
)


class Deliverer:
    def __init__(self, settings: Settings, targets: DeliveryTargets,
                 totals: DeliveryTotals | None = None) -> None:
        self.settings, self.targets = settings, targets
        self.totals = totals or DeliveryTotals()
        self.state = AlertState()
        self.client = httpx.Client(timeout=10.0)
        self.sent_webhooks = 0

    def _post(self, target: str, url: str, body: Any) -> bool:
        sent = post_with_retries(self.client, url, body)
        (self.totals.sent if sent else self.totals.failed)[target] += 1
        return sent

    def _open_unsilenced(self, now: datetime) -> list[AlertRecord]:
        return [r for r in self.state.alerts.values()
                if r.open and silenced_by(self.state, r.alert, now) is None]

    def _push_alertmanager(self, records: list[AlertRecord], now: datetime) -> None:
        if not records:
            return
        body = [alertmanager_alert(r, now, 4 * self.targets.resend_s, self.targets.console_url)
                for r in records]
        for base in self.targets.alertmanager_urls:
            self._post("alertmanager", base.rstrip("/") + "/api/v2/alerts", body)

    def _mirror_silence(self, event: AlertEvent, now: datetime) -> None:
        assert event.silence is not None
        silence = event.silence
        body = {"matchers": [{"name": k, "value": v, "isRegex": False, "isEqual": True}
                             for k, v in sorted(silence.matchers.items())],
                "startsAt": _iso(now), "endsAt": _iso(silence.ends_at),
                "createdBy": silence.created_by,
                "comment": silence.comment
                or f"silenced in the rewardstream console ({silence.silence_id})"}
        for base in self.targets.alertmanager_urls:
            self._post("alertmanager", base.rstrip("/") + "/api/v2/silences", body)

    def _notify(self, event: AlertEvent, now: datetime) -> None:
        if event.kind == "silenced" and event.silence is not None:
            self._mirror_silence(event, now)
        if event.kind not in ("fired", "resolved", "acknowledged") or event.fingerprint is None:
            return
        record = self.state.alerts.get(event.fingerprint)
        if record is None:
            return
        silenced = silenced_by(self.state, record.alert, now) is not None
        if event.kind == "resolved" or not silenced:
            self._push_alertmanager([record], now)  # a resolution always ends it there
        repeat = event.kind == "fired" and record.duplicates
        if silenced or event.kind == "acknowledged" or repeat:
            return  # webhooks hear about firing and resolution of unsilenced alerts only
        for url in self.targets.webhook_urls:
            body = webhook_payload(record, self.targets.receiver, self.targets.console_url)
            if self._post("webhook", url, body):
                self.sent_webhooks += 1

    def run(self, stop: threading.Event, ready: threading.Event | None = None) -> None:
        """Replay the alerts (the lifecycle is a fold of all of them), notifying only about what
        comes after the group's committed offsets; commit as notifications go out. ``ready`` is
        set once it reads."""
        reader = TopicReader(self.settings, ["alerts"], client_id=CONSUMER_NAME, group_id=_GROUP)
        committed = {(tp.topic, tp.partition): reader.consumer.committed(tp) or 0
                     for tp in reader.partitions}
        quarantine = QuarantineSink(self.settings, CONSUMER_NAME)
        last_resend = 0.0
        if ready is not None:
            ready.set()
        try:
            while not stop.is_set():
                records = reader.poll(timeout_ms=500)
                for record in records:
                    new = record.offset >= committed[(record.topic, record.partition)]
                    try:
                        event = decode_record(AlertEvent, record.value)
                    except UnusableRecord as exc:
                        if new:
                            quarantine.put(record.topic, record.partition, record.offset,
                                           record.value, str(exc))
                        continue
                    apply(self.state, event)
                    if new:
                        self._notify(event, datetime.now(UTC))
                if records:
                    reader.consumer.commit()
                    self.totals.open_alerts = len(self._open_unsilenced(datetime.now(UTC)))
                if time.monotonic() - last_resend >= self.targets.resend_s:
                    last_resend = time.monotonic()
                    now = datetime.now(UTC)
                    self._push_alertmanager(self._open_unsilenced(now), now)
        finally:
            reader.close()
            self.client.close()
            quarantine.close()


def run_delivery(settings: Settings, targets: DeliveryTargets, metrics_port: int | None,
                 metrics_host: str = "127.0.0.1") -> None:
    """``rewardstream alerts deliver``: until SIGTERM or SIGINT. While Kafka is away it waits,
    then replays the alerts again, notifying only what its group had not committed."""
    from infra.health_http import FiguresCollector
    from infra.service_run import run_service

    totals = DeliveryTotals()

    def work(stop: threading.Event, ready: threading.Event) -> None:
        Deliverer(settings, targets, totals).run(stop, ready)

    run_service(CONSUMER_NAME, settings, work,
                collectors=(FiguresCollector(totals, DELIVERY_FIGURES),),
                metrics_port=metrics_port, metrics_host=metrics_host)
