"""The reward join of one ``events.raw`` partition: watermark, finalisation, late events.

One :class:`PartitionJoin` per partition consumes records in offset order. Each org has its
own watermark on the partition: the largest event time of its own events, or, for an org idle
for longer than :data:`ORG_IDLE_LAG_MS`, the partition's watermark (the largest event time of
any org's) minus that lag, so a quiet org's trajectories still close. Another org's events can
therefore never make an org's event late nor close its trajectories early: an org's records
depend on its own events only. A trajectory (org, id) is final as soon as it is complete, or
once its org's watermark passes its deadline; it then leaves a :class:`Marker`, and an event
for a final trajectory is late unless it duplicates an event the trajectory folded (or an
earlier late one). The streaming worker and the offline replay both drive this class, so
they share one implementation; it does no I/O and reads no clock.

Markers are kept for ``retention_ms`` of event time after the watermark at which their
trajectory was final; after that they count as gone, whether or not the store has deleted
them yet, so what the join does never depends on when the store cleans up. Every event a
trajectory can still expect lies before its deadline, at most ``max horizon + grace`` after the
watermark that finalised it; so an event of no open trajectory and no live marker timed more
than ``retention - (max horizon + grace)`` behind the watermark is late as *expired* (counted
apart), and such an event never reopens a forgotten trajectory. Only an event timed after its
own trajectory's deadline and arriving after the marker expired starts the trajectory anew.

A record that is not a valid event is quarantined (returned in :attr:`Step.quarantined` with the
reason) and counted; it moves the offset like any other record and nothing else.

Persistence: :meth:`PartitionJoin.take_writes` hands out the open states and markers changed
since the last call and the :class:`Checkpoint` (watermark, last offset, counts) to store with
them, atomically. A join restored from a checkpoint and its open states resumes exactly where
that checkpoint was taken; offsets up to it are skipped.
"""

from __future__ import annotations

import heapq
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from schemas.reward_structs import encode_record, record_struct
from schemas.rewards import RewardRecord, reward_record_key
from schemas.topics import REWARD_RECORD_MAX_BYTES
from streams.errors import MalformedEventError, SpecError
from streams.facts import Fact, fact_from_json
from streams.fold import COMPLETENESS_TYPES, Trajectory, deadline_ms, fold, is_complete
from streams.reward import record_fields
from streams.spec import RewardSpec

__all__ = [
    "DEFAULT_RETENTION_MS",
    "ORG_IDLE_LAG_MS",
    "Checkpoint",
    "Late",
    "Marker",
    "MarkerLookup",
    "PartitionJoin",
    "Step",
    "Unusable",
    "Writes",
    "event_id_bytes",
    "require_retention",
]

# A marker is kept a week of event time after its trajectory was final.
DEFAULT_RETENTION_MS = 7 * 24 * 3600 * 1000
# An org whose own events are this far behind the partition's latest is idle: its watermark
# follows the partition's at this distance.
ORG_IDLE_LAG_MS = 3600 * 1000
_IDLE_TICK_MS = 1000  # how often, in the partition's event time, idle orgs are looked at


def event_id_bytes(event_id: str) -> bytes:
    """The 16 bytes of a UUID in its canonical text form (how markers keep event ids)."""
    return bytes.fromhex(event_id.replace("-", ""))


@dataclass(frozen=True, slots=True)
class Marker:
    """What is kept of a final trajectory: the events it folded, the late ones seen since, and
    the watermark at which it was final (its age, for retention)."""

    key: str
    final_watermark_ms: int
    event_ids: frozenset[bytes]
    late_ids: frozenset[bytes] = frozenset()

    def seen(self, event_id: bytes) -> bool:
        return event_id in self.event_ids or event_id in self.late_ids

    def with_late(self, event_id: bytes) -> Marker:
        return Marker(self.key, self.final_watermark_ms, self.event_ids,
                      self.late_ids | {event_id})

    def expired(self, watermark_ms: int, retention_ms: int) -> bool:
        return watermark_ms >= self.final_watermark_ms + retention_ms


# trajectory key → its marker, if the store still holds one
MarkerLookup = Callable[[str], Marker | None]


@dataclass(frozen=True, slots=True)
class Checkpoint:
    watermark_ms: int | None = None  # the partition's: the largest event time of any org
    offset: int = -1  # every offset up to this one is applied
    late_events: int = 0
    expired_events: int = 0  # late events whose trajectory's marker was past retention
    quarantined: int = 0
    org_watermarks: dict[str, int] = field(default_factory=dict)  # each org's own


@dataclass(frozen=True, slots=True)
class Unusable:
    """A record the join cannot use: where it was, why, and its bytes."""

    offset: int
    reason: str
    raw: bytes


