"""``/livez``, ``/readyz`` and ``/metrics`` for the platform's workers, which have no web server
of their own (the reward worker, both monitors workers, the archiver, alert delivery, the
trainer), on a port of their own, from a thread.

``/readyz`` answers 200 while the worker's ``not_ready()`` says nothing is wrong, else 503 with
the reason, as the HTTP services do. A port that is taken costs the worker its endpoints, not
its work: it says so in its log and goes on (``rewardstream up`` checks its ports before it
starts anything).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector

from infra.ports import DEFAULT_PORTS

__all__ = ["Figure", "FiguresCollector", "HealthServer", "metrics_host_option",
           "metrics_port_option", "service_registry"]

log = logging.getLogger("rewardstream.health")


def metrics_port_option(service: str) -> Any:
    """A worker command's ``--metrics-port``: its entry in :data:`DEFAULT_PORTS`."""
    import typer

    return typer.Option(DEFAULT_PORTS[service], min=0, max=65535,
                        help="Serve /metrics (Prometheus), /readyz and /livez on this port; 0: "
                        "not at all.")


def metrics_host_option() -> Any:
    """A worker command's ``--metrics-host``; docker-compose.yml sets it for every worker."""
    import typer

    return typer.Option("127.0.0.1", envvar="REWARDSTREAM_METRICS_HOST",
                        help="Interface of --metrics-port (0.0.0.0 for all).")


@dataclass(frozen=True)
class Figure:
    """One metric read from an attribute of a service's running totals when scraped: a
    number, or with ``label`` a mapping of label values to numbers."""

    name: str  # the Prometheus name; a counter's without its _total
    attribute: str
    kind: Literal["counter", "gauge"]
    help: str
    label: str | None = None
    # The label's known values, reported as 0 until counted: a series that exists from the
    # start lets rate() and dashboards see its first increase.
    values: tuple[str, ...] = ()


class FiguresCollector(Collector):
    """Collects ``figures`` from ``source`` at scrape time: nothing is updated per record
    beyond the totals the service keeps anyway."""

    def __init__(self, source: object, figures: Sequence[Figure]) -> None:
        self.source, self.figures = source, figures

    def collect(self) -> Iterator[Metric]:
        for figure in self.figures:
            family_type = CounterMetricFamily if figure.kind == "counter" else GaugeMetricFamily
            value = getattr(self.source, figure.attribute)
            if figure.label is None:
                yield family_type(figure.name, figure.help, value=float(value))
                continue
            family = family_type(figure.name, figure.help, labels=[figure.label])
            counted = {**dict.fromkeys(figure.values, 0.0), **dict(value)}
            for label, number in sorted(counted.items()):
                family.add_metric([str(label)], float(number))
            yield family


def service_registry(*collectors: Collector) -> CollectorRegistry:
    """A registry of one service's metrics: the process's own (CPU seconds, resident memory,
    open files, start time) and ``collectors``."""
    registry = CollectorRegistry()
    ProcessCollector(registry=registry)
    for collector in collectors:
        registry.register(collector)
    return registry


class HealthServer:
    """Serves ``registry`` and the readiness ``not_ready()`` (None when ready, else why not)."""

    def __init__(self, registry: CollectorRegistry, not_ready: Callable[[], str | None]) -> None:
        self.registry, self.not_ready = registry, not_ready
        self.port: int | None = None
        self._server: ThreadingHTTPServer | None = None

    def serve(self, port: int | None, host: str = "127.0.0.1", option: str = "--metrics-port"
              ) -> bool:
        """Listen on ``port`` (0 or None: not at all); False when it cannot, which is logged
        naming ``option``, the setting that moves it."""
        if not port:
            return False
        handler = _handler(self)
        try:
            server = ThreadingHTTPServer((host, port), handler)
        except OSError as exc:
            log.error("/metrics and /readyz are not served: %s:%d cannot be used (%s); move "
                      "them with %s", host, port, exc.strerror, option)
            return False
        server.daemon_threads = True
        self._server, self.port = server, server.server_address[1]
        threading.Thread(target=server.serve_forever, name="health-http", daemon=True).start()
        return True

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()


def _handler(health: HealthServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
            path = self.path.split("?", 1)[0]
            if path == "/metrics":
                self._answer(200, generate_latest(health.registry), CONTENT_TYPE_LATEST)
            elif path == "/livez":
                self._json(200, {"status": "ok"})
            elif path == "/readyz":
                problem = health.not_ready()
                self._json(503 if problem else 200,
                           {"status": "ready"} if problem is None else
                           {"status": "not ready", "detail": problem})
            else:
                self._json(404, {"detail": f"no {path[:100]!r} here: /metrics, /readyz, /livez"})

        def _json(self, status: int, body: dict[str, str]) -> None:
            self._answer(status, json.dumps(body).encode(), "application/json")

        def _answer(self, status: int, body: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_args: object) -> None:
            pass  # a scrape every few seconds is not news

    return Handler
