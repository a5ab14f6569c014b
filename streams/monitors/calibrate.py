"""How often the detectors alarm on stable traffic, and how soon they catch each failure mode:
simulated traffic (``simulate``) through the pure path (``offline``) under one monitor config.

* **Stable**: ``checkpoints`` generations in turn, each serving ``per_checkpoint`` trajectories
  of the same healthy policy. Every alert is false; counted per detector, baseline and severity
  against the windows tested (each reward window is tested once against its parent and once
  against its own past, per key: the fleet and each org). Given recorded reward records (a
  healthy demo run's), the stable traffic is drawn from them instead, with replacement and
  stamped anew at ``rate_per_s``: the same test on a real policy's distributions.
* **Failure modes**: each profile of ``simulate.PROFILES`` after ``per_checkpoint`` healthy
  trajectories, as a new checkpoint (compared with its parent) and as a drift of the same
  checkpoint (compared with its own past): the trajectories after the change until each
  detector first fired over the fleet.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Literal

from schemas.rewards import RewardRecord
from streams.monitors.config import MonitorConfig
from streams.monitors.offline import run_offline
from streams.monitors.simulate import PROFILES, Segment, simulate

__all__ = ["Calibration", "Mode", "calibrate", "describe", "resampled"]

Mode = Literal["new checkpoint", "drift"]
HEALTHY = PROFILES["healthy"]


@dataclass
class Calibration:
    trajectories: int = 0  # of stable traffic
    windows: int = 0  # reward windows of stable traffic (all keys)
    false_alarms: Counter[tuple[str, str, str]] = field(default_factory=Counter)
    # (profile, mode) → detector → (severity, trajectories after the change) per seed it fired
    delays: dict[tuple[str, Mode], dict[str, list[tuple[str, int]]]] = field(default_factory=dict)
    seeds: int = 0
    runs_alarmed: int = 0  # stable runs with at least one critical alert


def _first_fleet_alerts(segments: list[Segment], config: MonitorConfig, seed: int,
                        rate_per_s: float, after: int) -> dict[str, tuple[str, int]]:
    result = run_offline(simulate(segments, seed=seed, rate_per_s=rate_per_s), config)
    first: dict[str, tuple[str, int]] = {}
    for count, t in result.transitions:
        if t.kind == "fired" and t.alert.labels["org"] == "*" and count > after:
            first.setdefault(t.alert.detector, (t.alert.severity, count - after))
    return first


def resampled(pool: Sequence[RewardRecord], checkpoints: int, per_checkpoint: int,
              rate_per_s: float, seed: int) -> Iterator[RewardRecord]:
    """Stable traffic from recorded trajectories: each checkpoint in turn serves
    ``per_checkpoint`` of them, drawn with replacement, each a trajectory of its own that ends
    a Poisson step after the last."""
    rng = random.Random(seed)
    clock = datetime(2026, 1, 1, tzinfo=UTC)
    for index in range(checkpoints * per_checkpoint):
        clock += timedelta(seconds=rng.expovariate(rate_per_s))
        yield rng.choice(pool).model_copy(update={
            "trajectory_id": f"resampled-{index}", "checkpoint_id": f"c{index // per_checkpoint}",
            "arm": "default", "ended_at": clock, "finalized_at": clock})


def calibrate(config: MonitorConfig, *, seeds: int = 5, checkpoints: int = 5,
              per_checkpoint: int = 12000, rate_per_s: float = 2.0,
              profiles: tuple[str, ...] = (), pool: Sequence[RewardRecord] = ()) -> Calibration:
    """Stable traffic, then the failure modes (every profile but ``healthy`` unless named; none
    when the stable traffic is drawn from a ``pool`` of recorded trajectories)."""
    out = Calibration(seeds=seeds)
    for seed in range(seeds):
        stable = [Segment({"default": (f"c{i}", HEALTHY)}, per_checkpoint)
                  for i in range(checkpoints)]
        records = (resampled(pool, checkpoints, per_checkpoint, rate_per_s, 1000 + seed) if pool
                   else simulate(stable, seed=1000 + seed, rate_per_s=rate_per_s))
        result = run_offline(records, config)
        out.trajectories += result.trajectories
        out.windows += result.windows
        alarms = [t.alert for _, t in result.transitions if t.kind == "fired"]
        out.false_alarms.update((a.detector, a.labels["baseline"], a.severity) for a in alarms)
        out.runs_alarmed += any(a.severity == "critical" for a in alarms)
    for name in () if pool else profiles or tuple(p for p in PROFILES if p != "healthy"):
        for mode in ("new checkpoint", "drift"):
            changed = "c1" if mode == "new checkpoint" else "c0"
            segments = [Segment({"default": ("c0", HEALTHY)}, per_checkpoint),
                        Segment({"default": (changed, PROFILES[name])}, per_checkpoint)]
            fired = out.delays.setdefault((name, mode), {})
            for seed in range(seeds):
                for detector, first in _first_fleet_alerts(segments, config, seed, rate_per_s,
                                                           per_checkpoint).items():
                    fired.setdefault(detector, []).append(first)
    return out


def describe(result: Calibration) -> list[str]:
    """The calibration as lines of text: false alarms, then each failure mode's detectors."""
    lines = [f"stable traffic: {result.trajectories:,} trajectories in {result.windows:,} reward "
             f"windows (all keys; each tested against its parent and its own past), "
             f"{result.seeds} seeds"]
    runs_alarmed = result.runs_alarmed
    lines.append(f"  runs with a false critical alert: {runs_alarmed}/{result.seeds}")
    if not result.false_alarms:
        lines.append("  false alarms: none")
    for (detector, baseline, severity), count in sorted(result.false_alarms.items()):
        lines.append(f"  false alarm: {detector} against its "
                     f"{'own past' if baseline == 'trailing' else baseline} ({severity}): "
                     f"{count}, {1000 * count / max(result.windows, 1):.2f} per 1,000 windows")
    lines.append("failure modes: trajectories after the change until each detector first fired "
                 "over the fleet (median, range; seeds it fired in)")
    for (profile, mode), fired in result.delays.items():
        lines.append(f"  {profile} as a {mode}:" + ("" if fired else " nothing fired"))
        for detector, firsts in sorted(fired.items(), key=lambda kv: sorted(d for _, d in kv[1])):
            delays = sorted(delay for _, delay in firsts)
            lines.append(f"    {detector} ({firsts[0][0]}): {delays[len(delays) // 2]:,} "
                         f"[{delays[0]:,}–{delays[-1]:,}], {len(delays)}/{result.seeds} seeds")
    return lines
