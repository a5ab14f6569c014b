"""Advantages for one sample per prompt: an EMA baseline per task family, then batch whitening.

Production traffic gives one completion per prompt, so there are no groups to compare within
(GRPO/RLOO need at least two). Each record is scored against the running mean reward of its task
family *before* that mean absorbs the record, and the batch is then whitened (REINFORCE++ style)
so the step size does not depend on the reward scale.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

__all__ = ["EmaBaseline", "compute_advantages", "whiten"]


@dataclass
class EmaBaseline:
    """The running mean reward per task family; ``decay`` near 1 remembers ~1/(1-decay) records."""

    decay: float = 0.9
    values: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, object]:
        return {"decay": self.decay, "values": dict(sorted(self.values.items()))}

    @classmethod
    def from_dict(cls, data: dict[str, object]) -> EmaBaseline:
        values = data.get("values", {})
        assert isinstance(values, dict)
        decay = data["decay"]
        assert isinstance(decay, (int, float))
        return cls(decay=float(decay), values={str(k): float(v) for k, v in values.items()})


def whiten(values: Sequence[float], eps: float = 1e-6) -> list[float]:
    """Centre and scale to unit variance (population std); fewer than two values stay as they
    are."""
    n = len(values)
    if n < 2:
        return list(values)
    mean = sum(values) / n
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / n)
    return [(v - mean) / (std + eps) for v in values]


def compute_advantages(
    rewards: Sequence[float], families: Sequence[str], baseline: EmaBaseline,
    whiten_batch: bool = True,
) -> list[float]:
    """One advantage per record, in order; updates ``baseline`` in place.

    Every record is scored against the baseline as it stood before the batch (so the order of
    records inside a batch does not matter for the advantage); a family seen for the first time
    starts from its mean reward in this batch. The baseline then absorbs the records in order.
    """
    if len(rewards) != len(families):
        raise ValueError(f"{len(rewards)} rewards but {len(families)} families")
    start = dict(baseline.values)
    for family in set(families) - start.keys():
        mine = [r for r, f in zip(rewards, families, strict=False) if f == family]
        start[family] = sum(mine) / len(mine)
    raw = [r - start[f] for r, f in zip(rewards, families, strict=False)]
    values = dict(start)
    for r, f in zip(rewards, families, strict=False):
        values[f] = baseline.decay * values[f] + (1.0 - baseline.decay) * r
    baseline.values = values
    return whiten(raw) if whiten_batch else raw
