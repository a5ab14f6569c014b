"""The reward join of one ``events.raw`` partition: watermark, finalisation, late events.

One :class:`PartitionJoin` per partition consumes facts in offset order. The watermark is the
largest event time seen on the partition. A trajectory is final as soon as it is complete, or
once the watermark passes its deadline; events for a final trajectory are late unless they are
duplicates of events it already folded. The streaming worker and the offline replay both drive
this class, so they share one implementation; it does no I/O and reads no clock.

Crash safety: the worker persists the keyed states and then a :class:`Checkpoint` (watermark,
last offset, late count) per partition, after the outputs of those offsets are acknowledged. On
restart, offsets up to the checkpoint are skipped and restored states are cut back to the
checkpoint, so reprocessing yields exactly the outputs a clean run would.
"""

from __future__ import annotations

import heapq
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from schemas.rewards import RewardRecord
from streams.errors import MalformedEventError
from streams.facts import Fact, fact_from_json, fact_from_wire, fact_to_wire
from streams.fold import TrajectoryState, deadline_ms, fold, is_complete
from streams.reward import reward_record
from streams.spec import RewardSpec

__all__ = [
    "Checkpoint",
    "Finalised",
    "PartitionJoin",
    "Step",
    "Stored",
    "decode_checkpoint",
    "decode_stored",
    "encode_checkpoint",
    "encode_stored",
]


@dataclass(frozen=True, slots=True)
class Finalised:
    """What is kept of a final trajectory: which events it folded, and where it was final."""

    trajectory_id: str
    partition: int
    event_ids: frozenset[str]
    offset: int
    late: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))  # id → offset

    def seen(self, event_id: str) -> bool:
        return event_id in self.event_ids or event_id in self.late

    def with_late(self, event_id: str, offset: int) -> Finalised:
        late = MappingProxyType({**self.late, event_id: offset})
        return Finalised(self.trajectory_id, self.partition, self.event_ids, self.offset, late)

    def until_offset(self, offset: int) -> Finalised:
        """The marker as it was at ``offset`` (its own finalisation is kept: the record of an
        ahead marker was acknowledged before the marker was written)."""
        late = {key: at for key, at in self.late.items() if at <= offset}
        if len(late) == len(self.late):
            return self
        return Finalised(self.trajectory_id, self.partition, self.event_ids, self.offset,
                         MappingProxyType(late))


Stored = TrajectoryState | Finalised


@dataclass(frozen=True, slots=True)
class Checkpoint:
    watermark_ms: int | None = None
    offset: int = -1  # every offset up to this one is fully applied and its outputs are durable
    late_events: int = 0
    malformed_events: int = 0


@dataclass(slots=True)
class Step:
    records: list[RewardRecord] = field(default_factory=list)
    # (trajectory id, event id, the event as it came)
    late: list[tuple[str, str, bytes]] = field(default_factory=list)


