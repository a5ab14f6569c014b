"""From consumed reward records to training samples: the selection every reader of rewards makes
(dedupe, orgs, spec, staleness: ``trainer.consumer.select``), what this model cannot take, and
advantages.

Pure: no I/O. Every record or sample that does not train is counted under its reason, so the
checkpoint's statistics account for every record consumed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from schemas.dedupe import DedupeWindow
from schemas.rewards import Sample
from trainer.advantages import EmaBaseline, compute_advantages
from trainer.batch import TrainSample
from trainer.consumer import Lineage, Selection, select
from trainer.source import ConsumedRecord

__all__ = ["PreparedBatch", "prepare_batch"]


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
    records: Sequence[ConsumedRecord], baseline: EmaBaseline, *, selection: Selection,
    lineage: Lineage, max_seq_len: int, vocab_size: int, whiten: bool,
    dedupe: DedupeWindow[str] | None = None, now: datetime | None = None,
) -> PreparedBatch:
    """Samples with advantages for the records that have any trainable sample (chosen by
    :func:`trainer.consumer.select`, as every reader of rewards chooses them); updates
    ``baseline``."""
    chosen = select(records, selection, lineage=lineage, now=now, dedupe=dedupe,
                    problem=lambda sample: _malformed(sample, max_seq_len, vocab_size))
    out = PreparedBatch(samples=[], counts=chosen.counts)
    kept = [(consumed.record, samples) for consumed, samples in chosen.kept
            if consumed.record is not None]
    advantages = compute_advantages([r.total for r, _ in kept], [r.task_family for r, _ in kept],
                                    baseline, whiten_batch=whiten)
    for (record, fresh), advantage in zip(kept, advantages, strict=True):
        out.counts["records_trained"] += 1
        out.spec_versions.add(record.spec_version)
        out.orgs.add(record.org_id or "")
        out.reward_sum += record.total
        out.lags.extend(s.lag or 0 for s in fresh)
        out.samples.extend(
            TrainSample(tuple(s.row.prompt_token_ids), tuple(s.row.completion_token_ids),
                        tuple(s.row.behaviour_logprobs), advantage) for s in fresh)
    return out
