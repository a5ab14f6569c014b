"""Windowed monitor metrics, on the ``metrics`` topic, keyed by ``checkpoint/arm``.

A window is a tumbling event-time interval of one (checkpoint, arm, org) key. It carries the
additive sufficient statistics of each metric (weight ``n``, ``sum``, ``sumsq``), so windows of
the same key and interval (for instance, partial windows from several source partitions) merge
by addition, and detectors can test means and rates without the raw records.
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, NonNegativeFloat, NonNegativeInt

__all__ = [
    "COMPONENT_METRIC_PREFIX",
    "LATENCY_BUCKET_BOUNDS_MS",
    "METRIC_DESCRIPTIONS",
    "MetricStat",
    "MetricWindow",
    "WindowScope",
    "MetricUnit",
    "histogram_quantile",
    "metric_key",
    "metric_unit",
    "read_window",
    "window_problem",
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
# Beside those, each reward component's value per trajectory: ``reward.<component>``.
COMPONENT_METRIC_PREFIX = "reward."


class MetricStat(BaseModel):
    """Additive sufficient statistics: weight ``n``, ``sum`` of values, ``sumsq`` of squares."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    n: NonNegativeFloat = 0.0  # weights are counts (trajectories, tool calls, edits)
    sum: float = 0.0
    sumsq: NonNegativeFloat = 0.0

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
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    scope: WindowScope
    window_start: AwareDatetime  # event time, inclusive
    window_end: AwareDatetime  # event time, exclusive
    checkpoint_id: str  # "*" for the all-checkpoint ingest window
    arm: str
    org_id: str = "*"  # "*" unless metrics are split per organisation
    partition: NonNegativeInt = 0  # source partition: windows from several partitions add up
    trajectories: NonNegativeInt = 0
    stats: dict[str, MetricStat] = {}
    # Counts per LATENCY_BUCKET_BOUNDS_MS bucket (+1 open).
    latency_histogram: list[NonNegativeInt] = []
    # Headline values derived from the stats (means, rates, p50/p95), for charts and tables.
    values: dict[str, float] = {}


def histogram_quantile(counts: list[int], q: float,
                       bounds: tuple[float, ...] = LATENCY_BUCKET_BOUNDS_MS) -> float:
    """The q-quantile of a bucketed sample, interpolating linearly inside the bucket.

    ``counts[i]`` counts values in (bounds[i-1], bounds[i]]; the last count is the open bucket
    above ``bounds[-1]`` and reports ``bounds[-1]``.
    """
    total = sum(counts)
    if total == 0:
        return math.nan
    rank = q * total
    seen = 0.0
    for i, count in enumerate(counts):
        if count and seen + count >= rank:
            if i >= len(bounds):
                return bounds[-1]
            lower = bounds[i - 1] if i > 0 else 0.0
            return lower + (bounds[i] - lower) * (rank - seen) / count
        seen += count
    return bounds[-1]


# How each metric is read: a share of its weight (0..1), a count per unit (>= 0), or a value.
_RATES = {name for name in METRIC_DESCRIPTIONS if name.endswith("_rate")} | {"on_policy_fraction"}
_COUNTS = {"kept_edits", "turns", "ingest_events"}


MetricUnit = Literal["share", "ms", "log_ms", "count", "value"]


def metric_unit(name: str) -> MetricUnit:
    """How staff read a metric: a ``share`` (a rate, shown in %), milliseconds, the natural log
    of milliseconds (shown as ms again), a ``count``, or a plain ``value`` (the reward and its
    components)."""
    if name in _RATES:
        return "share"
    if name.endswith("_ms"):
        return "ms"
    if name == "log_latency":
        return "log_ms"
    return "count" if name in _COUNTS else "value"


def window_problem(window: MetricWindow) -> str | None:
    """Why a window cannot be folded into statistics (None when it can): a mean that is not a
    finite number, a rate outside 0..1, or a negative count. Folded into a baseline, such a
    window would break every later test of its key (the square root of a negative variance, an
    infinite mean)."""
    for name, stat in window.stats.items():
        if stat.n > 0 and not math.isfinite(stat.mean):
            return f"stats.{name}: its mean (sum {stat.sum:g} over n {stat.n:g}) is not finite"
        if name in _RATES and not 0 <= stat.sum <= stat.n:
            return f"stats.{name}: a rate of {stat.sum:g} in {stat.n:g} is outside 0..1"
        if name in _COUNTS and stat.sum < 0:
            return f"stats.{name}: a count of {stat.sum:g} is negative"
    return None


def read_window(value: bytes | None) -> MetricWindow:
    """A ``metrics`` record as a window statistics can be folded from; raises
    :class:`~schemas.quarantine.UnusableRecord` saying why not."""
    from schemas.quarantine import UnusableRecord, decode_record

    window = decode_record(MetricWindow, value)
    problem = window_problem(window)
    if problem is not None:
        raise UnusableRecord(problem)
    return window


def metric_key(checkpoint_id: str, arm: str) -> bytes:
    """The Kafka key of a metric window."""
    return f"{checkpoint_id}/{arm}".encode()