class PartitionJoin:
    """Consumes one partition's events in offset order; see the module docstring."""

    def __init__(
        self,
        spec: RewardSpec,
        partition: int,
        lookup: Callable[[str], Stored | None],
        checkpoint: Checkpoint = Checkpoint(),
        restored: Iterable[TrajectoryState] = (),
    ) -> None:
        self.spec = spec
        self.partition = partition
        self._lookup = lookup
        self._checkpoint = checkpoint
        self._watermark_ms = checkpoint.watermark_ms
        self._offset = checkpoint.offset
        self._late = checkpoint.late_events
        self._malformed = checkpoint.malformed_events
        self._open: dict[str, TrajectoryState] = {}
        self._deadlines: dict[str, int] = {}
        self._heap: list[tuple[int, str]] = []
        self._finals: dict[str, Finalised] = {}
        self._dirty: dict[str, Stored] = {}
        for state in restored:
            cut = state.until_offset(checkpoint.offset)
            if cut.facts:
                self._open[cut.trajectory_id] = cut
                self._schedule(cut)

    @property
    def watermark_ms(self) -> int | None:
        return self._watermark_ms

    @property
    def open_trajectories(self) -> int:
        return len(self._open)

    def step(self, raw: bytes, offset: int) -> Step:
        """Apply the event at ``offset``; returns the records and late events it caused."""
        if offset <= self._checkpoint.offset:
            return Step()  # applied before a restart, outputs already durable
        try:
            fact = fact_from_json(raw, offset)
        except MalformedEventError:
            self._offset = offset
            self._malformed += 1
            return Step()
        return self.step_fact(fact, raw)

    def step_fact(self, fact: Fact, raw: bytes) -> Step:
        """:meth:`step` for an event already read (the archive stores events as columns)."""
        out = Step()
        if fact.offset <= self._checkpoint.offset:
            return out
        self._offset = fact.offset
        if self._watermark_ms is None or fact.time_ms > self._watermark_ms:
            self._watermark_ms = fact.time_ms
        self._apply(fact, raw, out)
        self._finalise_due(out)
        return out

    def _apply(self, fact: Fact, raw: bytes, out: Step) -> None:
        tid = fact.trajectory_id
        state = self._open.get(tid)
        if state is None:
            stored = self._finals.get(tid)
            if stored is None:
                looked_up = self._lookup(tid)
                if isinstance(looked_up, Finalised):
                    stored = looked_up.until_offset(self._checkpoint.offset)
            if stored is not None:
                if not stored.seen(fact.event_id):
                    self._late += 1
                    out.late.append((tid, fact.event_id, raw))
                    self._finals[tid] = self._dirty[tid] = stored.with_late(
                        fact.event_id, fact.offset)
                return
            state = TrajectoryState(tid, self.partition)
        state = fold(state, fact)
        self._open[tid] = state
        self._dirty[tid] = state
        if is_complete(state, self.spec):
            self._finalise(tid, "complete", state.last_time_ms, out)
        else:
            self._schedule(state)

    def _schedule(self, state: TrajectoryState) -> None:
        due = deadline_ms(state, self.spec)
        if self._deadlines.get(state.trajectory_id) != due:
            self._deadlines[state.trajectory_id] = due
            heapq.heappush(self._heap, (due, state.trajectory_id))

    def _finalise_due(self, out: Step) -> None:
        while self._heap and self._heap[0][0] <= self._watermark_ms:  # type: ignore[operator]
            due, tid = heapq.heappop(self._heap)
            if tid in self._open and self._deadlines.get(tid) == due:
                self._finalise(tid, "watermark", due, out)

    def _finalise(self, tid: str, by: str, at_ms: int, out: Step) -> None:
        state = self._open.pop(tid)
        self._deadlines.pop(tid, None)
        out.records.append(reward_record(state, self.spec, by, at_ms))  # type: ignore[arg-type]
        marker = Finalised(tid, self.partition, frozenset(state.facts), self._offset)
        self._finals[tid] = marker
        self._dirty[tid] = marker

    def take_writes(self) -> tuple[dict[str, Stored], Checkpoint]:
        """The keyed states changed since the last call, and the checkpoint to store after them.

        The caller must persist both, states first, before handing out the next batch."""
        dirty, self._dirty = self._dirty, {}
        self._finals.clear()
        checkpoint = Checkpoint(self._watermark_ms, self._offset, self._late, self._malformed)
        return dirty, checkpoint


# --------------------------------------------------------------------------- stored form


def encode_stored(value: Stored) -> bytes:
    if isinstance(value, Finalised):
        body = {"t": value.trajectory_id, "p": value.partition, "final": sorted(value.event_ids),
                "o": value.offset, "late": dict(value.late)}
    else:
        body = {"t": value.trajectory_id, "p": value.partition,
                "facts": [fact_to_wire(f) for f in value.facts.values()]}
    return json.dumps(body, separators=(",", ":")).encode()


def decode_stored(raw: bytes) -> Stored:
    body = json.loads(raw)
    if "final" in body:
        return Finalised(body["t"], body["p"], frozenset(body["final"]), body["o"],
                         MappingProxyType(body["late"]))
    facts = {wire[0]: fact_from_wire(wire) for wire in body["facts"]}
    return TrajectoryState(body["t"], body["p"], MappingProxyType(facts))


def encode_checkpoint(checkpoint: Checkpoint) -> bytes:
    return json.dumps([checkpoint.watermark_ms, checkpoint.offset, checkpoint.late_events,
                       checkpoint.malformed_events]).encode()


def decode_checkpoint(raw: bytes | None) -> Checkpoint:
    return Checkpoint() if raw is None else Checkpoint(*json.loads(raw))
