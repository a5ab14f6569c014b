"""Tumbling event-time windows of monitor metrics, as a pure fold.

State is a plain ``MutableMapping[str, Any]`` of JSON-able values, so the faust agent can hand
in a changelog-backed table and tests a dict. Each input adds *contributions* — per metric a
weight and a value — to the window of its event time; the watermark is the largest event time
seen minus the grace period, and windows that end at or before it close and are returned.
Inputs for windows that already closed are late: counted under ``__late__`` and dropped.

Each organisation has its own watermark beside the fleet's (as in the reward join): one org's
records, however far ahead in event time, close only its own windows and the fleet's, never
another org's. An org that has gone quiet follows the fleet's watermark
:data:`~streams.join.ORG_IDLE_LAG_MS` behind, so its last windows still close.

An input may come twice (the reward join and ingest are at-least-once; a repeat is identical).
Given its ``record_id`` (a reward record's key, an event's id), a repeat is counted under
``__repeated__`` and not folded again. Ids are remembered only while the window they were
folded into is open, so the memory is bounded by the open windows; a repeat that comes after
its window closed is late, and dropped as such.
"""

from __future__ import annotations

import bisect
import json
import math
from collections.abc import Iterable, MutableMapping
from datetime import UTC, datetime
from typing import Any

from schemas.metrics import (
    COMPONENT_METRIC_PREFIX,
    LATENCY_BUCKET_BOUNDS_MS,
    MetricStat,
    MetricWindow,
    WindowScope,
    histogram_quantile,
)
from schemas.rewards import RewardRecord, Signal, reward_record_key
from streams.join import ORG_IDLE_LAG_MS

__all__ = [
    "ALL",
    "WindowKey",
    "advance",
    "fold_in",
    "fold_reward",
    "ingest_contributions",
    "ingest_window_keys",
    "reward_contributions",
    "reward_event_time_ms",
    "reward_record_id",
    "reward_window_keys",
    "to_metric_window",
]

ALL = "*"
WindowKey = tuple[str, str, str]  # (checkpoint_id, arm, org_id)
Contributions = dict[str, tuple[float, float]]  # metric → (weight, value)

_WATERMARK = "__watermark__"
_ORG_WATERMARK = "__watermark__|"  # + org id
_OPEN = "__open__"
_LATE = "__late__"
_REPEATED = "__repeated__"
_SEEN = "__seen__|"  # + record id -> [start of the window it was folded into, its org]


def _signal(signals: dict[str, float], name: str) -> float:
    return float(signals.get(name, 0.0))


def reward_contributions(record: RewardRecord) -> Contributions:
    """What one reward record adds to its window (see ``schemas.metrics.METRIC_DESCRIPTIONS``)."""
    s = record.signals
    proposed = _signal(s, Signal.EDITS_PROPOSED)
    kept = _signal(s, Signal.KEPT_FRACTION) * proposed  # the fraction is of proposed edits
    latency_ms = _signal(s, Signal.LATENCY_MS_MEAN)
    on_policy = sum(1 for sample in record.samples if sample.checkpoint_id == record.checkpoint_id)
    out: Contributions = {
        "edit_rate": (1.0, float(proposed > 0)),
        "clarification_rate": (1.0, float(_signal(s, Signal.CLARIFICATIONS) > 0)),
        "unambiguous_clarification_rate":
            (1.0, float(_signal(s, Signal.CLARIFICATIONS_UNAMBIGUOUS) > 0)),
        "broken_call_trajectory_rate": (1.0, float(_signal(s, Signal.BROKEN_TOOL_CALLS) > 0)),
        "broken_tool_call_rate":
            (_signal(s, Signal.TOOL_CALLS), _signal(s, Signal.BROKEN_TOOL_CALLS)),
        "dissatisfied_followup_rate":
            (1.0, float(_signal(s, Signal.DISSATISFIED_FOLLOWUPS) > 0)),
        "kept_edit_rate": (proposed, kept),
        "kept_edits": (1.0, kept),
        "latency_ms": (1.0, latency_ms),
        "log_latency": (1.0, math.log(max(latency_ms, 1.0))),
        "ttft_ms": (1.0, _signal(s, Signal.TTFT_MS_MEAN)),
        "reward": (1.0, record.total),
        "on_policy_fraction": (float(len(record.samples)), float(on_policy)),
        "turns": (1.0, _signal(s, Signal.TURNS)),
    }
    for name, value in record.components.items():
        out[COMPONENT_METRIC_PREFIX + name] = (1.0, value)
    return out


