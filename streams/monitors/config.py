"""Detector thresholds and window sizes, with defaults; overridable from a YAML or JSON file.

Each detector is one or more one-sided CUSUM tests (see ``stats``); it fires when every test's
statistic reaches ``threshold`` and clears when one of them falls back to 0. The design
alternative of each test (the shift it is tuned to catch fastest) is set per test here. Every
reward detector runs twice per key: against the parent checkpoint, and against the same
checkpoint's own past (``trailing_gap_s``, ``trailing_span_s``).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Literal

import yaml

from schemas.alerts import Severity
from schemas.metrics import COMPONENT_METRIC_PREFIX
from streams.monitors.errors import MonitorConfigError

__all__ = ["CONFIG_PROFILES", "DetectorSpec", "MonitorConfig", "TestSpec", "default_detectors",
           "load_config"]

Family = Literal["bernoulli", "gaussian", "poisson"]
Direction = Literal["up", "down"]
Scale = Literal["relative", "difference"]


@dataclass(frozen=True)
class TestSpec:
    """One CUSUM on one metric.

    The alternative is ``baseline·(1 ± relative)`` for rates and counts, floored at an absolute
    change of ``absolute``; for gaussian metrics it is ``absolute + relative·|baseline|`` plus
    ``sigmas`` baseline standard deviations.

    ``scale`` is how the change is shown and judged: ``relative`` (now ÷ baseline − 1), or
    ``difference`` (now − baseline, in the metric's units) for a signed score such as the
    reward, whose relative change flips sign with its baseline. A critical alert needs the change
    to exceed ``critical_margin`` of the designed effect on that scale: ``relative``, or
    ``absolute`` for a difference.

    ``dispersion`` (bernoulli only): the rate's variance is this many times a binomial's, because
    its units come in clusters (the edits of one trajectory are kept or undone together); the
    log-likelihood ratio is divided by it and the intervals widened by its square root
    (quasi-likelihood), so the clusters do not turn into false alarms.

    ``parts``: the prefix of the metrics this one is the sum of (``COMPONENT_METRIC_PREFIX``,
    ``reward.``, for the reward's components); the evidence shows how each part moved over the
    same windows.
    """

    metric: str
    family: Family
    direction: Direction
    relative: float = 0.0
    absolute: float = 0.0
    sigmas: float = 0.0
    scale: Scale = "relative"
    dispersion: float = 1.0
    parts: str = ""

    @property
    def designed_change(self) -> float:
        """The effect it is designed to catch, on its own scale (sizes a critical alert)."""
        return self.absolute if self.scale == "difference" else self.relative


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
            "edit_rate_collapse", "rewards", "Edit rate collapsed",
            "critical", (TestSpec("edit_rate", "bernoulli", "down", relative=0.25),),
            "The checkpoint proposes far fewer edits than its baseline. Check whether it "
            "defers work with clarifying questions (clarification_rate) or stops early. If the "
            "drop is real and the candidate is serving users, roll it back from the console and "
            "review the reward terms for edits and clarifications before the next training run."),
        DetectorSpec(
            "broken_call_spike", "rewards", "Broken tool calls spiked",
            "critical",
            (TestSpec("broken_call_trajectory_rate", "bernoulli", "up", relative=1.0,
                      absolute=0.02),),
            "More trajectories contain malformed or invalid tool calls than in the baseline. The "
            "policy may be emitting broken calls to dodge negative reward on hard tasks. Confirm "
            "broken calls are rewarded as explicit negatives, inspect sample trajectories, and "
            "roll the checkpoint back if users are affected."),
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
            (TestSpec("reward", "gaussian", "up", sigmas=0.15, scale="difference",
                      parts=COMPONENT_METRIC_PREFIX),
             TestSpec("kept_edits", "gaussian", "down", sigmas=0.15)),
            "Mean reward went up while the edits users keep went down: the policy is optimising "
            "the proxy, not the outcome. Find which reward component rose (evidence), stop "
            "promoting descendants of this checkpoint, roll back, and fix the reward spec."),
        DetectorSpec(
            "reward_drop", "rewards", "Mean reward fell", "critical",
            (TestSpec("reward", "gaussian", "down", absolute=0.2, scale="difference",
                      parts=COMPONENT_METRIC_PREFIX),),
            "The mean reward per trajectory fell by about 0.2 or more: users keep fewer edits, "
            "complain more, or the policy breaks calls, whatever the hack. The evidence names "
            "the reward components that moved; read the matching detectors (kept edits, "
            "dissatisfied follow-ups, broken calls, edit rate) and sample trajectories, and roll "
            "the checkpoint back if users are affected."),
        DetectorSpec(
            "kept_edit_rate_drop", "rewards", "Kept-edit rate fell (per edit proposed)",
            "critical",
            (TestSpec("kept_edit_rate", "bernoulli", "down", relative=0.2, dispersion=2.0),),
            "Users keep a smaller share of the edits the policy proposes: its edits are wrong "
            "more often, or are undone later. Inspect sample trajectories' edits and reverts; "
            "roll the checkpoint back if users are affected."),
        DetectorSpec(
            "kept_edits_drop", "rewards", "Kept edits per trajectory fell", "critical",
            (TestSpec("kept_edits", "gaussian", "down", relative=0.2),),
            "Users keep fewer edits per trajectory: the policy edits less (edit rate, "
            "clarifications, broken calls) or worse (kept-edit rate). Read those detectors and "
            "sample trajectories; roll the checkpoint back if users are affected."),
        DetectorSpec(
            "dissatisfied_spike", "rewards", "Dissatisfied follow-ups rose", "critical",
            (TestSpec("dissatisfied_followup_rate", "bernoulli", "up", relative=0.25,
                      absolute=0.03),),
            "More trajectories end with a dissatisfied follow-up from the user. Read the "
            "follow-ups of sample trajectories, and the edit, kept-edit and latency detectors for "
            "the cause; roll the checkpoint back if it is the checkpoint's doing."),
        DetectorSpec(
            "latency_regression", "rewards", "Latency regressed", "warning",
            (TestSpec("log_latency", "gaussian", "up", absolute=math.log(1.2)),),
            "Per-trajectory latency rose by about 20% or more against the baseline. Check longer "
            "completions (turns, tokens), serving load and the engine version."),
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
    # A reward key's own past: its windows that ended more than trailing_gap_s and at most
    # trailing_gap_s + trailing_span_s before the window under test (the last hour against the
    # previous day), so drift under one long-lived checkpoint alerts too.
    trailing_gap_s: int = 3600
    trailing_span_s: int = 86400
    confidence: float = 0.95  # intervals shown as evidence
    # A critical alert fires only when each test's interval excludes every change smaller than
    # this fraction of the effect the test is designed for (TestSpec.relative): for the edit-rate
    # collapse (designed for −25%), an interval that reaches above −6.25% waits.
    critical_margin: float = 0.25
    auto_protect: bool = False  # critical alert on a newly promoted checkpoint → rollback
    detectors: tuple[DetectorSpec, ...] = field(default_factory=default_detectors)


# Named starting points for load_config. The defaults want ~300 baseline trajectories per
# checkpoint and windows of a minute; a first trial (or a demo) serves a checkpoint minutes of
# traffic, well under that, so "trial" runs smaller windows and samples, sized so that a variant
# that lowers a 160-trajectory cycle's mean reward by 0.2 or more fires a critical alert within
# that cycle while healthy runs fire none (measured: docs/monitors-and-alerts.md). h = 6 bounds a
# test's false alarms to one per e**6 ≈ 400 windows per key and test (at h = 4 a third of
# simulated five-checkpoint healthy runs raised a false critical; the hack variants fire as
# soon at 6, whose large shifts cross either); the baseline is taken 1.5
# standard errors towards "no alarm" (a small baseline is itself uncertain, and at an edit rate
# of 0.99 a few unedited trajectories would otherwise look like a collapse); a critical alert
# also waits until its own 95% interval excludes every change under a tenth of the test's
# designed effect (streams.monitors.detectors). A checkpoint's own past is its windows from 2 to
# 30 minutes before, so one cycle's traffic is also tested against the cycles before it.
CONFIG_PROFILES: dict[str, dict[str, Any]] = {
    "production": {},
    "trial": {"window_s": 10, "grace_s": 2, "threshold": 6.0, "min_baseline_n": 15.0,
              "min_current_n": 15.0, "baseline_z": 1.5, "critical_margin": 0.1,
              "trailing_gap_s": 120, "trailing_span_s": 1800},
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
    for name in ("trailing_gap_s", "trailing_span_s"):
        if name in raw and not (float(raw[name]) >= 0 and float(raw[name]).is_integer()):
            raise MonitorConfigError(f"{path}: {name} must be a whole number of seconds ≥ 0, "
                                     f"got {raw[name]}")
    if "critical_margin" in raw and not 0 <= float(raw["critical_margin"]) <= 1:
        raise MonitorConfigError(f"{path}: critical_margin must be between 0 and 1, got "
                                 f"{raw['critical_margin']}")
    return replace(config, detectors=detectors, **raw)
