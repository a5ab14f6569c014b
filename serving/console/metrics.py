"""The console's Prometheus metrics: figures it folds from the log, for scraping and alerting."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

__all__ = ["console_registry"]


class _QuarantineCollector(Collector):
    def __init__(self, view: Callable[[], dict[str, Any]]) -> None:
        self._view = view

    def collect(self) -> Iterator[CounterMetricFamily]:
        family = CounterMetricFamily(
            "rewardstream_quarantined_records",
            "Records a consumer found on a topic and could not use (distinct records, read "
            "from the quarantine topic)", labels=["consumer", "source_topic"])
        for row in self._view()["by_consumer"]:
            family.add_metric([row["consumer"], row["source_topic"]], row["records"])
        yield family


def console_registry(quarantine_view: Callable[[], dict[str, Any]]) -> CollectorRegistry:
    registry = CollectorRegistry()
    registry.register(_QuarantineCollector(quarantine_view))
    return registry
