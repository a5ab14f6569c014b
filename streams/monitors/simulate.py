"""A seeded, pure generator of reward records for monitor tests, demos and benchmarks.

Traffic is a sequence of segments; in each, trajectories arrive as a Poisson process and are
split evenly over the segment's A/B arms, each arm served by one checkpoint with a behaviour
profile. The default profile is a healthy policy; the named variants are the failure modes the
detectors exist for (edit deferral by clarifying questions, broken tool calls, reward hacking,
slow serving). Each trajectory's signals carry the reward join's names and meanings, and the
reward spec scores them as it scores the join's (``streams.reward.components``).
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from schemas.rewards import RewardRecord, Sample, Signal
from streams.monitors.profiles import PROFILES, Profile
from streams.reward import components
from streams.spec import RewardSpec, load_spec

# PROFILES and Profile live in streams.monitors.profiles (which the CLI imports without the
# reward's models); they are named here too, beside the Segment they go into.
__all__ = ["PROFILES", "Profile", "Segment", "simulate"]

_ORGS = ("org-a", "org-b", "org-c")


@dataclass(frozen=True)
class Segment:
    arms: dict[str, tuple[str, Profile]]  # arm → (checkpoint id, profile)
    trajectories: int
    split: dict[str, float] = field(default_factory=dict)  # arm → share; even when empty


def _poisson(rng: random.Random, mean: float) -> int:
    limit, k, product = math.exp(-mean), 0, rng.random()
    while product > limit:
        k += 1
        product *= rng.random()
    return k


def _signals(rng: random.Random, p: Profile, horizons_s: tuple[int, ...]) -> dict[str, float]:
    """Measurements named and meant as the reward join's (``streams.reward.signals``). An
    accepted edit survives at the same rate at every horizon of the spec: what users undo, they
    undo before the first one."""
    edits = 1 + _poisson(rng, p.extra_edits_mean) if rng.random() < p.p_edit else 0
    accepted = sum(rng.random() < p.p_accept for _ in range(edits))
    clarifications = 1 if rng.random() < p.p_clarify else 0
    calls = 1 + _poisson(rng, p.tool_calls_mean)
    broken = min(calls, 1 + _poisson(rng, 0.5)) if rng.random() < p.p_broken else 0
    dissatisfied = 1 if rng.random() < p.p_dissatisfied else 0
    latency = p.latency_ms_median * math.exp(rng.gauss(0.0, p.latency_sigma))
    surviving = rng.betavariate(p.kept_alpha, p.kept_beta) if accepted else 0.0
    kept = surviving * accepted / edits if edits else 0.0  # share of the proposed edits
    signals = {
        Signal.COMPLETIONS: float(1 + clarifications), Signal.COMPLETIONS_FAILED: 0.0,
        Signal.EDITS_PROPOSED: float(edits), Signal.EDITS_ACCEPTED: float(accepted),
        Signal.EDITS_REJECTED: float(edits - accepted), Signal.EDITS_REVERTED: 0.0,
        Signal.EDITS_UNDECIDED: 0.0, Signal.KEPT_FRACTION: kept,
        Signal.PERSISTENCE_CHECKS: float(accepted * len(horizons_s)),
        Signal.PERSISTENCE_MISSING: 0.0,
        Signal.TOOL_CALLS: float(calls), Signal.BROKEN_TOOL_CALLS: float(broken),
        Signal.CLARIFICATIONS: float(clarifications),
        Signal.CLARIFICATIONS_UNAMBIGUOUS:
            float(clarifications and rng.random() < p.p_unambiguous),
        Signal.FOLLOWUPS: float(dissatisfied + (rng.random() < 0.2)),
        Signal.DISSATISFIED_FOLLOWUPS: float(dissatisfied), Signal.LATENCY_MS_MEAN: latency,
        Signal.TTFT_MS_MEAN: latency * 0.15, Signal.TURNS: float(1 + _poisson(rng, 2.0)),
    }
    signals.update({Signal.kept_fraction_at(h): kept for h in horizons_s})
    return signals


def _record(index: int, checkpoint: str, arm: str, ended_at: datetime,
            signals: dict[str, float], org: str, spec: RewardSpec) -> RewardRecord:
    terms = components(signals, "completed", spec)
    sample = Sample(completion_id=f"c{index}", checkpoint_id=checkpoint, prompt_token_ids=[1, 2],
                    completion_token_ids=[3], behaviour_logprobs=[-0.5])
    return RewardRecord(
        trajectory_id=f"sim-{index}", spec_version=spec.version, checkpoint_id=checkpoint,
        arm=arm, org_id=org, outcome="completed", ended_at=ended_at, finalized_by="complete",
        finalized_at=ended_at, samples=[sample], components=terms, total=sum(terms.values()),
        signals=signals, event_ids=[],
    )


def _pick_arm(rng: random.Random, segment: Segment) -> str:
    arms = list(segment.arms)
    weights = [segment.split.get(arm, 1.0) for arm in arms]
    return rng.choices(arms, weights)[0]


def simulate(
    segments: list[Segment], *, seed: int = 0, rate_per_s: float = 2.0,
    start: datetime = datetime(2026, 1, 1, tzinfo=UTC), spec: RewardSpec | None = None,
) -> Iterator[RewardRecord]:
    """Reward records in event-time order, scored by ``spec`` (the shipped default when
    none) as the reward join scores them; the same seed gives the same records."""
    spec = spec or load_spec()
    rng = random.Random(seed)
    clock, index = start, 0
    for segment in segments:
        for _ in range(segment.trajectories):
            clock += timedelta(seconds=rng.expovariate(rate_per_s))
            arm = _pick_arm(rng, segment)
            checkpoint, profile = segment.arms[arm]
            signals = _signals(rng, profile, spec.horizons_s)
            yield _record(index, checkpoint, arm, clock, signals, rng.choice(_ORGS), spec)
            index += 1
