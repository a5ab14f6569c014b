"""Per-cycle figures from a cycle's reward records (pure)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from schemas.rewards import RewardRecord

__all__ = ["CycleFigures", "cycle_figures"]


@dataclass(frozen=True)
class CycleFigures:
    trajectories: int
    mean_reward: float
    kept_edit_rate: float  # mean share of proposed edits still kept at the longest horizon
    edit_rate: float  # share of trajectories that proposed an edit
    dissatisfied_rate: float  # share with a dissatisfied follow-up
    broken_call_rate: float  # share with a broken tool call
    clarification_rate: float  # share that asked a clarifying question
    latency_ms: float  # mean of the trajectories' mean completion latency
    components: dict[str, float] = field(default_factory=dict)  # mean of each reward term


def _share(records: Sequence[RewardRecord], signal: str) -> float:
    return sum(r.signals.get(signal, 0.0) > 0 for r in records) / len(records)


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


def cycle_figures(records: Sequence[RewardRecord]) -> CycleFigures:
    """Figures of one cycle; NaN everywhere when no record came."""
    if not records:
        nan = float("nan")
        return CycleFigures(0, nan, nan, nan, nan, nan, nan, nan)
    names = sorted({name for r in records for name in r.components})
    return CycleFigures(
        trajectories=len(records),
        mean_reward=_mean([r.total for r in records]),
        kept_edit_rate=_mean([r.signals.get("kept_fraction", 0.0) for r in records]),
        edit_rate=_share(records, "edits_proposed"),
        dissatisfied_rate=_share(records, "dissatisfied_followups"),
        broken_call_rate=_share(records, "broken_tool_calls"),
        clarification_rate=_share(records, "clarifications"),
        latency_ms=_mean([r.signals.get("latency_ms_mean", 0.0) for r in records]),
        components={n: _mean([r.components.get(n, 0.0) for r in records]) for n in names},
    )
