"""A key's own past as a baseline: its earlier windows, held out for a gap, pooled over a span.

A drift under one long-lived checkpoint never meets a parent to compare with; it is seen against
the same key's earlier windows instead. Each window joins the baseline once it ended at least
``gap_s`` before the window under test (the most recent stretch, where a drift first shows, is
never its own baseline), and leaves it ``span_s`` later: by default the last hour is tested
against the previous day.

Windows are pooled into buckets of ``bucket_s`` (a quarter of the gap, at least one window), so
the memory per key is a bounded number of buckets, and the baseline's edges move a bucket at a
time.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from schemas.metrics import MetricStat

__all__ = ["TrailingBaseline", "pool"]


def pool(into: dict[str, MetricStat], stats: dict[str, MetricStat]) -> None:
    """Add ``stats`` to ``into``, metric by metric."""
    for name, stat in stats.items():
        into[name] = into[name] + stat if name in into else stat


@dataclass
class _Bucket:
    stats: dict[str, MetricStat] = field(default_factory=dict)
    windows: int = 0


@dataclass
class TrailingBaseline:
    gap_s: float
    span_s: float
    window_s: float
    buckets: dict[int, _Bucket] = field(default_factory=dict)  # bucket index → pooled windows
    # The pooled baseline of the eligible bucket range last asked for, and that range.
    _cached: tuple[tuple[int, int], dict[str, MetricStat], int] | None = None

    @property
    def bucket_s(self) -> float:
        return max(self.window_s, self.gap_s / 4)

    def _eligible(self, at_s: float) -> tuple[int, int]:
        """Indices [first, last) of the buckets wholly inside (at − gap − span, at − gap]."""
        size = self.bucket_s
        last = int((at_s - self.gap_s) // size)  # buckets before this one end by at − gap
        first = -int(-(at_s - self.gap_s - self.span_s) // size)  # ceil: start after the span
        return first, last

    def add(self, end_s: float, stats: dict[str, MetricStat]) -> None:
        """A window that ended at ``end_s`` (seconds) joins the buckets."""
        index = int((end_s - 1e-9) // self.bucket_s)
        bucket = self.buckets.setdefault(index, _Bucket())
        pool(bucket.stats, stats)
        bucket.windows += 1
        if self._cached is not None and self._cached[0][0] <= index < self._cached[0][1]:
            self._cached = None  # a late window in the pooled range

    def baseline(self, at_s: float) -> tuple[dict[str, MetricStat], int]:
        """The pooled stats and window count of the baseline for a window ending at ``at_s``;
        buckets too old for any later window are dropped."""
        first, last = self._eligible(at_s)
        for index in [i for i in self.buckets if i < first]:
            del self.buckets[index]
        if self._cached is None or self._cached[0] != (first, last):
            pooled: dict[str, MetricStat] = {}
            windows = 0
            for index, bucket in self.buckets.items():
                if first <= index < last:
                    pool(pooled, bucket.stats)
                    windows += bucket.windows
            self._cached = ((first, last), pooled, windows)
        return self._cached[1], self._cached[2]

    def describe(self) -> str:
        """``the same key 1 h–25 h before``: what the baseline is, for the evidence."""
        return f"its own windows {_duration(self.gap_s)}–{_duration(self.gap_s + self.span_s)} " \
               "before"


def _duration(seconds: float) -> str:
    if seconds >= 3600 and seconds % 3600 == 0:
        return f"{seconds / 3600:g} h"
    if seconds >= 60 and seconds % 60 == 0:
        return f"{seconds / 60:g} min"
    return f"{seconds:g} s"
