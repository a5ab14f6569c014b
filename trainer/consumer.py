"""Reading the reward stream, for any trainer: batches of per-completion samples from Kafka.

The platform's own trainer reads rewards through this module, and so can any other::

    from trainer.consumer import Lineage, RewardConsumer, Selection, Staleness

    consumer = RewardConsumer(settings, "my-trainer", Selection(
        orgs=frozenset({"acme"}), staleness=Staleness(max_checkpoints=2, max_hours=6.0)),
        lineage=lambda: Lineage.of(registry_store.read(), "my-model"))
    while True:
        batch = consumer.next_batch(64, timeout_s=30.0)
        for sample in batch.samples:    # token ids, behaviour logprobs, credit, labels, text
            ...
        save_my_checkpoint(batch.positions)  # the step is durable ...
        consumer.commit(batch.positions)     # ... and only then are its offsets committed

**Delivery is at-least-once.** Offsets are committed to the consumer group only when the caller
says its step is durable (:meth:`RewardConsumer.commit`); a trainer that dies before that gets
the same records again, and may have been handed a record twice anyway (a worker restarted
mid-checkpoint writes it again, with the same key). A trainer that must not learn twice keeps a
:class:`~schemas.dedupe.DedupeWindow` of record keys with its checkpoint and passes it in: a
record whose key it holds is counted ``records_duplicate`` and skipped. Storing the positions
with the checkpoint and passing them back on restart makes a resume exact.

**Selection** (:func:`select`, pure, also what the trainer's batches go through): records of
other orgs or another spec version are skipped; records the trainer must refuse (a completion
the gateway did not serve) or cannot read were quarantined by the source and are counted. A
sample more than ``max_checkpoints`` registry generations behind the current policy (or naming
a checkpoint the registry does not know) is dropped, as is one served more than ``max_hours``
ago (or whose serving time is unknown); every drop is counted under its reason.

**Token-level fields** of a :class:`SelectedSample` are ready for importance sampling: the
prompt and completion token ids, one behaviour logprob per completion token as the gateway's
sampler logged it (the ratio's denominator: never recompute it with the current actor), the
sampling parameters it was drawn with, and its lag behind the policy.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cached_property
from pathlib import Path

from infra.settings import Settings
from schemas.checkpoints import Registry
from schemas.dedupe import DedupeWindow
from schemas.rewards import Sample
from schemas.samples import SampleRow, sample_rows
from trainer.errors import TrainerConfigError
from trainer.source import ConsumedRecord, FileSource, KafkaSource
from trainer.staleness import judge_staleness

__all__ = ["Lineage", "RewardBatch", "RewardConsumer", "SelectedSample", "Selection",
           "Staleness", "select"]

_HOUR_S = 3600.0


@dataclass(frozen=True)
class Staleness:
    """How far behind the policy a sample may be; None: no bound of that kind."""

    max_checkpoints: int | None = None  # registry generations behind the current policy
    max_hours: float | None = None  # since it was served (its event time)

    def __post_init__(self) -> None:
        if self.max_checkpoints is not None and self.max_checkpoints < 0:
            raise TrainerConfigError(f"max_checkpoints={self.max_checkpoints} must be >= 0")
        if self.max_hours is not None and not self.max_hours > 0:
            raise TrainerConfigError(f"max_hours={self.max_hours} must be positive")


@dataclass(frozen=True)
class Selection:
    orgs: frozenset[str] | None = None  # only these organisations' records (None: every org's)
    spec_version: str | None = None  # only records scored by this spec (None: any)
    staleness: Staleness = Staleness()


@dataclass(frozen=True)
class Lineage:
    """Where the policy being trained stands: its registry generation, and every checkpoint's."""

    current_generation: int
    generation_of: Callable[[str], int | None]

    @classmethod
    def of(cls, registry: Registry, model: str) -> Lineage:
        """The production checkpoint of ``model`` as the current policy (generation 0 when
        there is none yet)."""
        production = registry.production(model)
        current = registry.generation(production.checkpoint_id) if production else None
        return cls(current or 0, registry.generation)


@dataclass(frozen=True)
class SelectedSample:
    """One completion to train on: its row (``schemas.samples``), the key of the record it
    came from, and how many generations it lags the policy (None: not measured)."""

    row: SampleRow
    record_key: str
    lag: int | None


@dataclass
class Selected:
    """What a batch of records gives: per record kept (in order), its record and samples; and
    the count of everything consumed, kept or not, by reason."""

    kept: list[tuple[ConsumedRecord, list[SelectedSample]]] = field(default_factory=list)
    counts: Counter[str] = field(default_factory=Counter)

    @property
    def samples(self) -> list[SelectedSample]:
        return [sample for _, samples in self.kept for sample in samples]


def _age_problem(sample: Sample, max_hours: float | None, now: datetime) -> str | None:
    if max_hours is None:
        return None
    if sample.served_at is None:
        return "dropped_unknown_age"
    age_s = (now - sample.served_at).total_seconds()
    return "dropped_too_old" if age_s > max_hours * _HOUR_S else None


