"""The on-policy bound: which samples are close enough to the current policy to train on.

Staleness is measured in lineage generations: a sample served by checkpoint S, trained into an
actor that started from checkpoint C, is ``generation(C) - generation(S)`` updates old. Samples
beyond the bound, and samples naming a checkpoint the registry does not know, are dropped and
counted, never silently reweighted.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["StalenessVerdict", "judge_staleness"]


@dataclass(frozen=True)
class StalenessVerdict:
    keep: bool
    reason: str  # "fresh", "stale" or "unknown_checkpoint"
    lag: int | None  # generations behind the current policy (None when unknown)


def judge_staleness(
    sample_checkpoint: str, current_generation: int, generation_of: Callable[[str], int | None],
    max_lag: int,
) -> StalenessVerdict:
    generation = generation_of(sample_checkpoint)
    if generation is None:
        return StalenessVerdict(False, "unknown_checkpoint", None)
    lag = current_generation - generation
    if lag > max_lag:
        return StalenessVerdict(False, "stale", lag)
    return StalenessVerdict(True, "fresh", lag)
