"""The join's state in one Quix Streams store partition (RocksDB, changelogged per partition).

Layout of the partition's keys (everything of one ``events.raw`` partition, and nothing else):

* ``o/<org|trajectory>``: an open trajectory (``streams.join_codec``);
* ``m/<org|trajectory>``: the marker of a final trajectory (one read to look it up);
* ``x/<watermark><offset>``: the keys of the markers one checkpoint made, under the latest
  watermark at which one of them was final (big-endian, so the index sorts by time): one write
  per checkpoint, not per marker;
* ``c/checkpoint``: the join's :class:`~streams.join.Checkpoint`;
* ``c/size``: markers kept and their bytes.

Writes go through the checkpoint's partition transaction, so Quix stores them atomically with
the consumer offset (changelog first, then the offset commit, then the local RocksDB). Each
checkpoint also deletes the markers of every index entry whose watermark is past the retention
plus the idle lag of an org's watermark (a marker made again since, for a trajectory that
started anew, is kept); the index is read
from the local database, where every entry of an earlier checkpoint is. Restoring a partition
reads its checkpoint and its open trajectories (``o/``) from its own database only; markers
stay on disk and are read one at a time when an event asks for one.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

import orjson

from streams.fold import Trajectory
from streams.join import ORG_IDLE_LAG_MS, Checkpoint, Marker, Writes
from streams.join_codec import (
    decode_checkpoint,
    decode_marker,
    decode_trajectory,
    encode_checkpoint,
    encode_marker,
    encode_trajectory,
)
from streams.quix_seam import StateDatabase, StateTransaction

__all__ = ["JoinStore", "StateSize"]

_OPEN = b"o/"
_MARKER = b"m/"
_EXPIRY = b"x/"
_CHECKPOINT = b"c/checkpoint"
_SIZE = b"c/size"
_NO_PREFIX = b""  # keys are complete as written here
_TIME = struct.Struct(">qq")  # (watermark, offset) of an expiry index entry


@dataclass
class StateSize:
    """What a partition's state holds; reported per partition."""

    open_trajectories: int = 0
    open_bytes: int = 0
    markers: int = 0
    marker_bytes: int = 0
    _open_sizes: dict[str, int] = field(default_factory=dict, repr=False)

    def as_dict(self) -> dict[str, int]:
        return {"open_trajectories": self.open_trajectories, "open_bytes": self.open_bytes,
                "markers": self.markers, "marker_bytes": self.marker_bytes}


class JoinStore:
    """One partition's join state; ``transaction`` is the current checkpoint's (replaced by
    :meth:`use` for each checkpoint), ``database`` the partition's RocksDB store partition."""

    def __init__(self, database: StateDatabase, transaction: StateTransaction,
                 retention_ms: int) -> None:
        self.database = database
        self.transaction = transaction
        self.retention_ms = retention_ms
        raw = transaction.get_bytes(_SIZE, prefix=_NO_PREFIX)
        markers, marker_bytes = orjson.loads(raw) if raw is not None else (0, 0)
        self.size = StateSize(markers=markers, marker_bytes=marker_bytes)

    def use(self, transaction: StateTransaction) -> None:
        self.transaction = transaction

    def checkpoint(self) -> Checkpoint:
        return decode_checkpoint(self.transaction.get_bytes(_CHECKPOINT, prefix=_NO_PREFIX))

    def open_trajectories(self) -> list[Trajectory]:
        """Every open trajectory of the partition (read when the partition is restored)."""
        states = []
        for key, raw in self.database.iter_items(_OPEN, _OPEN[:-1] + b"0"):
            state = decode_trajectory(raw)
            states.append(state)
            self.size._open_sizes[state.key] = len(key) + len(raw)
        self.size.open_trajectories = len(states)
        self.size.open_bytes = sum(self.size._open_sizes.values())
        return states

    def marker(self, key: str) -> Marker | None:
        """The marker of ``key``, if the store still holds one."""
        raw = self.transaction.get_bytes(_MARKER + key.encode(), prefix=_NO_PREFIX)
        return None if raw is None else decode_marker(key, raw)

    def write(self, writes: Writes) -> None:
        """Stage ``writes`` in the transaction, and delete the markers past retention."""
        tx, size = self.transaction, self.size
        for key, state in writes.open.items():
            stored_key = _OPEN + key.encode()
            if state is None:
                if key in size._open_sizes:  # else never stored: no tombstone to write
                    tx.delete(stored_key, prefix=_NO_PREFIX)
                    size.open_bytes -= size._open_sizes.pop(key)
            else:
                raw = encode_trajectory(state)
                tx.set_bytes(stored_key, raw, prefix=_NO_PREFIX)
                new = len(stored_key) + len(raw)
                size.open_bytes += new - size._open_sizes.get(key, 0)
                size._open_sizes[key] = new
        size.open_trajectories = len(size._open_sizes)
        for key, marker in writes.markers.items():
            stored_key = _MARKER + key.encode()
            raw = encode_marker(marker)
            before = None if key in writes.new_markers else tx.get_bytes(stored_key,
                                                                         prefix=_NO_PREFIX)
            if before is None:
                size.markers += 1
                size.marker_bytes += len(stored_key) + len(raw)
            else:
                size.marker_bytes += len(raw) - len(before)
            tx.set_bytes(stored_key, raw, prefix=_NO_PREFIX)
        checkpoint = writes.checkpoint
        if writes.new_markers:
            latest_ms = max(writes.markers[key].final_watermark_ms for key in writes.new_markers)
            tx.set_bytes(_EXPIRY + _TIME.pack(latest_ms, checkpoint.offset),
                         orjson.dumps(sorted(writes.new_markers)), prefix=_NO_PREFIX)
        if checkpoint.watermark_ms is not None:
            # An org's watermark may trail the partition's by up to the idle lag, and a marker
            # must outlive its retention in its own org's time: deleted only once past both.
            self._expire(checkpoint.watermark_ms - self.retention_ms - ORG_IDLE_LAG_MS)
        tx.set_bytes(_CHECKPOINT, encode_checkpoint(checkpoint), prefix=_NO_PREFIX)
        tx.set_bytes(_SIZE, orjson.dumps([size.markers, size.marker_bytes]), prefix=_NO_PREFIX)

    def _expire(self, final_by_ms: int) -> None:
        """Delete the markers final at or before ``final_by_ms`` (past retention)."""
        tx, size = self.transaction, self.size
        for index_key, keys in self.database.iter_items(
                _EXPIRY, _EXPIRY + _TIME.pack(final_by_ms + 1, 0)):
            for key in orjson.loads(keys):
                stored_key = _MARKER + key.encode()
                raw = tx.get_bytes(stored_key, prefix=_NO_PREFIX)
                if raw is not None and decode_marker(key, raw).final_watermark_ms <= final_by_ms:
                    tx.delete(stored_key, prefix=_NO_PREFIX)
                    size.markers -= 1
                    size.marker_bytes -= len(stored_key) + len(raw)
            tx.delete(index_key, prefix=_NO_PREFIX)
