"""The monitors' pure path: reward records → event-time windows → detector transitions.

The faust agent and the detector runner do the same steps with Kafka in between; this runs them
in one process, for tests, the benchmark and ``rewardstream monitors replay``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from schemas.metrics import MetricWindow
from schemas.rewards import RewardRecord
from streams.monitors.config import MonitorConfig
from streams.monitors.detectors import MonitorState, Transition, evaluate
from streams.monitors.windows import advance, fold_reward, to_metric_window

__all__ = ["OfflineResult", "run_offline", "windows_from_rewards"]


@dataclass
class OfflineResult:
    windows: int = 0
    trajectories: int = 0
    # (trajectories seen when it happened, transition)
    transitions: list[tuple[int, Transition]] = field(default_factory=list)
    state: MonitorState = field(default_factory=MonitorState)


def _closed(accs: list[dict[str, Any]], config: MonitorConfig) -> list[MetricWindow]:
    return [to_metric_window(acc, "rewards", config.window_s * 1000) for acc in accs]


def windows_from_rewards(
    records: Iterable[RewardRecord], config: MonitorConfig, *, flush: bool = True,
) -> Iterable[tuple[int, MetricWindow]]:
    """(trajectories folded so far, closed window) pairs, in closing order: the windows the
    metrics agent makes of the same records (per org and over the fleet)."""
    state: dict[str, Any] = {}
    window_ms, grace_ms = config.window_s * 1000, config.grace_s * 1000
    count = 0
    for record in records:
        count += 1
        closed = fold_reward(state, record, window_ms=window_ms, grace_ms=grace_ms)
        for window in _closed(closed, config):
            yield count, window
    if flush:
        end = state.get("__watermark__", 0.0) + grace_ms + window_ms
        for window in _closed(advance(state, end, window_ms=window_ms, grace_ms=grace_ms), config):
            yield count, window


def run_offline(records: Iterable[RewardRecord], config: MonitorConfig) -> OfflineResult:
    """Fold records through windows and detectors; every transition with when it happened."""
    result = OfflineResult()
    for count, window in windows_from_rewards(records, config):
        result.windows += 1
        result.trajectories = count
        for transition in evaluate(result.state, window, config):
            result.transitions.append((count, transition))
    return result
