"""The reward-join worker: a faust app around :class:`streams.join.PartitionJoin`.

Per batch of ``events.raw`` records: step each partition's join, send the reward records and
late events and wait until Kafka has them, then write the changed keyed states and, last, the
partition checkpoint to the table, then acknowledge the batch. Faust flushes its producer before
committing offsets, so a committed offset is always covered by a durable checkpoint, and a
killed worker resumes with exactly the outputs a clean run gives (records may repeat).

Keyed state lives in one faust table (RocksDB by default), so each partition's writes share one
ordered changelog partition. Local RocksDB files are discarded at start: a SIGKILL can leave them
ahead of the changelog in an order the checkpoint cannot account for, while the compacted
changelog always holds a consistent prefix of the writes.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import time
import weakref
from collections.abc import Awaitable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from infra.settings import Settings
from schemas.rewards import reward_record_key
from schemas.topics import topic_name
from streams.fold import TrajectoryState
from streams.join import (
    Checkpoint,
    PartitionJoin,
    Stored,
    decode_checkpoint,
    decode_stored,
    encode_checkpoint,
    encode_stored,
)
from streams.spec import RewardSpec

__all__ = [
    "WorkerConfig", "WorkerTotals", "build_app", "default_app_id", "discard_local_tables",
    "run_worker",
]

log = logging.getLogger("rewardstream.worker")


@dataclass(frozen=True)
class WorkerConfig:
    settings: Settings
    spec: RewardSpec
    datadir: Path
    app_id: str | None = None
    store: str = "rocksdb://"
    batch_max: int = 2000
    batch_within_s: float = 0.1
    # Per partition and fetch. faust's default (1 MiB) makes a backlog arrive in round trips
    # of ~1,600 events, and the consumer idles on each one; 16 MiB lets it catch up in a few.
    fetch_max_bytes_per_partition: int = 16 * 1024 * 1024
    # faust sends each record in its own produce request by default (no linger, 16 KiB
    # batches); a batch's records and table writes are sent together, so a few ms of linger
    # turns thousands of requests into a few per batch.
    produce_linger_s: float = 0.005
    produce_batch_bytes: int = 512 * 1024


@dataclass
class WorkerTotals:
    """Since this process started (the checkpoint in the table holds the durable counts)."""

    events: int = 0
    records: int = 0
    late_events: int = 0
    last_offsets: dict[int, int] | None = None
    first_batch_s: float | None = None  # monotonic time the first batch arrived
    last_batch_s: float | None = None  # monotonic time the latest batch was acknowledged


def default_app_id(settings: Settings, spec: RewardSpec) -> str:
    """One consumer group and state per deployment prefix and spec version."""
    return f"{settings.topic_prefix}rewardjoin-{spec.version}"


def _trajectory_key(tid: str) -> bytes:
    return b"t/" + tid.encode()


def _checkpoint_key(partition: int) -> bytes:
    return b"w/%d" % partition


@contextmanager
def _as_event_of(event: Any) -> Iterator[None]:
    """Table reads and writes go to the partition of faust's current event; a batch spans
    partitions, so each partition's writes run under one of its own events."""
    from faust.streams import _current_event

    token = _current_event.set(weakref.ref(event))
    try:
        yield
    finally:
        _current_event.reset(token)


