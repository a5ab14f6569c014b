"""Whether the brokers answer, and riding out the times they do not.

No service exits because Kafka is away (invariant 13). A service asks a :class:`BrokerWatch`
(a thread that requests metadata every few seconds) whether the brokers answer, and says it is
not ready meanwhile; :func:`wait_for_broker` holds a start until they answer; :func:`ride_out`
runs a service's work again, after a pause, whenever it fails because Kafka went away. The
work rebuilds its state from the log when it starts, so starting it again resumes where it was.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from kafka.errors import KafkaError
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from infra.backoff import retry_pause_s
from infra.errors import BrokerError
from infra.kafka_io import confluent_options
from infra.settings import Settings
from schemas.topics import topic_name

__all__ = ["KAFKA_UNAVAILABLE", "BrokerWatch", "ride_out", "wait_for_broker"]

log = logging.getLogger("rewardstream.kafka")

# What the platform's kafka-python clients raise when the brokers are away: their own errors
# (a send not acknowledged in time, no broker to bootstrap from, a commit that failed) and the
# readers' BrokerError (no progress while records were due).
KAFKA_UNAVAILABLE: tuple[type[Exception], ...] = (KafkaError, BrokerError)
_PROBE_TIMEOUT_S = 5.0
_WAIT_PAUSE_S = (0.5, 10.0)  # the first and the longest pause between probes while waiting
_RESTART_PAUSE_S = (1.0, 30.0)  # the same between runs of work that failed
_STABLE_S = 60.0  # work that ran this long before it failed starts its pauses from the first


def _admin(settings: Settings, client_id: str) -> Any:
    from confluent_kafka.admin import AdminClient

    # log_level 0: librdkafka would print a line per refused connection for the whole outage.
    return AdminClient({**confluent_options(settings, client_id), "log_level": 0,
                        "reconnect.backoff.max.ms": 2000})


def _probe(admin: Any, topic: str, timeout_s: float) -> str | None:
    """None when a broker answered a metadata request, else why not. Only one topic's metadata
    is asked for: a shared cluster may hold thousands (topics are never auto-created)."""
    from confluent_kafka import KafkaException

    try:
        metadata = admin.list_topics(topic=topic, timeout=timeout_s)
    except KafkaException as exc:
        return str(exc.args[0].str() if exc.args else exc)
    return None if metadata.brokers else "no broker in the metadata"


class BrokerWatch(Collector):
    """Asks the brokers for metadata every ``interval_s`` from a thread; ``up`` says whether
    the last request was answered. As a Prometheus collector it reports that, and the seconds
    spent without an answer."""

    def __init__(self, settings: Settings, client_id: str, interval_s: float = 2.0) -> None:
        self.settings, self.interval_s = settings, interval_s
        self.client_id = client_id
        self.up = False
        self.reason = "not asked yet"
        self.resumes = 0  # times the process's work started again after Kafka was away
        self._down_since: float | None = time.monotonic()
        self._down_s = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="broker-watch", daemon=True)

    def start(self) -> BrokerWatch:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def _watch(self) -> None:
        admin = _admin(self.settings, f"{self.client_id}-watch")
        topic = topic_name(self.settings.topic_prefix, "events.raw")
        while not self._stop.is_set():
            self._note(_probe(admin, topic, min(_PROBE_TIMEOUT_S, self.interval_s * 2)))
            self._stop.wait(self.interval_s)

    def _note(self, problem: str | None) -> None:
        now = time.monotonic()
        if problem is None and not self.up:
            if self._down_since is not None:
                self._down_s += now - self._down_since
            self._down_since = None
            log.info("Kafka at %s answers", self.settings.bootstrap_servers)
        elif problem is not None and self.up:
            self._down_since = now
            log.warning("Kafka at %s does not answer: %s", self.settings.bootstrap_servers,
                        problem)
        self.up, self.reason = problem is None, problem or "answers"

    def down_seconds(self) -> float:
        since = self._down_since
        return self._down_s + (time.monotonic() - since if since is not None else 0.0)

    def collect(self) -> Iterator[Metric]:
        yield GaugeMetricFamily(
            "rewardstream_kafka_reachable", "1 while the brokers answer this process's "
            "metadata requests (asked every few seconds), else 0", value=float(self.up))
        yield CounterMetricFamily(
            "rewardstream_kafka_unreachable_seconds", "Seconds since start during which the "
            "brokers did not answer this process", value=self.down_seconds())
        yield CounterMetricFamily(
            "rewardstream_kafka_resumes", "Times this process started its work again from the "
            "log after Kafka was unavailable", value=self.resumes)


def wait_for_broker(settings: Settings, stop: threading.Event, who: str) -> bool:
    """Return once a broker answers (True), or when ``stop`` is set first (False). Says once
    that it waits, and once how long it waited."""
    admin = _admin(settings, f"{who}-wait")
    topic = topic_name(settings.topic_prefix, "events.raw")
    started, attempts = time.monotonic(), 0
    while not stop.is_set():
        problem = _probe(admin, topic, _PROBE_TIMEOUT_S)
        if problem is None:
            if attempts:
                log.warning("%s: Kafka at %s answers after %.0f s; going on", who,
                            settings.bootstrap_servers, time.monotonic() - started)
            return True
        attempts += 1
        if attempts == 1:
            log.warning("%s: waiting for Kafka at %s (%s)", who, settings.bootstrap_servers,
                        problem)
        stop.wait(retry_pause_s(attempts, *_WAIT_PAUSE_S))
    return False


def ride_out(work: Callable[[], None], stop: threading.Event, settings: Settings,
             who: str, on_restart: Callable[[], None] = lambda: None) -> None:
    """Run ``work`` until it returns (it should once ``stop`` is set). When it fails because
    Kafka is away, wait until a broker answers and run it again, after a pause that doubles
    while it keeps failing; ``on_restart`` hears of each failure (readiness, a metric)."""
    failures = 0
    while wait_for_broker(settings, stop, who):
        started = time.monotonic()
        try:
            work()
            return
        except KAFKA_UNAVAILABLE as exc:
            on_restart()
            failures = 1 if time.monotonic() - started > _STABLE_S else failures + 1
            pause_s = retry_pause_s(failures, *_RESTART_PAUSE_S)
            log.warning("%s: Kafka is unavailable (%s: %s); starting again from the log in "
                        "%.0f s, once a broker answers", who, type(exc).__name__, exc, pause_s)
            stop.wait(pause_s)
