"""Windowed monitor metrics, on the ``metrics`` topic, keyed by ``checkpoint/arm``.

A window is a tumbling event-time interval of one (checkpoint, arm, org) key. It carries the
additive sufficient statistics of each metric (weight ``n``, ``sum``, ``sumsq``), so windows of
the same key and interval (for instance, partial windows from several source partitions) merge
by addition, and detectors can test means and rates without the raw records.
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict

__all__ = [
    "LATENCY_BUCKET_BOUNDS_MS",
    "METRIC_DESCRIPTIONS",
    "MetricStat",
    "MetricWindow",
    "WindowScope",
    "metric_key",
]

WindowScope = Literal["rewards", "ingest"]

# Upper bounds of the latency histogram buckets: 1 ms to ~17 min, each 20% wider than the last,
# so a percentile read from the histogram is within 20% of the exact one. The last bucket is open.
LATENCY_BUCKET_BOUNDS_MS: tuple[float, ...] = tuple(1.2**i for i in range(77))

METRIC_DESCRIPTIONS: dict[str, str] = {
    "edit_rate": "share of trajectories that proposed at least one edit",
    "clarification_rate": "share of trajectories that asked at least one clarifying question",
    "unambiguous_clarification_rate": "share of trajectories that asked on an unambiguous request",
    "broken_call_trajectory_rate": "share of trajectories with at least one broken tool call",
    "broken_tool_call_rate": "broken tool calls per tool call",
    "dissatisfied_followup_rate": "share of trajectories with a dissatisfied follow-up",
    "kept_edit_rate": "kept edits per proposed edit",
    "kept_edits": "edits kept at the horizon, per trajectory",
    "latency_ms": "mean completion latency per trajectory (ms)",
    "log_latency": "natural log of the per-trajectory mean latency (ms)",
    "ttft_ms": "mean time to first token per trajectory (ms)",
    "reward": "total reward per trajectory",
    "on_policy_fraction": "share of samples served by the checkpoint the trajectory is filed under",
    "turns": "turns per trajectory",
    "ingest_events": "accepted events (weight = count)",
    "dead_letter_rate": "rejected events per received event",
}


class MetricStat(BaseModel):
    """Additive sufficient statistics: weight ``n``, ``sum`` of values, ``sumsq`` of squares."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    n: float = 0.0
    sum: float = 0.0
    sumsq: float = 0.0

    @property
    def mean(self) -> float:
        return self.sum / self.n if self.n > 0 else math.nan

    @property
    def variance(self) -> float:
        """Sample variance of per-unit values (meaningful for unit-weight statistics)."""
        if self.n < 2:
            return math.nan
        return max(0.0, (self.sumsq - self.sum * self.sum / self.n) / (self.n - 1))

    def __add__(self, other: MetricStat) -> MetricStat:
        return MetricStat(n=self.n + other.n, sum=self.sum + other.sum,
                          sumsq=self.sumsq + other.sumsq)


class MetricWindow(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    scope: WindowScope
    window_start: AwareDatetime  # event time, inclusive
    window_end: AwareDatetime  # event time, exclusive
    checkpoint_id: str  # "*" for the all-checkpoint ingest window
    arm: str
    org_id: str = "*"  # "*" unless metrics are split per organisation
    partition: int = 0  # source partition: windows from several partitions add up
    trajectories: int = 0
    stats: dict[str, MetricStat] = {}
    latency_histogram: list[int] = []  # counts per LATENCY_BUCKET_BOUNDS_MS bucket (+1 open)
    # Headline values derived from the stats (means, rates, p50/p95), for charts and tables.
    values: dict[str, float] = {}


def metric_key(checkpoint_id: str, arm: str) -> bytes:
    """The Kafka key of a metric window."""
    return f"{checkpoint_id}/{arm}".encode()
