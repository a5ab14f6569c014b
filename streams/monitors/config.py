"""Detector thresholds and window sizes, with defaults; overridable from a YAML or JSON file.

Each detector is one or more one-sided CUSUM tests (see ``stats``); it fires when every test's
statistic reaches ``threshold`` and clears when one of them falls back to 0. The design
alternative of each test (the shift it is tuned to catch fastest) is set per test here.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Literal

import yaml

from schemas.alerts import Severity
from streams.monitors.errors import MonitorConfigError

__all__ = ["CONFIG_PROFILES", "DetectorSpec", "MonitorConfig", "TestSpec", "default_detectors",
           "load_config"]

Family = Literal["bernoulli", "gaussian", "poisson"]
Direction = Literal["up", "down"]


@dataclass(frozen=True)
class TestSpec:
    """One CUSUM on one metric.

    The alternative is ``baseline·(1 ± relative)`` for rates and counts, floored at an absolute
    change of ``absolute``; for gaussian metrics it is ``absolute + relative·|baseline|`` plus
    ``sigmas`` baseline standard deviations.
    """

    metric: str
    family: Family
    direction: Direction
    relative: float = 0.0
    absolute: float = 0.0
    sigmas: float = 0.0


@dataclass(frozen=True)
class DetectorSpec:
    name: str
    scope: Literal["rewards", "ingest"]
    title: str
    severity: Severity
    tests: tuple[TestSpec, ...]
    runbook: str
    enabled: bool = True


def default_detectors() -> tuple[DetectorSpec, ...]:
    return (
        DetectorSpec(
            "edit_rate_collapse", "rewards", "Edit rate collapsed against the previous checkpoint",
            "critical", (TestSpec("edit_rate", "bernoulli", "down", relative=0.25),),
            "The checkpoint proposes far fewer edits than its predecessor. Check whether it "
            "defers work with clarifying questions (clarification_rate) or stops early. If the "
            "drop is real and the candidate is serving users, roll it back from the console and "
            "review the reward terms for edits and clarifications before the next training run."),
        DetectorSpec(
            "broken_call_spike", "rewards", "Broken tool calls spiked",
            "critical",
            (TestSpec("broken_call_trajectory_rate", "bernoulli", "up", relative=1.0,
                      absolute=0.02),),
            "More trajectories contain malformed or invalid tool calls than under the previous "
            "checkpoint. The policy may be emitting broken calls to dodge negative reward on hard "
            "tasks. Confirm broken calls are rewarded as explicit negatives, inspect sample "
            "trajectories, and roll the checkpoint back if users are affected."),
        DetectorSpec(
            "clarification_spike", "rewards", "Clarifying questions spiked", "warning",
            (TestSpec("clarification_rate", "bernoulli", "up", relative=0.5, absolute=0.03),),
            "The checkpoint asks clarifying questions much more often. On unambiguous requests "
            "this defers edits it could be penalised for (compare "
            "unambiguous_clarification_rate). Watch the edit rate; tune the clarification term "
            "of the reward spec if the questions are not needed."),
        DetectorSpec(
            "reward_kept_divergence", "rewards",
            "Reward rising while kept edits fall (over-optimisation)", "critical",
            (TestSpec("reward", "gaussian", "up", sigmas=0.15),
             TestSpec("kept_edits", "gaussian", "down", sigmas=0.15)),
            "Mean reward went up while the edits users keep went down: the policy is optimising "
            "the proxy, not the outcome. Find which reward component rose (evidence), stop "
            "promoting descendants of this checkpoint, roll back, and fix the reward spec."),
        DetectorSpec(
            "latency_regression", "rewards", "Latency regressed", "warning",
            (TestSpec("log_latency", "gaussian", "up", absolute=math.log(1.2)),),
            "Per-trajectory latency rose by about 20% or more against the previous checkpoint. "
            "Check longer completions (turns, tokens), serving load and the engine version."),
        DetectorSpec(
            "ingest_volume_drop", "ingest", "Ingest volume dropped", "critical",
            (TestSpec("ingest_events", "poisson", "down", relative=0.5),),
            "Accepted events per window halved against the trailing windows. Check the ingest "
            "service, client SDK releases and API keys; a silent stop also lands here."),
        DetectorSpec(
            "dead_letter_spike", "ingest", "Dead-letter rate spiked", "warning",
            (TestSpec("dead_letter_rate", "bernoulli", "up", relative=2.0, absolute=0.01),),
            "More events are rejected than in the trailing windows. Read the reasons on the "
            "events.deadletter topic; a client or schema release is the usual cause."),
    )


@dataclass(frozen=True)
class MonitorConfig:
    """Window and detector settings; every number here is a documented default."""

    window_s: int = 60  # tumbling event-time window
    grace_s: int = 30  # windows close when the watermark (max event time − grace) passes them
    # A reward record timed further ahead of the worker's clock than this is quarantined: it
    # would move the watermark past every open window and make all later records late.
    max_future_s: int = 24 * 3600
    # CUSUM alarm threshold h: false alarms are at most one per e**h windows per key and test.
    threshold: float = 14.0
    cap_factor: float = 2.0  # S is capped at cap_factor·h, bounding the time to clear
    min_baseline_n: float = 300.0  # baseline weight a test needs before it runs
    min_current_n: float = 50.0  # weight since the CUSUM's last reset before it may fire
    baseline_z: float = 2.0  # baseline taken at this many standard errors towards "no alarm"
    ingest_baseline_windows: int = 30  # trailing windows of the ingest baseline
    confidence: float = 0.95  # intervals shown as evidence
    # A critical alert fires only when each test's interval excludes every change smaller than
    # this fraction of the effect the test is designed for (TestSpec.relative): for the edit-rate
    # collapse (designed for −25%), an interval that reaches above −6.25% waits.
    critical_margin: float = 0.25
    auto_protect: bool = False  # critical alert on a newly promoted checkpoint → rollback
    detectors: tuple[DetectorSpec, ...] = field(default_factory=default_detectors)


# Named starting points for load_config. The defaults want ~300 baseline trajectories per
# checkpoint and windows of a minute; a first trial (or a demo) serves a checkpoint minutes of
# traffic, well under that, so "trial" runs smaller windows and samples. At this size the
# detectors see only large shifts. h = 4 bounds a test's false alarms to one per e**4 ≈ 55
# windows per key and test; the baseline is taken 2 standard errors towards "no alarm" (a
# 15-trajectory baseline is itself uncertain, and at an edit rate of 0.99 a few unedited
# trajectories would otherwise look like a collapse); a critical alert also waits until its own
# 95% interval excludes no change (streams.monitors.detectors).
CONFIG_PROFILES: dict[str, dict[str, Any]] = {
    "production": {},
    "trial": {"window_s": 10, "grace_s": 2, "threshold": 4.0, "min_baseline_n": 15.0,
              "min_current_n": 15.0, "baseline_z": 2.0},
}


def _apply_detector_overrides(
    detectors: tuple[DetectorSpec, ...], overrides: dict[str, Any],
) -> tuple[DetectorSpec, ...]:
    by_name = {d.name: d for d in detectors}
    for name, changes in overrides.items():
        if name not in by_name:
            raise MonitorConfigError(
                f"detectors.{name}: unknown detector; known: {', '.join(by_name)}")
        allowed = {"enabled", "severity", "title", "runbook"}
        bad = set(changes) - allowed
        if bad:
            raise MonitorConfigError(
                f"detectors.{name}: cannot set {sorted(bad)}; settable: {sorted(allowed)}")
        by_name[name] = replace(by_name[name], **changes)
    return tuple(by_name[d.name] for d in detectors)


def load_config(path: Path | None, profile: str = "production") -> MonitorConfig:
    """The profile's settings (:data:`CONFIG_PROFILES`), overridden by a YAML/JSON mapping of
    MonitorConfig fields (and per detector)."""
    if profile not in CONFIG_PROFILES:
        raise MonitorConfigError(f"unknown monitor profile {profile!r}; known: "
                                 f"{', '.join(CONFIG_PROFILES)}")
    config = replace(MonitorConfig(), **CONFIG_PROFILES[profile])
    if path is None:
        return config
    try:
        text = path.read_text()
    except OSError as exc:
        raise MonitorConfigError(f"cannot read monitor config {path}: {exc.strerror}") from None
    raw = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    raw = dict(raw or {})
    detectors = _apply_detector_overrides(config.detectors, raw.pop("detectors", {}) or {})
    known = {f.name for f in fields(MonitorConfig)} - {"detectors"}
    unknown = set(raw) - known
    if unknown:
        raise MonitorConfigError(
            f"{path}: unknown monitor setting(s) {sorted(unknown)}; known: {sorted(known)}")
    if "threshold" in raw and float(raw["threshold"]) <= 0:
        raise MonitorConfigError(f"{path}: threshold must be > 0, got {raw['threshold']}")
    if "critical_margin" in raw and not 0 <= float(raw["critical_margin"]) <= 1:
        raise MonitorConfigError(f"{path}: critical_margin must be between 0 and 1, got "
                                 f"{raw['critical_margin']}")
    return replace(config, detectors=detectors, **raw)
