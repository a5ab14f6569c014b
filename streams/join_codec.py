"""The stored form of the join's state: open trajectories, markers and partition checkpoints.

Open trajectories are a compact JSON list of their facts (orjson: they are written once per
checkpoint in which they changed and read back only when a partition is restored). Markers are
binary, 16 bytes per event id, since a partition keeps one per trajectory for the whole
retention: ``>BqHH`` (format 1, final watermark, folded ids, late ids) followed by the ids. (The
format byte comes first so a value never starts like the event-time stamps of Quix's own
state TTL, which its recovery would otherwise warn about.)
"""

from __future__ import annotations

import struct

import orjson

from streams.facts import Fact
from streams.fold import Trajectory, fold_all
from streams.join import Checkpoint, Marker

__all__ = [
    "decode_checkpoint",
    "decode_marker",
    "decode_trajectory",
    "encode_checkpoint",
    "encode_marker",
    "encode_trajectory",
]

_MARKER_HEAD = struct.Struct(">BqHH")
_MARKER_FORMAT = 1
_ID_BYTES = 16


def encode_trajectory(state: Trajectory) -> bytes:
    facts = [[f.event_id, f.type, f.time_ms, f.offset, f.checkpoint_id, f.arm, f.data]
             for f in state.facts.values()]
    return orjson.dumps([state.org_id, state.trajectory_id, state.partition, facts])


def decode_trajectory(raw: bytes) -> Trajectory:
    org_id, trajectory_id, partition, facts = orjson.loads(raw)
    return fold_all((Fact(event_id, kind, trajectory_id, time_ms, offset, checkpoint_id, arm,
                          org_id, data)
                     for event_id, kind, time_ms, offset, checkpoint_id, arm, data in facts),
                    partition)


def encode_marker(marker: Marker) -> bytes:
    head = _MARKER_HEAD.pack(_MARKER_FORMAT, marker.final_watermark_ms, len(marker.event_ids),
                             len(marker.late_ids))
    return b"".join([head, *sorted(marker.event_ids), *sorted(marker.late_ids)])


def decode_marker(key: str, raw: bytes) -> Marker:
    _, final_ms, folded, late = _MARKER_HEAD.unpack_from(raw)
    at = _MARKER_HEAD.size
    ids = [raw[i:i + _ID_BYTES] for i in range(at, at + (folded + late) * _ID_BYTES, _ID_BYTES)]
    return Marker(key, final_ms, frozenset(ids[:folded]), frozenset(ids[folded:]))


def encode_checkpoint(checkpoint: Checkpoint) -> bytes:
    return orjson.dumps([checkpoint.watermark_ms, checkpoint.offset, checkpoint.late_events,
                         checkpoint.expired_events, checkpoint.quarantined,
                         checkpoint.org_watermarks])


def decode_checkpoint(raw: bytes | None) -> Checkpoint:
    return Checkpoint() if raw is None else Checkpoint(*orjson.loads(raw))
