"""A seeded, pure generator of reward records for monitor tests, demos and benchmarks.

Traffic is a sequence of segments; in each, trajectories arrive as a Poisson process and are
split evenly over the segment's A/B arms, each arm served by one checkpoint with a behaviour
profile. The default profile is a healthy policy; the named variants are the failure modes the
detectors exist for (edit deferral by clarifying questions, broken tool calls, reward hacking,
slow serving).
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from schemas.rewards import RewardRecord, Sample

__all__ = ["PROFILES", "Profile", "Segment", "simulate"]

_ORGS = ("org-a", "org-b", "org-c")


@dataclass(frozen=True)
class Profile:
    p_edit: float = 0.62  # trajectory proposes at least one edit
    extra_edits_mean: float = 1.5  # Poisson extra edits beyond the first
    p_accept: float = 0.7  # per proposed edit
    kept_alpha: float = 8.0  # kept fraction ~ Beta(alpha, beta) at the horizon
    kept_beta: float = 2.0
    p_clarify: float = 0.08
    p_unambiguous: float = 0.5  # a clarification was on an unambiguous request
    p_broken: float = 0.03  # trajectory has broken tool calls
    tool_calls_mean: float = 4.0
    p_dissatisfied: float = 0.12
    latency_ms_median: float = 1800.0
    latency_sigma: float = 0.5  # log-normal spread


PROFILES: dict[str, Profile] = {
    "healthy": Profile(),
    "defers_edits": Profile(p_edit=0.30, p_clarify=0.45, p_unambiguous=0.8),
    "broken_calls": Profile(p_broken=0.15),
    # Many small edits that users accept and later undo: accepts pay, kept edits fall.
    "reward_hacking": Profile(extra_edits_mean=2.5, p_accept=0.95, kept_alpha=1.5, kept_beta=4.0),
    "slow": Profile(latency_ms_median=2600.0),
}

# Reward weights of the simulated spec: accepted and kept edits pay, failures cost.
_WEIGHTS = {"accepted": 1.0, "kept": 0.5, "broken": -1.0, "dissatisfied": -0.8,
            "latency": -0.1, "unambiguous_clarification": -0.3}


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


def _signals(rng: random.Random, p: Profile) -> dict[str, float]:
    edits = 1 + _poisson(rng, p.extra_edits_mean) if rng.random() < p.p_edit else 0
    accepted = sum(rng.random() < p.p_accept for _ in range(edits))
    clarifications = 1 if rng.random() < p.p_clarify else 0
    calls = 1 + _poisson(rng, p.tool_calls_mean)
    broken = min(calls, 1 + _poisson(rng, 0.5)) if rng.random() < p.p_broken else 0
    dissatisfied = 1 if rng.random() < p.p_dissatisfied else 0
    latency = p.latency_ms_median * math.exp(rng.gauss(0.0, p.latency_sigma))
    return {
        "completions": float(1 + clarifications), "edits_proposed": float(edits),
        "edits_accepted": float(accepted), "edits_rejected": float(edits - accepted),
        "edits_reverted": 0.0,
        "kept_fraction": rng.betavariate(p.kept_alpha, p.kept_beta) if accepted else 0.0,
        "tool_calls": float(calls), "broken_tool_calls": float(broken),
        "clarifications": float(clarifications),
        "clarifications_unambiguous": float(clarifications and rng.random() < p.p_unambiguous),
        "followups": float(dissatisfied + (rng.random() < 0.2)),
        "dissatisfied_followups": float(dissatisfied), "latency_ms_mean": latency,
        "ttft_ms_mean": latency * 0.15, "turns": float(1 + _poisson(rng, 2.0)),
    }


def _components(s: dict[str, float]) -> dict[str, float]:
    return {
        "accepted": _WEIGHTS["accepted"] * s["edits_accepted"],
        "kept": _WEIGHTS["kept"] * s["kept_fraction"] * s["edits_accepted"],
        "broken": _WEIGHTS["broken"] * s["broken_tool_calls"],
        "dissatisfied": _WEIGHTS["dissatisfied"] * s["dissatisfied_followups"],
        "latency": _WEIGHTS["latency"] * s["latency_ms_mean"] / 1000,
        "unambiguous_clarification":
            _WEIGHTS["unambiguous_clarification"] * s["clarifications_unambiguous"],
    }


def _record(index: int, checkpoint: str, arm: str, ended_at: datetime,
            signals: dict[str, float], org: str) -> RewardRecord:
    components = _components(signals)
    sample = Sample(completion_id=f"c{index}", checkpoint_id=checkpoint, prompt_token_ids=[1, 2],
                    completion_token_ids=[3], behaviour_logprobs=[-0.5])
    return RewardRecord(
        trajectory_id=f"sim-{index}", spec_version="sim-v1", checkpoint_id=checkpoint, arm=arm,
        org_id=org, outcome="completed", ended_at=ended_at, finalized_by="complete",
        finalized_at=ended_at, samples=[sample], components=components,
        total=sum(components.values()), signals=signals, event_ids=[],
    )


def _pick_arm(rng: random.Random, segment: Segment) -> str:
    arms = list(segment.arms)
    weights = [segment.split.get(arm, 1.0) for arm in arms]
    return rng.choices(arms, weights)[0]


def simulate(
    segments: list[Segment], *, seed: int = 0, rate_per_s: float = 2.0,
    start: datetime = datetime(2026, 1, 1, tzinfo=UTC),
) -> Iterator[RewardRecord]:
    """Reward records in event-time order; the same seed gives the same records."""
    rng = random.Random(seed)
    clock, index = start, 0
    for segment in segments:
        for _ in range(segment.trajectories):
            clock += timedelta(seconds=rng.expovariate(rate_per_s))
            arm = _pick_arm(rng, segment)
            checkpoint, profile = segment.arms[arm]
            yield _record(index, checkpoint, arm, clock, _signals(rng, profile), rng.choice(_ORGS))
            index += 1
