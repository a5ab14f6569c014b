"""The frame of a worker fed by Kafka (the detectors, alert delivery, the archiver): its
``/metrics`` and ``/readyz``, a clean stop on SIGTERM or SIGINT, and outages ridden out.

The work is a function of a stop event and a ready event: it runs until ``stop`` is set, sets
``ready`` once it has caught up with the log, and raises when Kafka is away (then it is run
again, from the log, once a broker answers: :func:`infra.kafka_health.ride_out`).
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable

from prometheus_client.registry import Collector

from infra.health_http import HealthServer, service_registry
from infra.kafka_health import BrokerWatch, ride_out
from infra.settings import Settings

__all__ = ["Work", "run_service"]

Work = Callable[[threading.Event, threading.Event], None]


def run_service(who: str, settings: Settings, work: Work, *, collectors: tuple[Collector, ...],
                metrics_port: int | None, metrics_host: str = "127.0.0.1") -> None:
    """Run ``work`` until SIGTERM or SIGINT; ``/readyz`` is ready once it caught up and while
    the brokers answer. ``collectors`` join the process's and the broker's figures on
    ``/metrics``."""
    stop, ready = threading.Event(), threading.Event()
    watch = BrokerWatch(settings, who).start()

    def not_ready() -> str | None:
        if not watch.up:
            return f"Kafka does not answer: {watch.reason}"
        return None if ready.is_set() else "catching up with the log"

    registry = service_registry(watch, *collectors)
    health = HealthServer(registry, not_ready)
    health.serve(metrics_port, metrics_host)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())

    def restarted() -> None:
        ready.clear()
        watch.resumes += 1

    try:
        ride_out(lambda: work(stop, ready), stop, settings, who, on_restart=restarted)
    finally:
        health.close()
        watch.stop()