@dataclass(frozen=True, slots=True)
class Late:
    key: str  # the trajectory's (org, id) key
    event_id: str
    raw: bytes  # the event as it came
    expired: bool  # its trajectory's marker, if there was one, was past retention


@dataclass(slots=True)
class Step:
    values: list[bytes] = field(default_factory=list)  # each reward record's JSON, in order
    keys: list[bytes] = field(default_factory=list)  # and its Kafka key
    late: list[Late] = field(default_factory=list)
    quarantined: list[Unusable] = field(default_factory=list)

    @property
    def records(self) -> list[RewardRecord]:
        """The reward records, read as their consumers read them (the join itself only
        writes their bytes)."""
        return [RewardRecord.model_validate_json(value) for value in self.values]


@dataclass(slots=True)
class Writes:
    """What to store, atomically: changed open states (None: no longer open), new or changed
    markers (``new_markers``: the keys finalised since the last writes), and the checkpoint
    they bring the partition to."""

    open: dict[str, Trajectory | None]
    markers: dict[str, Marker]
    new_markers: set[str]
    checkpoint: Checkpoint


def require_retention(spec: RewardSpec, retention_ms: int) -> int:
    """How long after finalisation a trajectory can still expect events (the largest horizon
    plus the grace, ms); raises :class:`SpecError` unless ``retention_ms`` is longer."""
    expected_ms = (spec.max_horizon_s + spec.finalise.grace_s) * 1000
    if retention_ms <= expected_ms:
        raise SpecError(f"a marker retention of {retention_ms / 86_400_000:g} days is too short "
                        f"for spec {spec.version}: it must exceed its largest horizon plus its "
                        f"grace ({expected_ms / 1000:g} s), or late events would reopen "
                        "trajectories; raise --retention-days")
    return expected_ms


