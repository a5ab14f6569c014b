"""The console's Prometheus metrics: figures it folds from the log, for scraping and alerting,
beside the process's own and whether the brokers answer it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from infra.health_http import service_registry

if TYPE_CHECKING:
    from serving.console.state import ConsoleState

__all__ = ["console_registry"]

_STATUSES = ("firing", "acknowledged", "resolved")


class _ConsoleCollector(Collector):
    def __init__(self, state: ConsoleState,
                 quarantine_view: Callable[[], dict[str, Any]]) -> None:
        self._state, self._quarantine_view = state, quarantine_view

    def collect(self) -> Iterator[Metric]:
        family = CounterMetricFamily(
            "rewardstream_quarantined_records",
            "Records a consumer found on a topic and could not use (distinct records, read "
            "from the quarantine topic)", labels=["consumer", "source_topic"])
        for row in self._quarantine_view()["by_consumer"]:
            family.add_metric([row["consumer"], row["source_topic"]], row["records"])
        yield family
        alerts = GaugeMetricFamily(
            "rewardstream_console_alerts", "Alerts the console shows, by lifecycle status and "
            "severity (every org's)", labels=["status", "severity"])
        with self._state.lock:
            records = list(self._state.alerts.alerts.values())
        for status in _STATUSES:
            for severity in ("critical", "warning", "info"):
                alerts.add_metric([status, severity], sum(
                    r.status == status and r.alert.severity == severity for r in records))
        yield alerts


def console_registry(state: ConsoleState,
                     quarantine_view: Callable[[], dict[str, Any]]) -> CollectorRegistry:
    return service_registry(state.watch, _ConsoleCollector(state, quarantine_view))
