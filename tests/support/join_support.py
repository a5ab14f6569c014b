"""The join with its state in Quix Streams' own RocksDB store partition, without a broker.

The partition is opened on a local directory and used through the same
:class:`~streams.join_store.JoinStore` the worker uses, and checkpointed the way Quix commits
it: all of a checkpoint, or (after a crash) none of it.
"""

from __future__ import annotations

import random
from pathlib import Path

from quixstreams.state.rocksdb import RocksDBStorePartition

from schemas.rewards import RewardRecord, reward_record_key
from streams.join import DEFAULT_RETENTION_MS, PartitionJoin
from streams.join_store import JoinStore
from streams.spec import RewardSpec, load_spec

SPEC: RewardSpec = load_spec()


class Checkpointed:
    """A partition join whose state lives in a RocksDB store partition and is committed the
    way the worker commits it: all of a checkpoint, or (after a crash) none of it."""

    def __init__(self, path: Path, retention_ms: int) -> None:
        self.database = RocksDBStorePartition(str(path))
        self.retention_ms = retention_ms
        self.restart()

    def restart(self) -> None:
        self.transaction = self.database.begin()
        self.store = JoinStore(self.database, self.transaction, self.retention_ms)
        self.join = PartitionJoin(SPEC, 0, self.store.marker, self.store.checkpoint(),
                                  self.store.open_trajectories(), self.retention_ms)

    def commit(self) -> None:
        self.store.write(self.join.take_writes())
        self.transaction.prepare()
        self.transaction.flush()
        self.transaction = self.database.begin()
        self.store.use(self.transaction)


def streamed(rows: list[tuple[int, bytes]], path: Path, rng: random.Random, batch: int,
             crashes: int, retention_ms: int = DEFAULT_RETENTION_MS
             ) -> tuple[dict[bytes, str], list[tuple[str, str, bool]], Checkpointed]:
    """Records (each key checked to never change) and late events of a run that crashes at
    ``crashes`` random batches and resumes after the last committed checkpoint."""
    records: dict[bytes, str] = {}
    late: dict[tuple[str, str, bool], int] = {}
    crash_at = set(rng.sample(range(0, len(rows), batch), crashes))
    node = Checkpointed(path, retention_ms)
    first = 0
    while first < len(rows):
        for offset, raw in rows[first:first + batch]:
            step = node.join.step(raw, offset)
            for record in step.records:
                key = reward_record_key(record.org_id, record.trajectory_id, SPEC.version)
                assert records.setdefault(key, record.model_dump_json()) == \
                    record.model_dump_json(), "a restart changed a record"
            for event in step.late:
                late.setdefault((event.key, event.event_id, event.expired), offset)
        if first in crash_at:
            crash_at.discard(first)
            node.restart()  # nothing of this batch was committed
            first = node.join.checkpoint().offset + 1
            continue
        node.commit()
        first += batch
    return records, sorted(late, key=late.__getitem__), node


def unplaced(record: RewardRecord) -> RewardRecord:
    """``record`` without where on the log its events sat (partition and offsets): what stays
    equal when the same events are laid out in another order or among other records."""
    return record.model_copy(update={"partition": None, "samples": [
        s.model_copy(update={"offset": None}) for s in record.samples]})


def unplaced_all(records: list[RewardRecord]) -> list[RewardRecord]:
    return [unplaced(r) for r in records]
