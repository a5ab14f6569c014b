"""From consumed reward records to training samples: dedupe, on-policy filter, advantages.

Pure: no I/O. Every record or sample that does not train is counted under its reason, so the
checkpoint's statistics account for every record consumed.
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from schemas.rewards import RewardRecord, Sample
from trainer.advantages import EmaBaseline, compute_advantages
from trainer.batch import TrainSample
from trainer.staleness import judge_staleness

__all__ = ["ConsumedRecord", "DedupeWindow", "PreparedBatch", "prepare_batch"]


@dataclass(frozen=True)
class ConsumedRecord:
    key: str  # the Kafka record key: trajectory id and spec version
    record: RewardRecord | None  # None when the value was not a valid RewardRecord
    topic: str | None = None
    partition: int | None = None
    offset: int | None = None


class DedupeWindow:
    """The most recent ``capacity`` record keys, oldest forgotten first."""

    def __init__(self, capacity: int, keys: Iterable[str] = ()) -> None:
        self.capacity = capacity
        self._keys: OrderedDict[str, None] = OrderedDict((k, None) for k in keys)

    def first_time(self, key: str) -> bool:
        """True the first time ``key`` is seen (and remembers it); False for a redelivery."""
        if key in self._keys:
            return False
        self._keys[key] = None
        while len(self._keys) > self.capacity:
            self._keys.popitem(last=False)
        return True

    def keys(self) -> list[str]:
        return list(self._keys)


@dataclass
class PreparedBatch:
    samples: list[TrainSample]
    counts: Counter[str] = field(default_factory=Counter)
    lags: list[int] = field(default_factory=list)
    spec_versions: set[str] = field(default_factory=set)
    reward_sum: float = 0.0


def _malformed(sample: Sample, max_seq_len: int) -> str | None:
    if not sample.prompt_token_ids or not sample.completion_token_ids:
        return "dropped_empty"
    if len(sample.behaviour_logprobs) != len(sample.completion_token_ids):
        return "dropped_logprob_length"
    if len(sample.prompt_token_ids) + len(sample.completion_token_ids) > max_seq_len:
        return "dropped_too_long"
    return None


def prepare_batch(
    records: Sequence[ConsumedRecord], baseline: EmaBaseline, *, current_generation: int,
    generation_of: Callable[[str], int | None], max_staleness: int, max_seq_len: int,
    spec_version: str | None, whiten: bool,
) -> PreparedBatch:
    """Samples with advantages for the records that have any trainable sample; updates baseline."""
    out = PreparedBatch(samples=[])
    kept: list[tuple[RewardRecord, list[Sample]]] = []
    for consumed in records:
        record = consumed.record
        out.counts["records"] += 1
        if record is None:
            out.counts["records_unparseable"] += 1
            continue
        if spec_version is not None and record.spec_version != spec_version:
            out.counts["skipped_spec_version"] += 1
            continue
        fresh = []
        for sample in record.samples:
            problem = _malformed(sample, max_seq_len)
            verdict = judge_staleness(sample.checkpoint_id, current_generation, generation_of,
                                      max_staleness)
            reason = problem or ("kept" if verdict.keep else f"dropped_{verdict.reason}")
            out.counts[f"samples_{reason}"] += 1
            if reason == "kept":
                fresh.append(sample)
                out.lags.append(verdict.lag or 0)
        if fresh:
            kept.append((record, fresh))
    advantages = compute_advantages([r.total for r, _ in kept], [r.task_family for r, _ in kept],
                                    baseline, whiten_batch=whiten)
    for (record, fresh), advantage in zip(kept, advantages):
        out.counts["records_trained"] += 1
        out.spec_versions.add(record.spec_version)
        out.reward_sum += record.total
        out.samples.extend(
            TrainSample(tuple(s.prompt_token_ids), tuple(s.completion_token_ids),
                        tuple(s.behaviour_logprobs), advantage) for s in fresh)
    return out
