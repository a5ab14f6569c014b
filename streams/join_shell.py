"""The I/O around the partition joins inside a Quix Streams application.

:class:`JoinShell` is registered as the application's sink, which is what Quix calls for each
record (``add``) and, first thing in every checkpoint commit, ``flush``:

* ``add`` steps the record's :class:`~streams.join.PartitionJoin` and hands its reward records,
  late events and quarantined records to the application's producer at once;
* ``flush`` stages each partition's changed state and checkpoint in that partition's store
  transaction (:class:`~streams.join_store.JoinStore`).

Quix then commits the checkpoint in this order: the changelog of every store transaction is
produced; the producer is flushed, so every reward record, late event, quarantine copy and
changelog message is acknowledged by Kafka (or the commit fails); the consumer offsets are
committed; the transactions are written to the local RocksDB. So outputs are acknowledged
before the state and offsets that account for them are committed, and a commit that fails
leaves the last committed checkpoint in force (on recovery, Quix skips changelog messages of
offsets that were never committed).

A partition's join lives in memory between checkpoints. When a checkpoint opens a new
transaction for a partition, the join is kept only if its own checkpoint is the one stored
(nothing else has processed the partition since); otherwise, after a rebalance, an aborted
commit or a restart, it is restored from the partition's store.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from schemas.quarantine import Quarantined, quarantine_message
from schemas.topics import topic_name
from streams.join import PartitionJoin, Step
from streams.join_store import JoinStore
from streams.quix_seam import QuixState, RecordHeaders, Sink, StateDatabase, StateTransaction
from streams.spec import RewardSpec

__all__ = ["CONSUMER_NAME", "JoinShell", "WorkerTotals"]

log = logging.getLogger("rewardstream.worker")

CONSUMER_NAME = "reward-join"  # how quarantined records name this consumer
LATE_HEADER = "late"  # b"final": its trajectory was final; b"expired": past the retention
_STOP_CHECK_EVERY_EVENTS = 4096
REPORT_INTERVAL_S = 10.0  # the periodic log line with the counts and state sizes


@dataclass
class WorkerTotals:
    """Since this process started (the store holds the durable counts)."""

    events: int = 0
    records: int = 0
    late_events: int = 0
    expired_events: int = 0
    quarantined: int = 0
    failure: str | None = None  # why the worker stopped processing, if a checkpoint failed
    first_event_s: float | None = None  # monotonic time the first record was processed
    last_event_s: float | None = None  # monotonic time the latest record was processed
    restored: dict[int, float] = field(default_factory=dict)  # partition → seconds to restore
    ready_s: dict[int, float] = field(default_factory=dict)  # partition → its first record
    # partition → watermark, offset and state size, as of the last checkpoint
    partitions: dict[int, dict[str, Any]] = field(default_factory=dict)


@dataclass
class _Partition:
    join: PartitionJoin
    store: JoinStore
    transaction: StateTransaction
    checkpoint: object = None  # the application's checkpoint that ``transaction`` belongs to
    offsets: tuple[int, int] | None = None  # first and last offset since the last flush


class JoinShell(Sink):
    """See the module docstring. ``stop_when`` (for in-process runs) is asked after each
    record and checkpoint whether the application should stop."""

    def __init__(self, spec: RewardSpec, topic_prefix: str, retention_ms: int,
                 state: QuixState,
                 stop_when: Callable[[WorkerTotals], bool] | None = None) -> None:
        super().__init__()
        self.spec = spec
        self.retention_ms = retention_ms
        self.topic_prefix = topic_prefix
        self.source_topic = topic_name(topic_prefix, "events.raw")
        self.rewards_topic = topic_name(topic_prefix, "rewards")
        self.late_topic = topic_name(topic_prefix, "events.late")
        self.state = state
        self.stop_when = stop_when
        self.stop: Callable[[], None] = lambda: None  # set by the application's builder
        self.totals = WorkerTotals()
        self._partitions: dict[int, _Partition] = {}
        self._next_stop_check = _STOP_CHECK_EVERY_EVENTS
        self._next_report_s = time.monotonic() + REPORT_INTERVAL_S

    # ----------------------------------------------------------------------------- per record

    def add(self, value: bytes | None, key: bytes | None, timestamp: int,
            headers: RecordHeaders, topic: str, partition: int, offset: int) -> None:
        slot = self._partitions.get(partition)
        if slot is None or slot.checkpoint is not self.state.checkpoint():
            # A checkpoint hands out one transaction per partition and keeps it: the slot
            # is looked at again only when the checkpoint changes.
            slot = self._slot(partition)
        step = slot.join.step(value, offset)
        if step.values or step.late or step.quarantined:
            self._send(partition, step)
        slot.offsets = (offset, offset) if slot.offsets is None else (slot.offsets[0], offset)
        totals = self.totals
        totals.events += 1
        totals.last_event_s = time.monotonic()
        if totals.first_event_s is None:
            totals.first_event_s = totals.last_event_s
        if totals.events >= self._next_stop_check:
            self._next_stop_check = totals.events + _STOP_CHECK_EVERY_EVENTS
            if self.stop_when is not None and self.stop_when(totals):
                self.stop()

    def _slot(self, partition: int) -> _Partition:
        checkpoint = self.state.checkpoint()
        transaction = self.state.transaction(partition)
        slot = self._partitions.get(partition)
        if slot is None or slot.transaction is not transaction:
            slot = self._renew(partition, slot, transaction)
        slot.checkpoint = checkpoint
        return slot

    def _renew(self, partition: int, slot: _Partition | None,
               transaction: StateTransaction) -> _Partition:
        """The partition's slot for a new transaction: kept if its join is still the stored
        one, else restored from the store."""
        database = self.state.database(partition)
        if slot is not None:
            slot.store.database = database
            slot.store.use(transaction)
            if slot.join.checkpoint() == slot.store.checkpoint():
                slot.transaction = transaction
                return slot
        return self._restore(partition, database, transaction)

    def _restore(self, partition: int, database: StateDatabase,
                 transaction: StateTransaction) -> _Partition:
        started = time.monotonic()
        store = JoinStore(database, transaction, self.retention_ms)
        checkpoint = store.checkpoint()
        join = PartitionJoin(self.spec, partition, store.marker, checkpoint,
                             store.open_trajectories(), retention_ms=self.retention_ms)
        slot = self._partitions[partition] = _Partition(join, store, transaction)
        self.totals.ready_s.setdefault(partition, started)
        took_s = time.monotonic() - started
        self.totals.restored[partition] = took_s
        log.info("partition %d: restored in %.2f s after offset %d (watermark %s): %d open "
                 "trajectories, %d markers", partition, took_s, checkpoint.offset,
                 checkpoint.watermark_ms, store.size.open_trajectories, store.size.markers)
        return slot

    def _send(self, partition: int, step: Step) -> None:
        produce = self.state.produce
        totals = self.totals
        for key, value in zip(step.keys, step.values, strict=True):
            produce(topic=self.rewards_topic, value=value, key=key)
        for late in step.late:
            produce(topic=self.late_topic, value=late.raw, key=late.key.encode(),
                    headers=[(LATE_HEADER, b"expired" if late.expired else b"final")])
            if late.expired:
                totals.expired_events += 1
            else:
                totals.late_events += 1
        now = datetime.now(UTC)
        for unusable in step.quarantined:
            quarantined = Quarantined.of(CONSUMER_NAME, unusable.reason, self.source_topic,
                                         partition, unusable.offset, unusable.raw, now)
            topic, key, value, headers = quarantine_message(self.topic_prefix, quarantined)
            produce(topic=topic, value=value, key=key, headers=headers)
            log.warning("%s quarantined %s/%d/%d: %s", CONSUMER_NAME, self.source_topic,
                        partition, unusable.offset, unusable.reason)
        totals.records += len(step.values)
        totals.quarantined += len(step.quarantined)

    # ---------------------------------------------------------------------------- checkpoint

    def flush(self) -> None:
        for partition, slot in self._partitions.items():
            if slot.offsets is None:
                continue
            writes = slot.join.take_writes()
            slot.store.write(writes)
            slot.offsets = None
            self.totals.partitions[partition] = {
                "watermark_ms": writes.checkpoint.watermark_ms,
                "offset": writes.checkpoint.offset, **slot.store.size.as_dict()}
        if time.monotonic() >= self._next_report_s:
            self._next_report_s = time.monotonic() + REPORT_INTERVAL_S
            self.report()
        if self.stop_when is not None and self.stop_when(self.totals):
            self.stop()

    def pending(self) -> str:
        """The partitions and offsets processed since the last checkpoint."""
        spans = [f"partition {p} offsets {s.offsets[0]}..{s.offsets[1]}"
                 for p, s in sorted(self._partitions.items()) if s.offsets is not None]
        return ", ".join(spans) or "no records"

    def report(self) -> None:
        totals = self.totals
        span_s = (totals.last_event_s or 0.0) - (totals.first_event_s or 0.0)
        log.info("reward join: %d events (%.0f events/s while processing), %d records, %d "
                 "late, %d expired, %d quarantined since start; per partition %s",
                 totals.events, totals.events / span_s if span_s > 0 else 0.0, totals.records,
                 totals.late_events, totals.expired_events, totals.quarantined,
                 totals.partitions)