def select(records: Sequence[ConsumedRecord], selection: Selection, *,
           lineage: Lineage | None = None, now: datetime | None = None,
           dedupe: DedupeWindow[str] | None = None,
           problem: Callable[[Sample], str | None] | None = None) -> Selected:
    """The samples of ``records`` to train on (see the module docstring). ``problem``: a
    trainer's own reason to drop a sample (too long for its model...), judged first."""
    staleness = selection.staleness
    if staleness.max_checkpoints is not None and lineage is None:
        raise TrainerConfigError("a staleness bound in checkpoints needs the registry's "
                                 "lineage (Lineage.of(registry, model))")
    now = now or datetime.now(UTC)
    out = Selected()
    for consumed in records:
        record = consumed.record
        if record is not None and dedupe is not None and not dedupe.first_time(consumed.key):
            out.counts["records_duplicate"] += 1
            continue
        out.counts["records"] += 1
        if record is None:
            out.counts["records_refused" if consumed.refused else "records_unparseable"] += 1
            continue
        if selection.spec_version is not None and record.spec_version != selection.spec_version:
            out.counts["skipped_spec_version"] += 1
            continue
        if selection.orgs is not None and record.org_id not in selection.orgs:
            out.counts["skipped_other_org"] += 1
            continue
        kept = []
        for sample, row in zip(record.samples, sample_rows(record), strict=True):
            reason, lag = (problem(sample) if problem else None), None
            if reason is None and staleness.max_checkpoints is not None:
                assert lineage is not None
                verdict = judge_staleness(sample.checkpoint_id, lineage.current_generation,
                                          lineage.generation_of, staleness.max_checkpoints)
                reason, lag = (None if verdict.keep else f"dropped_{verdict.reason}"), verdict.lag
            reason = reason or _age_problem(sample, staleness.max_hours, now)
            out.counts[f"samples_{reason or 'kept'}"] += 1
            if reason is None:
                kept.append(SelectedSample(row, consumed.key, lag))
        if kept:
            out.kept.append((consumed, kept))
    return out


@dataclass
class RewardBatch:
    """Records consumed in one batch, in order (every one, usable or not: ``records[i].offset``
    is its place), and where the consumer stands after them (``positions``: the next offset
    per ``topic:partition``, what :meth:`RewardConsumer.commit` takes)."""

    records: list[ConsumedRecord]
    positions: dict[str, int]
    _select: Callable[[list[ConsumedRecord]], Selected]

    @cached_property
    def selected(self) -> Selected:
        return self._select(self.records)

    @property
    def samples(self) -> list[SelectedSample]:
        return self.selected.samples

    @property
    def counts(self) -> Counter[str]:
        return self.selected.counts


class RewardConsumer:
    """Batches of the ``rewards`` topic (or of a records file, one reward record a line, as
    ``rewardstream replay --out`` writes) under a :class:`Selection`; see the module
    docstring. ``positions`` (from a checkpoint) override the group's committed offsets."""

    def __init__(self, settings: Settings | None, group_id: str,
                 selection: Selection = Selection(), *,
                 lineage: Callable[[], Lineage | None] = lambda: None,
                 positions: dict[str, int] | None = None,
                 dedupe: DedupeWindow[str] | None = None, records_file: Path | None = None,
                 clock: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self.selection, self.dedupe = selection, dedupe
        self._lineage, self._clock = lineage, clock
        self.positions: dict[str, int] = dict(positions or {})
        if records_file is not None:
            self.source: FileSource | KafkaSource = FileSource(records_file, self.positions)
        elif settings is not None:
            self.source = KafkaSource(settings, group_id, self.positions)
        else:
            raise TrainerConfigError("give the Kafka settings or a records file")

    def next_batch(self, count: int, timeout_s: float | None = None,
                   stop: Callable[[], bool] = lambda: False) -> RewardBatch:
        """Up to ``count`` records: closed at ``count``, at ``timeout_s`` after the first
        arrived, or when ``stop()`` says so."""
        records = self.source.next_batch(count, timeout_s, stop)
        for record in records:
            if record.offset is not None:
                self.positions[f"{record.topic}:{record.partition}"] = record.offset + 1
        return RewardBatch(records, dict(self.positions), self._selected)

    def _selected(self, records: list[ConsumedRecord]) -> Selected:
        return select(records, self.selection, lineage=self._lineage(), now=self._clock(),
                      dedupe=self.dedupe)

    def exhausted(self) -> bool:
        """A records file read to its end (a Kafka topic never is)."""
        return isinstance(self.source, FileSource) and self.source.exhausted()

    def commit(self, positions: dict[str, int]) -> None:
        """Commit ``positions`` to the consumer group: call it once the step that used the
        records before them is durable."""
        self.source.commit(positions)

    def close(self) -> None:
        self.source.close()
