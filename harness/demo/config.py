"""The demo's settings: cycles, traffic, RL hyper-parameters, the gate and the canary, ports,
and the demo thresholds."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from harness.policy.sft import SftConfig
from streams.monitors.config import CONFIG_PROFILES
from streams.release.rule import SequentialRule

__all__ = ["DEMO_MONITOR_THRESHOLDS", "DEMO_WINDOW_S", "DemoConfig"]

# The monitors' "trial" profile (its sizes and why: streams.monitors.config.CONFIG_PROFILES).
DEMO_WINDOW_S: int = CONFIG_PROFILES["trial"]["window_s"]
DEMO_MONITOR_THRESHOLDS = {
    **CONFIG_PROFILES["trial"],
    # Traffic pauses while each cycle trains: a volume drop is the demo's rhythm, not an outage.
    "detectors": {"ingest_volume_drop": {"enabled": False}},
}


@dataclass(frozen=True)
class DemoConfig:
    run_dir: Path
    cycles: int = 5
    trajectories: int = 160  # per cycle
    # By default every cycle meets the same cohort of users and tasks (with the same sampling
    # seeds), so a change between cycles is the checkpoint's, not the draw's.
    fresh_cohorts: bool = False
    concurrency: int = 2  # trajectories in flight at once
    # Sampling, in serving and in the gate's evals. At 1 the warm policy's samples spread over
    # right fixes, wrong fixes, questions and broken calls: the variety RL learns from.
    temperature: float = 1.0
    # One of harness.policy.expert.HACKS, deployed after the first cycle, with the hack on
    # hack_strength of its demonstrations (the share of trajectories it is meant to affect).
    hack: str | None = None
    hack_strength: float = 1.0
    # RL (LoRA over the warm-started policy).
    lr: float = 2e-3
    lora_rank: int = 8
    # The attention and MLP projections and the output head, so an update can move the token
    # choices themselves (tool syntax, which numbered fix) directly.
    lora_targets: str = "q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj,lm_head"
    batch_records: int = 32
    # Gate: held-out tasks per family and the non-inferiority margin. Its evals sample at the
    # serving temperature with fixed seeds, so candidate and incumbent draw alike and differ on
    # a task only where their distributions do; greedy evals of this policy sit on a knife edge
    # (its fix choices are far from certain), where any update flips many tasks both ways.
    # The margin is wide for this many tasks, but a collapse (a family losing a third of its
    # solves) fails: the interval's measured width is in docs/trainer-and-release.md#the-gate.
    eval_per_family: int = 24
    gate_margin: float = 0.3
    # A candidate that passes on solve rate but breaks tool calls on more held-out tasks is the
    # regression the canary's critical broken-call alert otherwise catches in front of users
    # (the run that showed it: docs/trainer-and-release.md#the-gate). The gate fails it when
    # that share is surely up by more than this.
    gate_broken_call_tolerance: float = 0.05
    # Canary: a candidate that passes the gate serves this share of the users (sticky by
    # user) beside production, and the release controller (`rewardstream release run`, started
    # with the services) decides it by its sequential rule (streams.release.rule): promoted once
    # the always-valid lower bound of the reward difference (alpha ab_alpha) rules out a loss
    # of ab_margin, rejected once the canary is surely worse or a guardrail surely worse beyond
    # its tolerance. The cycle's traffic goes on, round after round of the cohort (new users
    # and sampling seeds), until it decides or canary_max_trajectories (both arms) is reached,
    # where the rule rejects. Half the users, because an even split needs the fewest
    # trajectories; what a decision costs: docs/trainer-and-release.md#the-rules-error-rates.
    canary_share: float = 0.5
    ab_margin: float = 0.15
    ab_alpha: float = 0.05
    canary_max_trajectories: int = 1600
    seed: int = 0
    # Ports of the services (loopback).
    ingest_port: int = 18400
    gateway_port: int = 18000
    console_port: int = 18090
    sft: SftConfig = field(default_factory=SftConfig)  # the warm start
    rewards_timeout_s: float = 60.0  # how long a cycle waits for its reward records
    decision_timeout_s: float = 120.0  # how long the last records' look may take to decide

    @property
    def hack_label(self) -> str:
        """``broken-calls:0.3`` (the --hack it was given), or empty without a hack."""
        return f"{self.hack}:{self.hack_strength:g}" if self.hack else ""

    @property
    def log_dir(self) -> Path:
        return self.run_dir / "logs"

    def rule(self) -> SequentialRule:
        """The canary's rule as the demo's release controller runs it; an hour at most."""
        return SequentialRule(margin=self.ab_margin, alpha=self.ab_alpha,
                              max_trajectories=self.canary_max_trajectories,
                              max_duration_s=3600.0)