def ingest_contributions(dead_letter: bool) -> Contributions:
    """One accepted event (counts towards volume) or one rejected event."""
    if dead_letter:
        return {"dead_letter_rate": (1.0, 1.0)}
    return {"ingest_events": (1.0, 1.0), "dead_letter_rate": (1.0, 0.0)}


def reward_event_time_ms(record: RewardRecord) -> float:
    """A trajectory counts at its end; unfinished ones at the watermark that finalised them."""
    return (record.ended_at or record.finalized_at).timestamp() * 1000


def reward_record_id(record: RewardRecord) -> str:
    """What makes a reward record itself: its key (org, trajectory and spec version)."""
    return reward_record_key(record.org_id, record.trajectory_id, record.spec_version).decode()


def reward_window_keys(record: RewardRecord) -> list[WindowKey]:
    """A reward record counts in its org's window and in the fleet's (``*``)."""
    fleet = (record.checkpoint_id, record.arm, ALL)
    if record.org_id is None:
        return [fleet]
    return [(record.checkpoint_id, record.arm, record.org_id), fleet]


def ingest_window_keys(org_id: str | None, checkpoint_id: str | None = None,
                       arm: str = ALL) -> list[WindowKey]:
    """An ingested event counts for all traffic, for its org's traffic and (when accepted, so
    its checkpoint is known) for its checkpoint and arm over the fleet."""
    keys = [(ALL, ALL, ALL)]
    if org_id:
        keys.append((ALL, ALL, org_id))
    if checkpoint_id is not None:
        keys.append((checkpoint_id, arm, ALL))
    return keys


