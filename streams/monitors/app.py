"""The metrics agents: faust-streaming workers that fold inputs into event-time windows.

Two agents, each a thin shell around ``windows.fold_in``:

* ``rewards`` → windows per (checkpoint, arm) at the trajectory's end time: rates, latency
  percentiles, reward and its components, on-policy fraction.
* ``events.raw`` + ``events.deadletter`` → ingest windows per (checkpoint, arm) and for all
  traffic (``*``): accepted volume and dead-letter rate, by arrival (the Kafka timestamp the
  ingest service stamped). Arrival is the right clock for the health of ingest, and rejected
  events may carry no valid time of their own. Accepted events drive the watermark; a rejected
  event that comes late counts in the oldest open window (``fold_in(secondary=True)``).

Open windows live in changelog-backed faust tables, so a restarted worker resumes them. Rewards
are finalised hours after ingest, so each input has its own watermark. State keys carry the
source partition: with several partitions each folds its own (partial, additive) windows.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, MutableMapping
from typing import Any

import faust

from infra.settings import Settings
from schemas.metrics import MetricWindow, WindowScope, metric_key
from schemas.rewards import RewardRecord
from schemas.topics import topic_name
from streams.monitors.config import MonitorConfig
from streams.monitors.windows import (
    ALL,
    fold_in,
    ingest_contributions,
    reward_contributions,
    reward_event_time_ms,
    to_metric_window,
)

__all__ = ["PartitionView", "create_app", "raw_event_fields"]


class PartitionView(MutableMapping[str, Any]):
    """One source partition's slice of a table: keys are prefixed with the partition."""

    def __init__(self, table: MutableMapping[str, Any], partition: int) -> None:
        self.table, self.prefix = table, f"p{partition}|"

    def __getitem__(self, key: str) -> Any:
        value = self.table.get(self.prefix + key)
        if value is None:
            raise KeyError(key)
        return value

    def __setitem__(self, key: str, value: Any) -> None:
        self.table[self.prefix + key] = value

    def __delitem__(self, key: str) -> None:
        del self.table[self.prefix + key]

    def __iter__(self) -> Iterator[str]:
        return (k[len(self.prefix):] for k in list(self.table) if k.startswith(self.prefix))

    def __len__(self) -> int:
        return sum(1 for _ in self)


def raw_event_fields(value: bytes) -> tuple[str, str] | None:
    """(checkpoint, arm) of a stored event envelope; None if unreadable."""
    try:
        event = json.loads(value)
        return str(event["checkpoint_id"]), str(event.get("arm", "default"))
    except (ValueError, KeyError, TypeError):
        return None


def create_app(settings: Settings, config: MonitorConfig, *, store: str = "memory://") -> faust.App:
    prefix = settings.topic_prefix
    app = faust.App(
        f"{prefix}rewardstream-monitors", broker=f"kafka://{settings.bootstrap_servers}",
        store=store, topic_partitions=settings.topic_partitions, topic_replication_factor=1,
        value_serializer="raw", web_enabled=False,
    )
    window_ms, grace_ms = config.window_s * 1000, config.grace_s * 1000
    metrics = app.topic(topic_name(prefix, "metrics"), key_serializer="raw",
                        value_serializer="raw")
    # Tables serialise keys and values as JSON; window state is plain JSON-able data.
    reward_windows = app.Table("monitor-reward-windows", default=None)
    ingest_windows = app.Table("monitor-ingest-windows", default=None)

    async def publish(closed: list[dict[str, Any]], scope: WindowScope, partition: int) -> None:
        for acc in closed:
            window: MetricWindow = to_metric_window(acc, scope, window_ms, partition)
            await metrics.send(key=metric_key(window.checkpoint_id, window.arm),
                               value=window.model_dump_json().encode())

    @app.agent(app.topic(topic_name(prefix, "rewards"), value_serializer="raw"))
    async def fold_rewards(stream: faust.StreamT) -> None:
        async for event in stream.events():
            record = RewardRecord.model_validate_json(event.value)
            partition = event.message.partition
            closed = fold_in(
                PartitionView(reward_windows, partition),
                [(record.checkpoint_id, record.arm, "*")], reward_event_time_ms(record),
                reward_contributions(record), window_ms=window_ms, grace_ms=grace_ms,
                latency_ms=record.signals.get("latency_ms_mean", 0.0))
            await publish(closed, "rewards", partition)

    deadletter_topic = topic_name(prefix, "events.deadletter")

    @app.agent(app.topic(topic_name(prefix, "events.raw"), deadletter_topic,
                         value_serializer="raw"))
    async def fold_ingest(stream: faust.StreamT) -> None:
        async for event in stream.events():
            message = event.message
            dead = message.topic == deadletter_topic
            fields = None if dead else raw_event_fields(event.value)
            keys = [(ALL, ALL, ALL)]
            if fields is not None:
                keys.append((fields[0], fields[1], "*"))
            closed = fold_in(PartitionView(ingest_windows, message.partition), keys,
                             message.timestamp * 1000, ingest_contributions(dead),
                             window_ms=window_ms, grace_ms=grace_ms, secondary=dead)
            await publish(closed, "ingest", message.partition)

    return app
