"""Per-cycle figures from a cycle's reward records (pure), defined as the monitors define them:
each record's contributions (``streams.monitors.windows.reward_contributions``) summed over the
cycle, so the demo's kept-edit rate is the console's."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from schemas.metrics import COMPONENT_METRIC_PREFIX
from schemas.rewards import RewardRecord
from streams.monitors.windows import reward_contributions

__all__ = ["CycleFigures", "cycle_figures"]


@dataclass(frozen=True)
class CycleFigures:
    trajectories: int
    mean_reward: float
    kept_edit_rate: float  # edits kept at the longest horizon per edit proposed
    kept_edits: float  # edits kept at the longest horizon per trajectory
    edit_rate: float  # share of trajectories that proposed an edit
    dissatisfied_rate: float  # share with a dissatisfied follow-up
    broken_call_rate: float  # share with a broken tool call
    clarification_rate: float  # share that asked a clarifying question
    latency_ms: float  # mean of the trajectories' mean completion latency
    components: dict[str, float] = field(default_factory=dict)  # mean of each reward term


def cycle_figures(records: Sequence[RewardRecord]) -> CycleFigures:
    """Figures of one cycle; NaN where nothing was measured (everywhere when no record came)."""
    sums: dict[str, list[float]] = {}  # metric -> [weight, weighted value]
    for record in records:
        for name, (weight, value) in reward_contributions(record).items():
            total = sums.setdefault(name, [0.0, 0.0])
            total[0] += weight
            total[1] += value

    def ratio(name: str) -> float:
        weight, value = sums.get(name, (0.0, 0.0))
        return value / weight if weight else float("nan")

    return CycleFigures(
        trajectories=len(records),
        mean_reward=ratio("reward"),
        kept_edit_rate=ratio("kept_edit_rate"),
        kept_edits=ratio("kept_edits"),
        edit_rate=ratio("edit_rate"),
        dissatisfied_rate=ratio("dissatisfied_followup_rate"),
        broken_call_rate=ratio("broken_call_trajectory_rate"),
        clarification_rate=ratio("clarification_rate"),
        latency_ms=ratio("latency_ms"),
        components={name.removeprefix(COMPONENT_METRIC_PREFIX): ratio(name)
                    for name in sorted(sums) if name.startswith(COMPONENT_METRIC_PREFIX)},
    )