def _storage_key(start_ms: int, key: WindowKey) -> str:
    # JSON, not a joined string: ids may hold any character, and two keys must never meet.
    return f"w|{start_ms}|{json.dumps(key)}"


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
    latency_ms: float | None = None, secondary: bool = False, record_id: str | None = None,
) -> list[dict[str, Any]]:
    """Add one input to the window of each key; returns the windows this closes, oldest first.

    The input's org is the org its keys name (the fleet's keys name ``ALL``); a key's window is
    late by the watermark of the key's org. ``latency_ms`` marks a trajectory: it counts one
    trajectory and goes to the histogram. A ``secondary`` input (dead letters beside accepted
    events) does not move a watermark, and when late it counts in the oldest open window
    instead of being dropped: only its count matters, and two topics read side by side do not
    arrive in time order.
    """
    keys = list(keys)
    org = next((key[2] for key in keys if key[2] != ALL), ALL)
    if secondary:
        event_time_ms = max(event_time_ms, state.get(_WATERMARK, -math.inf) - grace_ms)
    start_ms = int(event_time_ms // window_ms) * window_ms
    watermarks = _Watermarks(state, grace_ms)
    on_time = [key for key in keys if start_ms + window_ms > watermarks.of(key[2])]
    if len(on_time) < len(keys):
        state[_LATE] = state.get(_LATE, 0) + 1
    if not on_time:
        return []
    if record_id is not None:
        if state.get(_SEEN + record_id) is not None:
            state[_REPEATED] = state.get(_REPEATED, 0) + 1
            return []
        state[_SEEN + record_id] = [start_ms, org]
    open_keys = list(state.get(_OPEN, []))
    for key in on_time:
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
    return _advance(state, event_time_ms, [org], window_ms=window_ms, grace_ms=grace_ms)


def fold_reward(state: MutableMapping[str, Any], record: RewardRecord, *, window_ms: int,
                grace_ms: int) -> list[dict[str, Any]]:
    """:func:`fold_in` of one reward record: its keys, end time, contributions, latency and id."""
    return fold_in(state, reward_window_keys(record), reward_event_time_ms(record),
                   reward_contributions(record), window_ms=window_ms, grace_ms=grace_ms,
                   latency_ms=record.signals.get(Signal.LATENCY_MS_MEAN, 0.0),
                   record_id=reward_record_id(record))


def advance(
    state: MutableMapping[str, Any], max_event_time_ms: float, *, window_ms: int, grace_ms: int,
) -> list[dict[str, Any]]:
    """Move every watermark (the fleet's and each org's) to ``max_event_time_ms − grace`` and
    close the windows they pass: a flush at the end of a log.

    The all-checkpoint keys (``ALL``) are contiguous: empty windows fill their gaps, so a quiet
    period shows up as zero volume rather than as nothing.
    """
    orgs = [k[len(_ORG_WATERMARK):] for k in state if k.startswith(_ORG_WATERMARK)]
    return _advance(state, max_event_time_ms, orgs, window_ms=window_ms, grace_ms=grace_ms)


class _Watermarks:
    """The watermarks of one state, less the grace: the fleet's, and each org's (never more
    than :data:`ORG_IDLE_LAG_MS` behind the fleet's)."""

    def __init__(self, state: MutableMapping[str, Any], grace_ms: int) -> None:
        self.state, self.grace_ms = state, grace_ms
        self.fleet_ms = state.get(_WATERMARK, -math.inf)
        self._orgs: dict[str, float] = {}

    def of(self, org: str) -> float:
        if org == ALL:
            return self.fleet_ms - self.grace_ms
        if org not in self._orgs:
            own = self.state.get(_ORG_WATERMARK + org, -math.inf)
            self._orgs[org] = max(own, self.fleet_ms - ORG_IDLE_LAG_MS) - self.grace_ms
        return self._orgs[org]


def _advance(
    state: MutableMapping[str, Any], max_event_time_ms: float, orgs: list[str], *,
    window_ms: int, grace_ms: int,
) -> list[dict[str, Any]]:
    """Move the fleet's watermark and those of ``orgs`` to ``max_event_time_ms``; close the
    windows each key's watermark passes."""
    state[_WATERMARK] = max(state.get(_WATERMARK, -math.inf), max_event_time_ms)
    for org in orgs:
        if org != ALL:
            key = _ORG_WATERMARK + org
            state[key] = max(state.get(key, -math.inf), max_event_time_ms)
    watermarks = _Watermarks(state, grace_ms)
    still_open, closed = [], []
    for skey in state.get(_OPEN, []):
        acc = state[skey]
        if acc["start_ms"] + window_ms <= watermarks.of(acc["key"][2]):
            closed.append(acc)
            del state[skey]
        else:
            still_open.append(skey)
    state[_OPEN] = still_open
    if closed:
        for skey in [k for k in state if k.startswith(_SEEN)]:
            start_ms, org = state[skey]
            if start_ms + window_ms <= watermarks.of(org):
                del state[skey]  # its window closed: a repeat now is late anyway
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
            values[label] = histogram_quantile(acc["hist"], q)
    checkpoint_id, arm, org_id = acc["key"]
    return MetricWindow(
        scope=scope, window_start=_utc(acc["start_ms"]),
        window_end=_utc(acc["start_ms"] + window_ms), checkpoint_id=checkpoint_id, arm=arm,
        org_id=org_id, partition=partition, trajectories=acc["trajectories"], stats=stats,
        latency_histogram=acc["hist"], values=values,
    )
