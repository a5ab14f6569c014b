"""The metrics agents: faust-streaming workers that fold inputs into event-time windows.

Two agents, each a thin shell around ``windows.fold_in``:

* ``rewards`` → windows per (checkpoint, arm, org) and per (checkpoint, arm) over the fleet
  (org ``*``) at the trajectory's end time: rates, latency percentiles, reward and its
  components, on-policy fraction.
* ``events.raw`` + ``events.deadletter`` → ingest windows for all traffic (``*``), per org, and
  per (checkpoint, arm) over the fleet: accepted volume and dead-letter rate, by arrival (the
  Kafka timestamp the ingest service stamped). Arrival is the right clock for the health of
  ingest, and rejected events may carry no valid time of their own. Accepted events drive the
  watermark; a rejected event that comes late counts in the oldest open window
  (``fold_in(secondary=True)``).

A repeated reward record (same key) or event (same id) is folded once (``fold_in``'s
``record_id``). Open windows live in changelog-backed faust tables, so a restarted worker
resumes them, with the ids it has folded into them; each input's fold is journalled
(``journal.fold_atomically``), so a worker killed in the middle of one leaves it whole or
not at all. Rewards
are finalised hours after ingest, so each input has its own watermark. State keys carry the
source partition: with several partitions each folds its own (partial, additive) windows.
Records that are not what their topic promises are quarantined (``schemas.quarantine``) and
skipped.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator, MutableMapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import faust

from infra.health_http import Figure
from infra.kafka_auth import faust_options
from infra.settings import Settings
from schemas.metrics import MetricWindow, WindowScope, metric_key
from schemas.quarantine import UnusableRecord, decode_record
from schemas.rewards import RewardRecord
from schemas.topics import header_org, topic_name
from streams.errors import MalformedEventError
from streams.facts import read_event
from streams.faust_quarantine import send_quarantine
from streams.monitors.config import MonitorConfig
from streams.monitors.journal import fold_atomically
from streams.monitors.windows import (
    fold_in,
    fold_reward,
    ingest_contributions,
    ingest_window_keys,
    reward_event_time_ms,
    to_metric_window,
)

__all__ = ["CONSUMER_NAME", "FOLD_FIGURES", "FoldTotals", "PartitionView", "create_app",
           "run_metrics_worker"]

CONSUMER_NAME = "monitors-metrics"  # how quarantined records name this consumer


@dataclass
class FoldTotals:
    """Since the process started; read by its /metrics."""

    folded: Counter[str] = field(default_factory=Counter)  # by input topic
    published: Counter[str] = field(default_factory=Counter)  # windows, by scope
    quarantined: int = 0


FOLD_FIGURES = (
    Figure("rewardstream_monitors_records_folded", "folded", "counter",
           "Records folded into windows since start, by input (rewards, events, deadletter)",
           "input", ("rewards", "events", "deadletter")),
    Figure("rewardstream_monitors_windows_published", "published", "counter",
           "Closed windows published on the metrics topic since start, by scope", "scope",
           ("rewards", "ingest")),
    Figure("rewardstream_monitors_quarantined", "quarantined", "counter",
           "Input records that were not what their topic promises, quarantined since start"),
)


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


def create_app(settings: Settings, config: MonitorConfig, *, store: str = "memory://",
               replication: int = 1, datadir: Path | None = None,
               totals: FoldTotals | None = None) -> faust.App:
    """``replication``: of the app's own topics (changelogs), the cluster's
    (``infra.topics.settings_replication``); ``datadir``: the worker's local state (faust's
    default, ``<app id>-data`` in the working directory, when None); ``totals`` are counted
    as it folds."""
    prefix = settings.topic_prefix
    counts = totals or FoldTotals()
    if datadir is not None:
        datadir.mkdir(parents=True, exist_ok=True)  # faust makes only the last level
    local: dict[str, Any] = {} if datadir is None else {"datadir": str(datadir)}
    app = faust.App(
        f"{prefix}rewardstream-monitors", **faust_options(settings), **local, store=store,
        topic_partitions=settings.topic_partitions, topic_replication_factor=replication,
        value_serializer="raw", web_enabled=False,
    )
    window_ms, grace_ms = config.window_s * 1000, config.grace_s * 1000
    writer = uuid.uuid4().hex  # this process's, in the journal of each fold it writes
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
            counts.published[scope] += 1

    async def quarantine(message: Any, reason: str) -> None:
        counts.quarantined += 1
        await (await send_quarantine(app, prefix, CONSUMER_NAME, message.topic,
                                     message.partition, message.offset, message.value, reason))

    @app.agent(app.topic(topic_name(prefix, "rewards"), value_serializer="raw"))
    async def fold_rewards(stream: faust.StreamT) -> None:
        async for event in stream.events():
            try:
                record = decode_record(RewardRecord, event.value)
            except UnusableRecord as exc:
                await quarantine(event.message, str(exc))
                continue
            at_ms = reward_event_time_ms(record)
            if at_ms > (time.time() + config.max_future_s) * 1000:
                at = record.ended_at or record.finalized_at
                await quarantine(event.message, f"ended_at: {at} is more than "
                                 f"{config.max_future_s} s after this worker's clock")
                continue
            partition = event.message.partition
            again, closed = fold_atomically(
                PartitionView(reward_windows, partition), writer,
                partial(fold_reward, record=record, window_ms=window_ms, grace_ms=grace_ms))
            counts.folded["rewards"] += 1
            await publish(again + closed, "rewards", partition)

    deadletter_topic = topic_name(prefix, "events.deadletter")

    @app.agent(app.topic(topic_name(prefix, "events.raw"), deadletter_topic,
                         value_serializer="raw"))
    async def fold_ingest(stream: faust.StreamT) -> None:
        async for event in stream.events():
            message = event.message
            dead = message.topic == deadletter_topic
            event_id: str | None = None
            if dead:
                keys = ingest_window_keys(header_org(message.headers))
            else:
                try:
                    stored = read_event(event.value)
                except MalformedEventError as exc:
                    await quarantine(message, str(exc))
                    continue
                keys = ingest_window_keys(stored.org_id, stored.checkpoint_id, stored.arm)
                event_id = f"{stored.org_id}|{stored.event_id}"  # ids are unique per org
            again, closed = fold_atomically(
                PartitionView(ingest_windows, message.partition), writer,
                partial(fold_in, keys=keys, event_time_ms=message.timestamp * 1000,
                        contributions=ingest_contributions(dead), window_ms=window_ms,
                        grace_ms=grace_ms, secondary=dead, record_id=event_id))
            counts.folded["deadletter" if dead else "events"] += 1
            await publish(again + closed, "ingest", message.partition)

    return app


def run_metrics_worker(settings: Settings, config: MonitorConfig, *, store: str, loglevel: str,
                       datadir: Path | None, metrics_port: int | None,
                       metrics_host: str = "127.0.0.1") -> None:
    """``rewardstream monitors metrics``: the faust worker, with ``/metrics`` and ``/readyz``
    (ready once it started and while the brokers answer). Started while no broker answers, it
    waits for one."""
    from infra.health_http import FiguresCollector, HealthServer, service_registry
    from infra.kafka_health import BrokerWatch, wait_for_broker
    from infra.log_filters import limit_repeats
    from infra.topics import settings_replication

    watch = BrokerWatch(settings, CONSUMER_NAME).start()
    totals, started = FoldTotals(), threading.Event()

    def not_ready() -> str | None:
        if not watch.up:
            return f"Kafka does not answer: {watch.reason}"
        return None if started.is_set() else "starting: restoring its tables"

    registry = service_registry(watch, FiguresCollector(totals, FOLD_FIGURES))
    HealthServer(registry, not_ready).serve(metrics_port, metrics_host)
    wait_for_broker(settings, threading.Event(), CONSUMER_NAME)
    app = create_app(settings, config, store=store,
                     replication=settings_replication(settings).factor, datadir=datadir,
                     totals=totals)

    class Worker(faust.Worker):
        async def on_startup_finished(self) -> None:
            await super().on_startup_finished()
            started.set()

        def on_setup_root_logger(self, logger: logging.Logger, level: int) -> None:
            super().on_setup_root_logger(logger, level)
            limit_repeats(root=logger)  # while Kafka is away aiokafka logs lines a second

    Worker(app, loglevel=loglevel).execute_from_commandline()
