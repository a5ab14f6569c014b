"""The reward join's Prometheus metrics: its counts since start and each partition's state
size, read from the worker's totals when scraped (nothing is updated per event)."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from streams.join_shell import WorkerTotals

__all__ = ["JoinCollector"]

_COUNTS = {
    "events": "Events read from events.raw since start",
    "records": "Reward records written since start",
    "late_events": "Events sent to events.late since start (their trajectory was final)",
    "expired_events": "Events sent to events.late since start, past the markers' retention",
    "quarantined": "Records quarantined since start",
}
_STATE = {
    "open_trajectories": "Trajectories not yet final in the partition's state",
    "open_bytes": "Bytes of the open trajectories' state",
    "markers": "Finalisation markers kept (until their retention)",
    "marker_bytes": "Bytes of the markers",
}


class JoinCollector(Collector):
    """Collects from ``totals`` at scrape time, as of each partition's last checkpoint."""

    def __init__(self, totals: WorkerTotals) -> None:
        self.totals = totals

    def collect(self) -> Iterator[Metric]:
        for name, description in _COUNTS.items():
            yield CounterMetricFamily(f"rewardstream_join_{name}", description,
                                      value=getattr(self.totals, name))
        partitions = dict(self.totals.partitions)  # the worker replaces entries, never edits
        state = {name: GaugeMetricFamily(f"rewardstream_join_{name}", description,
                                         labels=["partition"])
                 for name, description in _STATE.items()}
        watermark = GaugeMetricFamily(
            "rewardstream_join_watermark_seconds", "The partition's watermark (event time, "
            "Unix seconds)", labels=["partition"])
        offset = GaugeMetricFamily(
            "rewardstream_join_checkpoint_offset", "The partition's last offset in a completed "
            "checkpoint (the figures here are as of it)", labels=["partition"])
        for partition, figures in sorted(partitions.items()):
            label = [str(partition)]
            for name, gauge in state.items():
                gauge.add_metric(label, figures[name])
            if figures.get("watermark_ms") is not None:
                watermark.add_metric(label, figures["watermark_ms"] / 1000)
            offset.add_metric(label, figures["offset"])
        yield from state.values()
        yield watermark
        yield offset