class _Shell:
    """The I/O around the partition joins: table, output topics, acknowledgements."""

    def __init__(self, app: Any, config: WorkerConfig) -> None:
        prefix = config.settings.topic_prefix
        self.spec = config.spec
        self.table = app.Table("state", key_type=bytes, value_type=bytes,  # bytes: raw codec
                               partitions=config.settings.topic_partitions)
        self.app = app
        self.rewards_topic = topic_name(prefix, "rewards")
        self.late_topic = topic_name(prefix, "events.late")
        self.joins: dict[int, PartitionJoin] = {}
        self.totals = WorkerTotals(last_offsets={})

    def _lookup(self, tid: str) -> Stored | None:
        raw = self.table.get(_trajectory_key(tid))
        return None if raw is None else decode_stored(raw)

    def _join_for(self, partition: int) -> PartitionJoin:
        join = self.joins.get(partition)
        if join is None:
            checkpoint = decode_checkpoint(self.table.get(_checkpoint_key(partition)))
            restored = []
            for key, raw in self.table.items():
                if key.startswith(b"t/"):
                    stored = decode_stored(raw)
                    if isinstance(stored, TrajectoryState) and stored.partition == partition:
                        restored.append(stored)
            join = PartitionJoin(self.spec, partition, self._lookup, checkpoint, restored)
            self.joins[partition] = join
            log.info("partition %d: resumed after offset %d with %d open trajectories",
                     partition, checkpoint.offset, join.open_trajectories)
        return join

    async def _send(self, topic: str, key: bytes, value: bytes) -> Awaitable[Any]:
        """Hand a record to faust's producer (the one flushed before offsets are committed)
        without a faust topic's per-record bookkeeping; await the result for Kafka's ack."""
        return await self.app.producer.send(topic, key, value, None, None, None)

    def forget(self, partitions: set[int]) -> None:
        for partition in partitions:
            self.joins.pop(partition, None)

    async def process(self, stream: Any, events: list[Any]) -> None:
        if self.totals.first_batch_s is None:
            self.totals.first_batch_s = time.monotonic()
        by_partition: dict[int, list[Any]] = {}
        for event in events:
            by_partition.setdefault(event.message.partition, []).append(event)
        sends: list[Any] = []
        writes: list[tuple[Any, dict[str, Stored], Checkpoint]] = []
        for partition, batch in by_partition.items():
            with _as_event_of(batch[-1]):
                join = self._join_for(partition)
                for event in batch:
                    step = join.step(event.message.value, event.message.offset)
                    for record in step.records:
                        sends.append(await self._send(
                            self.rewards_topic,
                            reward_record_key(record.trajectory_id, record.spec_version),
                            record.model_dump_json().encode()))
                    for tid, _, raw in step.late:
                        sends.append(await self._send(self.late_topic, tid.encode(), raw))
                    self.totals.records += len(step.records)
                    self.totals.late_events += len(step.late)
                dirty, checkpoint = join.take_writes()
                writes.append((batch[-1], dirty, checkpoint))
        await asyncio.gather(*sends)
        for last_event, dirty, checkpoint in writes:
            with _as_event_of(last_event):
                for tid, value in dirty.items():
                    self.table[_trajectory_key(tid)] = encode_stored(value)
                self.table[_checkpoint_key(last_event.message.partition)] = \
                    encode_checkpoint(checkpoint)
            self.totals.last_offsets[last_event.message.partition] = last_event.message.offset  # type: ignore[index]
        for event in events:
            await stream.ack(event)
        self.totals.events += len(events)
        self.totals.last_batch_s = time.monotonic()


def build_app(config: WorkerConfig) -> tuple[Any, WorkerTotals]:
    """The faust app of the reward join, and the live totals of this process."""
    import faust

    settings = config.settings
    app = faust.App(
        config.app_id or default_app_id(settings, config.spec),
        broker=f"kafka://{settings.bootstrap_servers}", store=config.store,
        datadir=str(config.datadir), topic_partitions=settings.topic_partitions,
        web_enabled=False, consumer_auto_offset_reset="earliest",
        consumer_max_fetch_size=config.fetch_max_bytes_per_partition,
        producer_linger=config.produce_linger_s, producer_max_batch_size=config.produce_batch_bytes,
    )
    source = app.topic(topic_name(settings.topic_prefix, "events.raw"), key_serializer="raw",
                       value_serializer="raw")
    shell = _Shell(app, config)

    @app.agent(source)
    async def reward_join(stream: Any) -> None:
        async for events in stream.noack_take(config.batch_max, within=config.batch_within_s):
            await shell.process(stream, list(events))

    @app.on_partitions_revoked.connect
    async def on_revoked(sender: Any, revoked: Any, **_: Any) -> None:
        shell.forget({tp.partition for tp in revoked if tp.topic == source.get_topic_name()})

    @app.timer(interval=10.0)
    async def report() -> None:
        totals = shell.totals
        log.info("reward join: %d events, %d records, %d late since start; offsets %s",
                 totals.events, totals.records, totals.late_events, totals.last_offsets)

    return app, shell.totals


def discard_local_tables(app: Any) -> None:
    """Recover from the changelog alone (see the module docstring)."""
    shutil.rmtree(Path(app.conf.tabledir), ignore_errors=True)


def run_worker(config: WorkerConfig, loglevel: str = "info") -> None:
    """Run until SIGINT/SIGTERM."""
    import faust

    app, _ = build_app(config)
    discard_local_tables(app)
    started = time.monotonic()
    log.info("reward join %s (spec %s) starting", app.conf.id, config.spec.version)
    faust.Worker(app, loglevel=loglevel).execute_from_commandline()
    log.info("reward join stopped after %.0f s", time.monotonic() - started)