class PartitionJoin:
    """Consumes one partition's events in offset order; see the module docstring."""

    def __init__(
        self,
        spec: RewardSpec,
        partition: int,
        lookup: MarkerLookup,
        checkpoint: Checkpoint = Checkpoint(),
        restored: Iterable[Trajectory] = (),
        retention_ms: int = DEFAULT_RETENTION_MS,
        max_record_bytes: int = REWARD_RECORD_MAX_BYTES,
    ) -> None:
        self.spec = spec
        self.partition = partition
        self.retention_ms = retention_ms
        self._recent_ms = retention_ms - require_retention(spec, retention_ms)
        self.max_record_bytes = max_record_bytes
        self._lookup = lookup
        self._restored_at = checkpoint.offset
        self._watermark_ms = checkpoint.watermark_ms
        self._org_watermarks = dict(checkpoint.org_watermarks)
        self._offset = checkpoint.offset
        self._late = checkpoint.late_events
        self._expired = checkpoint.expired_events
        self._quarantined = checkpoint.quarantined
        self._open: dict[str, Trajectory] = {}
        self._deadlines: dict[str, int] = {}
        # Deadlines per org; an entry whose deadline moved since is skipped when popped.
        self._heaps: dict[str, list[tuple[int, str]]] = {}
        self._finals: dict[str, Marker] = {}  # markers made or changed since take_writes
        self._dirty: set[str] = set()
        self._new_markers: set[str] = set()
        for state in restored:
            self._open[state.key] = state
            self._schedule(state)

    @property
    def watermark_ms(self) -> int | None:
        return self._watermark_ms

    def org_watermark_ms(self, org_id: str) -> int:
        """The watermark ``org_id``'s trajectories are finalised by (see the module
        docstring); only called once the partition has seen an event."""
        idle: int = self._watermark_ms - ORG_IDLE_LAG_MS  # type: ignore[operator]
        return max(self._org_watermarks.get(org_id, idle), idle)

    @property
    def open_states(self) -> dict[str, Trajectory]:
        return self._open

    def checkpoint(self) -> Checkpoint:
        return Checkpoint(self._watermark_ms, self._offset, self._late, self._expired,
                          self._quarantined, dict(self._org_watermarks))

    def step(self, raw: bytes | None, offset: int) -> Step:
        """Apply the record at ``offset``; returns the records and late events it caused."""
        if offset <= self._restored_at:
            return Step()  # applied before the checkpoint this join was restored from
        try:
            fact = fact_from_json(raw, offset)
        except MalformedEventError as exc:
            self._offset = offset
            self._quarantined += 1
            return Step(quarantined=[Unusable(offset, str(exc), bytes(raw or b""))])
        return self.apply(fact, raw or b"")

    def apply(self, fact: Fact, raw: bytes) -> Step:
        """Apply an event already read (``fact``, from ``raw`` at ``fact.offset``)."""
        out = Step()
        self._offset = fact.offset
        org = fact.org_id
        before = self._watermark_ms
        if before is None or fact.time_ms > before:
            self._watermark_ms = fact.time_ms
        if fact.time_ms > self._org_watermarks.get(org, fact.time_ms - 1):
            self._org_watermarks[org] = fact.time_ms
        if before is not None and before // _IDLE_TICK_MS != fact.time_ms // _IDLE_TICK_MS:
            self._finalise_idle(out)
        # Trajectories the org's watermark has passed are final before this event is applied
        # (so an event at or after its own trajectory's deadline is late).
        self._finalise_due(org, out)
        self._apply(fact, raw, out)
        self._finalise_due(org, out)
        return out

    def _apply(self, fact: Fact, raw: bytes, out: Step) -> None:
        key = fact.key
        state = self._open.get(key)
        if state is None:
            watermark_ms = self.org_watermark_ms(fact.org_id)
            marker = self._finals.get(key) or self._lookup(key)
            if marker is not None and not marker.expired(watermark_ms, self.retention_ms):
                event_id = event_id_bytes(fact.event_id)
                if not marker.seen(event_id):
                    self._late += 1
                    out.late.append(Late(key, fact.event_id, raw, expired=False))
                    self._finals[key] = marker.with_late(event_id)
                return
            if fact.time_ms <= watermark_ms - self._recent_ms:
                self._expired += 1
                out.late.append(Late(key, fact.event_id, raw, expired=True))
                return
            state = self._open[key] = Trajectory(fact.org_id, fact.trajectory_id, key,
                                                 self.partition)
        if not fold(state, fact):
            return
        self._dirty.add(key)
        if fact.type in COMPLETENESS_TYPES and is_complete(state, self.spec):
            self._finalise(state, "complete", state.last_time_ms, out)
        else:
            self._schedule(state)

    def _schedule(self, state: Trajectory) -> None:
        due = deadline_ms(state, self.spec)
        if self._deadlines.get(state.key) != due:
            self._deadlines[state.key] = due
            heapq.heappush(self._heaps.setdefault(state.org_id, []), (due, state.key))

    def _finalise_idle(self, out: Step) -> None:
        """Close what idle orgs' watermarks (the partition's minus the lag) have passed; run
        whenever the partition's watermark enters a new tick, so once per second of event time
        whatever the number of orgs."""
        idle: int = self._watermark_ms - ORG_IDLE_LAG_MS  # type: ignore[operator]
        for org_id, heap in self._heaps.items():
            if heap and heap[0][0] <= idle:
                self._finalise_due(org_id, out)

    def _finalise_due(self, org_id: str, out: Step) -> None:
        heap = self._heaps.get(org_id)
        watermark_ms = self.org_watermark_ms(org_id)
        while heap and heap[0][0] <= watermark_ms:
            due, key = heapq.heappop(heap)
            state = self._open.get(key)
            if state is not None and self._deadlines.get(key) == due:
                self._finalise(state, "watermark", due, out)

    def _finalise(self, state: Trajectory, by: str, at_ms: int, out: Step) -> None:
        key = state.key
        del self._open[key]
        self._deadlines.pop(key, None)
        self._dirty.add(key)
        try:
            record = record_struct(record_fields(state, self.spec, by,  # type: ignore[arg-type]
                                                 at_ms))
            value = encode_record(record)
            if len(value) > self.max_record_bytes:  # the samples' text goes first
                value = encode_record(record.without_text())
            if len(value) > self.max_record_bytes:
                raise ValueError(f"its record is {len(value)} bytes, over the rewards topic's "
                                 f"{self.max_record_bytes} byte limit")
            out.values.append(value)
            out.keys.append(reward_record_key(record.org_id, record.trajectory_id,
                                              record.spec_version))
        except Exception as exc:  # noqa: BLE001 - one trajectory must not stop every other
            self._quarantined += 1
            out.quarantined.append(Unusable(
                self._offset, f"trajectory {key!r} cannot be scored: {exc}",
                json.dumps({"org_id": state.org_id, "trajectory_id": state.trajectory_id,
                            "event_ids": sorted(state.facts)}).encode()))
        self._finals[key] = Marker(key, self.org_watermark_ms(state.org_id),
                                   frozenset(map(event_id_bytes, state.facts)))
        self._new_markers.add(key)

    def take_writes(self) -> Writes:
        """The open states and markers changed since the last call, and the checkpoint to
        store with them; the caller stores all of it atomically."""
        dirty, self._dirty = self._dirty, set()
        opened = {key: self._open.get(key) for key in dirty}
        markers, self._finals = self._finals, {}
        new_markers, self._new_markers = self._new_markers, set()
        return Writes(opened, markers, new_markers, self.checkpoint())
