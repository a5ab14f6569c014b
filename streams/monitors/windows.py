"""Tumbling event-time windows of monitor metrics, as a pure fold.

State is a plain ``MutableMapping[str, Any]`` of JSON-able values, so the faust agent can hand
in a changelog-backed table and tests a dict. Each input adds *contributions* — per metric a
weight and a value — to the window of its event time; the watermark is the largest event time
seen minus the grace period, and windows that end at or before it close and are returned.
Inputs for windows that already closed are late: counted under ``__late__`` and dropped.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, MutableMapping
from datetime import UTC, datetime
from typing import Any

from schemas.metrics import LATENCY_BUCKET_BOUNDS_MS, MetricStat, MetricWindow, WindowScope
from schemas.rewards import RewardRecord
from streams.monitors.stats import histogram_quantile

__all__ = [
    "ALL",
    "WindowKey",
    "advance",
    "fold_in",
    "ingest_contributions",
    "reward_contributions",
    "reward_event_time_ms",
    "to_metric_window",
]

ALL = "*"
WindowKey = tuple[str, str, str]  # (checkpoint_id, arm, org_id)
Contributions = dict[str, tuple[float, float]]  # metric → (weight, value)

_WATERMARK = "__watermark__"
_OPEN = "__open__"
_LATE = "__late__"


def _signal(signals: dict[str, float], name: str) -> float:
    return float(signals.get(name, 0.0))


def reward_contributions(record: RewardRecord) -> Contributions:
    """What one reward record adds to its window (see ``schemas.metrics.METRIC_DESCRIPTIONS``)."""
    s = record.signals
    proposed = _signal(s, "edits_proposed")
    kept = _signal(s, "kept_fraction") * _signal(s, "edits_accepted")
    latency_ms = _signal(s, "latency_ms_mean")
    on_policy = sum(1 for sample in record.samples if sample.checkpoint_id == record.checkpoint_id)
    out: Contributions = {
        "edit_rate": (1.0, float(proposed > 0)),
        "clarification_rate": (1.0, float(_signal(s, "clarifications") > 0)),
        "unambiguous_clarification_rate": (1.0, float(_signal(s, "clarifications_unambiguous") > 0)),
        "broken_call_trajectory_rate": (1.0, float(_signal(s, "broken_tool_calls") > 0)),
        "broken_tool_call_rate": (_signal(s, "tool_calls"), _signal(s, "broken_tool_calls")),
        "dissatisfied_followup_rate": (1.0, float(_signal(s, "dissatisfied_followups") > 0)),
        "kept_edit_rate": (proposed, kept),
        "kept_edits": (1.0, kept),
        "latency_ms": (1.0, latency_ms),
        "log_latency": (1.0, math.log(max(latency_ms, 1.0))),
        "ttft_ms": (1.0, _signal(s, "ttft_ms_mean")),
        "reward": (1.0, record.total),
        "on_policy_fraction": (float(len(record.samples)), float(on_policy)),
        "turns": (1.0, _signal(s, "turns")),
    }
    for name, value in record.components.items():
        out[f"reward.{name}"] = (1.0, value)
    return out


def ingest_contributions(dead_letter: bool) -> Contributions:
    """One accepted event (counts towards volume) or one rejected event."""
    if dead_letter:
        return {"dead_letter_rate": (1.0, 1.0)}
    return {"ingest_events": (1.0, 1.0), "dead_letter_rate": (1.0, 0.0)}


def reward_event_time_ms(record: RewardRecord) -> float:
    """A trajectory counts at its end; unfinished ones at the watermark that finalised them."""
    return (record.ended_at or record.finalized_at).timestamp() * 1000


def _storage_key(start_ms: int, key: WindowKey) -> str:
    return f"w|{start_ms}|{key[0]}|{key[1]}|{key[2]}"


def _new_acc(start_ms: int, key: WindowKey) -> dict[str, Any]:
    return {"start_ms": start_ms, "key": list(key), "trajectories": 0, "stats": {}, "hist": []}


def _add(acc: dict[str, Any], contributions: Contributions, latency_ms: float | None) -> None:
    stats = acc["stats"]
    for name, (weight, value) in contributions.items():
        n, total, squares = stats.get(name, (0.0, 0.0, 0.0))
        stats[name] = [n + weight, total + value, squares + value * value]
    if latency_ms is not None:
        acc["trajectories"] += 1
        hist = acc["hist"] or [0] * (len(LATENCY_BUCKET_BOUNDS_MS) + 1)
        hist[bisect.bisect_left(LATENCY_BUCKET_BOUNDS_MS, latency_ms)] += 1
        acc["hist"] = hist


def fold_in(
    state: MutableMapping[str, Any], keys: Iterable[WindowKey], event_time_ms: float,
    contributions: Contributions, *, window_ms: int, grace_ms: int,
    latency_ms: float | None = None, secondary: bool = False,
) -> list[dict[str, Any]]:
    """Add one input to the window of each key; returns the windows this closes, oldest first.

    ``latency_ms`` marks a trajectory: it counts one trajectory and goes to the histogram.
    A ``secondary`` input (dead letters beside accepted events) does not move the watermark,
    and when late it counts in the oldest open window instead of being dropped: only its
    count matters, and two topics read side by side do not arrive in time order.
    """
    watermark_ms = state.get(_WATERMARK, -math.inf) - grace_ms
    if secondary:
        event_time_ms = max(event_time_ms, watermark_ms)
    start_ms = int(event_time_ms // window_ms) * window_ms
    if start_ms + window_ms <= watermark_ms:
        state[_LATE] = state.get(_LATE, 0) + 1
        return []
    open_keys = list(state.get(_OPEN, []))
    for key in keys:
        skey = _storage_key(start_ms, key)
        acc = state.get(skey)
        if acc is None:
            acc = _new_acc(start_ms, key)
            open_keys.append(skey)
        else:
            acc = {**acc, "stats": dict(acc["stats"]), "hist": list(acc["hist"])}
        _add(acc, contributions, latency_ms)
        state[skey] = acc
    state[_OPEN] = open_keys
    if secondary:
        return []
    return advance(state, max(state.get(_WATERMARK, -math.inf), event_time_ms),
                   window_ms=window_ms, grace_ms=grace_ms)


def advance(
    state: MutableMapping[str, Any], max_event_time_ms: float, *, window_ms: int, grace_ms: int,
) -> list[dict[str, Any]]:
    """Move the watermark to ``max_event_time_ms − grace`` and close the windows it passes.

    The all-checkpoint key (``ALL``) is contiguous: empty windows fill its gaps, so a quiet
    period shows up as zero volume rather than as nothing.
    """
    state[_WATERMARK] = max(state.get(_WATERMARK, -math.inf), max_event_time_ms)
    watermark_ms = state[_WATERMARK] - grace_ms
    still_open, closed = [], []
    for skey in state.get(_OPEN, []):
        acc = state[skey]
        if acc["start_ms"] + window_ms <= watermark_ms:
            closed.append(acc)
            del state[skey]
        else:
            still_open.append(skey)
    state[_OPEN] = still_open
    closed.sort(key=lambda acc: (acc["start_ms"], acc["key"]))
    return _fill_gaps(state, closed, window_ms)


def _fill_gaps(
    state: MutableMapping[str, Any], closed: list[dict[str, Any]], window_ms: int,
) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for acc in closed:
        key: WindowKey = (acc["key"][0], acc["key"][1], acc["key"][2])
        if key[0] == ALL:
            last_key = "__last__|" + "|".join(key)
            last = state.get(last_key)
            if last is not None:
                out.extend(_new_acc(start, key)
                           for start in range(last + window_ms, acc["start_ms"], window_ms))
            state[last_key] = acc["start_ms"]
        out.append(acc)
    return out


def _utc(ms: float) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


def to_metric_window(
    acc: dict[str, Any], scope: WindowScope, window_ms: int, partition: int = 0,
) -> MetricWindow:
    """The wire record of a closed window, with headline values derived from its statistics."""
    stats = {name: MetricStat(n=v[0], sum=v[1], sumsq=v[2]) for name, v in acc["stats"].items()}
    values = {name: stat.mean for name, stat in stats.items() if stat.n > 0}
    if scope == "ingest":
        values["ingest_events"] = stats["ingest_events"].sum if "ingest_events" in stats else 0.0
    if acc["hist"]:
        for label, q in (("latency_p50_ms", 0.5), ("latency_p95_ms", 0.95)):
            values[label] = histogram_quantile(acc["hist"], LATENCY_BUCKET_BOUNDS_MS, q)
    checkpoint_id, arm, org_id = acc["key"]
    return MetricWindow(
        scope=scope, window_start=_utc(acc["start_ms"]),
        window_end=_utc(acc["start_ms"] + window_ms), checkpoint_id=checkpoint_id, arm=arm,
        org_id=org_id, partition=partition, trajectories=acc["trajectories"], stats=stats,
        latency_histogram=acc["hist"], values=values,
    )
