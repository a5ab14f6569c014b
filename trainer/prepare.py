"""From consumed reward records to training samples: dedupe, on-policy filter, advantages.

Pure: no I/O. Every record or sample that does not train is counted under its reason, so the
checkpoint's statistics account for every record consumed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from schemas.events import GATEWAY_PRODUCER
from schemas.rewards import RewardRecord, Sample
from trainer.advantages import EmaBaseline, compute_advantages
from trainer.batch import TrainSample
from trainer.staleness import judge_staleness

__all__ = ["ConsumedRecord", "PreparedBatch", "prepare_batch", "refusal"]


@dataclass(frozen=True)
class ConsumedRecord:
    key: str  # the Kafka record key: trajectory id and spec version
    record: RewardRecord | None  # None when the value was not a valid RewardRecord, or refused
    topic: str | None = None
    partition: int | None = None
    offset: int | None = None
    refused: str | None = None  # why a valid record must not be trained on


def refusal(record: RewardRecord) -> str | None:
    """Why the trainer must not learn from ``record``: a completion the gateway did not serve.
    Behaviour logprobs are the importance ratio's denominator; only the gateway, which sampled
    the completion, can say what they were (a client could write any)."""
    for index, sample in enumerate(record.samples):
        if sample.producer != GATEWAY_PRODUCER:
            return (f"samples.{index}.producer: completion {sample.completion_id!r} was written "
                    f"by {sample.producer or 'an unnamed producer'}, not the gateway; its "
                    "behaviour logprobs cannot be trusted")
    return None


@dataclass
class PreparedBatch:
    samples: list[TrainSample]
    counts: Counter[str] = field(default_factory=Counter)
    lags: list[int] = field(default_factory=list)
    spec_versions: set[str] = field(default_factory=set)
    orgs: set[str] = field(default_factory=set)  # of the records trained on
    reward_sum: float = 0.0


def _malformed(sample: Sample, max_seq_len: int, vocab_size: int) -> str | None:
    if not sample.prompt_token_ids or not sample.completion_token_ids:
        return "dropped_empty"
    # A token the model has no embedding for (served by another model, or made up) would stop
    # the update with an index error, and the restarted trainer would meet it again.
    if max(max(sample.prompt_token_ids), max(sample.completion_token_ids)) >= vocab_size:
        return "dropped_token_out_of_vocab"
    if len(sample.behaviour_logprobs) != len(sample.completion_token_ids):
        return "dropped_logprob_length"
    if len(sample.prompt_token_ids) + len(sample.completion_token_ids) > max_seq_len:
        return "dropped_too_long"
    return None


def prepare_batch(
    records: Sequence[ConsumedRecord], baseline: EmaBaseline, *, current_generation: int,
    generation_of: Callable[[str], int | None], max_staleness: int, max_seq_len: int,
    vocab_size: int, spec_version: str | None, whiten: bool,
    orgs: frozenset[str] | None = None,
) -> PreparedBatch:
    """Samples with advantages for the records that have any trainable sample; updates baseline.
    ``orgs``: train only on these organisations' records (None: every organisation's)."""
    out = PreparedBatch(samples=[])
    kept: list[tuple[RewardRecord, list[Sample]]] = []
    for consumed in records:
        record = consumed.record
        out.counts["records"] += 1
        if record is None:
            out.counts["records_refused" if consumed.refused else "records_unparseable"] += 1
            continue
        if spec_version is not None and record.spec_version != spec_version:
            out.counts["skipped_spec_version"] += 1
            continue
        if orgs is not None and record.org_id not in orgs:
            out.counts["skipped_other_org"] += 1
            continue
        fresh = []
        for sample in record.samples:
            problem = _malformed(sample, max_seq_len, vocab_size)
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
    for (record, fresh), advantage in zip(kept, advantages, strict=False):
        out.counts["records_trained"] += 1
        out.spec_versions.add(record.spec_version)
        out.orgs.add(record.org_id or "")
        out.reward_sum += record.total
        out.samples.extend(
            TrainSample(tuple(s.prompt_token_ids), tuple(s.completion_token_ids),
                        tuple(s.behaviour_logprobs), advantage) for s in fresh)
    return out
