"""The steady window of a ``bench streams`` contender and the figures taken from it (pure).

A contender takes a :class:`Sample` (events done so far, wall clock, the process's CPU time)
now and then while it works: after each batch a bare loop fetched, every few thousand records
and at each checkpoint of the join. The steady window runs from the first sample at or past
the warm-up prefix to the last sample taken before the log's last event, so start-up (client
start, group join, state recovery, the first fetches) and the end (the join's last checkpoint
and the wait for it, a loop's last poll) are both left out, and what is left is steady work.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["CONTENDERS", "Sample", "Samples", "run_figures", "steady_figures", "steady_window",
           "summary"]

# Every contender of a run, the join first; the floor is the bar the join's CPU is held to.
CONTENDERS = ("join", "floor", "aiokafka", "quix_bare")


@dataclass(frozen=True)
class Sample:
    events: int
    wall_s: float
    cpu_s: float


@dataclass
class Samples:
    """Samples of the calling process: ``time.process_time`` counts every thread of it
    (librdkafka's and RocksDB's included), so it is the process's CPU time, not the loop's."""

    taken: list[Sample] = field(default_factory=list)

    def take(self, events: int) -> None:
        self.taken.append(Sample(events, time.monotonic(), time.process_time()))


def steady_window(samples: Sequence[Sample], warmup_events: int, total: int
                  ) -> tuple[Sample, Sample]:
    """The first sample at or past ``warmup_events`` and the last before event ``total``."""
    inside = [s for s in samples if warmup_events <= s.events < total]
    if len(inside) < 2 or inside[-1].events == inside[0].events:
        raise ValueError(f"no steady window between event {warmup_events} and {total} in "
                         f"{len(samples)} samples; give the run more events")
    return inside[0], inside[-1]


def steady_figures(windows: Sequence[tuple[Sample, Sample]]) -> dict[str, Any]:
    """Events, wall s, CPU s, CPU µs per event and events/s over steady windows: one window
    per process (the join's workers of a group each have one). Events and CPU add up; the wall
    time runs from the earliest window's start to the latest's end."""
    events = sum(last.events - first.events for first, last in windows)
    cpu_s = sum(last.cpu_s - first.cpu_s for first, last in windows)
    wall_s = (max(last.wall_s for _, last in windows)
              - min(first.wall_s for first, _ in windows))
    return {"events": events, "wall_s": round(wall_s, 3), "cpu_s": round(cpu_s, 3),
            "cpu_us_per_event": round(cpu_s / events * 1e6, 2),
            "events_per_s": round(events / wall_s) if wall_s > 0 else 0}


def run_figures(contenders: Mapping[str, dict[str, Any]]) -> dict[str, Any]:
    """One run's ratios. ``floor_to_join_cpu`` is the floor's CPU per event over the join's
    (the goal: at least 1/3, the join within three times the floor); ``join_to_aiokafka_rate``
    is the join's rate over the bare aiokafka loop's, the ratio this bench reported before."""
    join_us = contenders["join"]["cpu_us_per_event"]
    ratios = {f"{name}_to_join_cpu": round(contenders[name]["cpu_us_per_event"] / join_us, 4)
              for name in CONTENDERS[1:] if name in contenders}
    ratios["join_to_aiokafka_rate"] = round(
        contenders["join"]["events_per_s"] / contenders["aiokafka"]["events_per_s"], 4)
    return ratios


def _span(values: Sequence[float]) -> dict[str, float]:
    return {"min": min(values), "max": max(values)}


def summary(runs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Min and max over the runs of each contender's CPU µs per event and events/s, of each
    ratio and of the load average."""
    result: dict[str, Any] = {"runs": len(runs)}
    for name in CONTENDERS:
        if all(name in run["contenders"] for run in runs):
            result[name] = {figure: _span([run["contenders"][name][figure] for run in runs])
                            for figure in ("cpu_us_per_event", "events_per_s")}
    for ratio in runs[0]["ratios"]:
        result[ratio] = _span([run["ratios"][ratio] for run in runs])
    result["load_avg_1m"] = _span([run["load_avg_1m"] for run in runs])
    return result
