"""Detectors: CUSUM tests over metric windows, as a deterministic fold with no I/O.

``evaluate(state, window, config)`` updates the state with one closed metric window and returns
the alert transitions it causes (``fired`` on the way up, ``resolved`` when the condition
clears). The statistics, stated:

* Reward windows are tested per checkpoint and org (or the fleet, ``*``), whatever the A/B arm:
  a checkpoint serving two arms is one policy. Ingest windows per their own key.
* Every test is a one-sided CUSUM of log-likelihood ratios, one increment per window: Bernoulli
  for rates, Gaussian for means (per-trajectory reward, kept edits, log latency), Poisson for
  event counts. A detector fires when all its tests reach ``threshold`` h and the stretch since
  the CUSUM last left 0 holds at least ``min_current_n`` of weight; it clears when one test's
  statistic is back at 0. Under the baseline the expected number of windows between false
  alarms of one test on one key is at least e**h (Lorden), ≈1.2 million at h = 14.
* Every reward detector runs against two baselines, each its own alert (label ``baseline``):
  ``parent``, the previous checkpoint's accumulated windows of the same org (or of the fleet,
  ``*``): its parent in the registry when known, else the checkpoint first seen before it; and
  ``trailing``, the same key's own windows that ended ``trailing_gap_s`` to ``trailing_gap_s +
  trailing_span_s`` before (``streams.monitors.trailing``), so a drift under one long-lived
  checkpoint alerts without a new checkpoint id. Either is used only once it holds
  ``min_baseline_n``. An org is compared with its own past, never with the fleet, so one org's
  traffic cannot move another's alerts. Ingest baselines are the trailing windows of the same
  key, excluding windows while a detector of that key is active.
* The baseline is moved ``baseline_z`` standard errors towards "no alarm" before it is used, so
  its own sampling error does not turn into false alarms.
* A critical alert also needs its own evidence to show the change: it fires only when every
  test's confidence interval of the relative change (the stretch since the CUSUM left 0 against
  the baseline) excludes no change (``evidence.shows_change``), and every change smaller than
  ``critical_margin`` of the effect the test is designed for (``TestSpec.designed_change``);
  until then it waits, whatever the CUSUM says, so a critical alert never shows an interval that
  includes no change, nor one that allows a drift too small to act on.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from typing import Literal

from schemas.alerts import Alert, alert_fingerprint
from schemas.checkpoints import CheckpointEvent
from schemas.metrics import MetricStat, MetricWindow
from streams.monitors.config import DetectorSpec, MonitorConfig, TestSpec
from streams.monitors.evidence import describe_test, effective, shows_change, summary_line
from streams.monitors.stats import bernoulli_llr, cusum_step, gaussian_llr, poisson_llr
from streams.monitors.trailing import TrailingBaseline, pool
from streams.monitors.windows import ALL

__all__ = ["Comparison", "MonitorState", "TestState", "Transition", "evaluate", "note_checkpoint"]

_P_EPS = 1e-4
WindowKey = tuple[str, str, str]
Comparison = Literal["parent", "trailing"]
_AGAINST: dict[Comparison, str] = {"parent": "against the parent checkpoint",
                                   "trailing": "against its own past"}
_NEXT_STEP: dict[Comparison, str] = {
    "parent": "Compared with the parent checkpoint's traffic: the new checkpoint is the likely "
              "cause.",
    "trailing": "Compared with the same checkpoint's own earlier traffic: the checkpoint did not "
                "change, so first look for what did around it (the traffic mix of orgs and "
                "tasks, a client or SDK release, serving, the reward spec).",
}


@dataclass
class TestState:
    statistic: float = 0.0
    since_reset: MetricStat = field(default_factory=MetricStat)
    windows: int = 0  # windows since the statistic last left 0
    alternative: float = math.nan
    null: float = math.nan
    parts: dict[str, MetricStat] = field(default_factory=dict)  # the parts, since the same reset


# A restarted metrics worker publishes its last fold's windows again: one per key and partition,
# or more when a quiet gap was filled with empty windows; a copy older than this many is
# folded again.
_RECENT_WINDOWS = 8


@dataclass
class _KeyState:
    tests: dict[tuple[str, Comparison], list[TestState]] = field(default_factory=dict)
    active: dict[tuple[str, Comparison], bool] = field(default_factory=dict)
    trailing: deque[dict[str, MetricStat]] = field(default_factory=deque)  # ingest's
    own_past: TrailingBaseline | None = None  # a reward key's


@dataclass
class MonitorState:
    # (checkpoint, org) → the reward windows folded so far: the baselines of its successors.
    totals: dict[tuple[str, str], dict[str, MetricStat]] = field(default_factory=dict)
    first_seen: list[str] = field(default_factory=list)
    parents: dict[str, str] = field(default_factory=dict)
    keys: dict[WindowKey, _KeyState] = field(default_factory=dict)
    # (scope, checkpoint, arm, org, partition) → its latest windows folded, as JSON: a window
    # published again (a metrics worker restarted after a kill) is folded once.
    recent: dict[tuple[str, str, str, str, int], deque[str]] = field(default_factory=dict)


@dataclass(frozen=True)
class Transition:
    kind: Literal["fired", "resolved"]
    alert: Alert


def note_checkpoint(state: MonitorState, event: CheckpointEvent) -> None:
    """Registry lineage: a checkpoint's parent is its baseline."""
    if event.parent_id:
        state.parents[event.checkpoint_id] = event.parent_id


def _parent(state: MonitorState, checkpoint_id: str) -> str | None:
    if checkpoint_id in state.parents:
        return state.parents[checkpoint_id]
    index = state.first_seen.index(checkpoint_id)
    return state.first_seen[index - 1] if index > 0 else None


@dataclass(frozen=True)
class _Baseline:
    name: str  # what it is, for the evidence: the parent's id, or which of its own windows
    stats: dict[str, MetricStat]
    windows: int  # windows pooled (the Poisson tests' unit); 0 for a parent's totals


def _baselines(
    state: MonitorState, key_state: _KeyState, window: MetricWindow, config: MonitorConfig,
) -> dict[Comparison, _Baseline | None]:
    """Each comparison this window's detectors run, with its baseline (None while unusable)."""
    if window.scope == "ingest":
        if len(key_state.trailing) < min(5, config.ingest_baseline_windows):
            return {"trailing": None}
        pooled: dict[str, MetricStat] = {}
        for stats in key_state.trailing:
            pool(pooled, stats)
        return {"trailing": _Baseline(f"trailing {len(key_state.trailing)} windows", pooled,
                                      len(key_state.trailing))}
    parent = _parent(state, window.checkpoint_id)
    found: dict[Comparison, _Baseline | None] = {"parent": None}
    if parent is not None and (parent, window.org_id) in state.totals:
        found["parent"] = _Baseline(parent, state.totals[(parent, window.org_id)], 0)
    if config.trailing_span_s > 0:
        if key_state.own_past is None:
            key_state.own_past = TrailingBaseline(config.trailing_gap_s, config.trailing_span_s,
                                                  config.window_s)
        stats, windows = key_state.own_past.baseline(window.window_end.timestamp())
        found["trailing"] = _Baseline(f"{window.checkpoint_id}: "
                                      f"{key_state.own_past.describe()}", stats, windows)
    return found


def _hypotheses(
    test: TestSpec, base: MetricStat, windows: int, z: float,
) -> tuple[float, float, float]:
    """(null, alternative, sigma) of one test, the null moved z standard errors towards it."""
    sign = 1.0 if test.direction == "up" else -1.0
    if test.family == "bernoulli":
        p = base.mean
        null = min(1 - _P_EPS, max(_P_EPS, p + sign * z * math.sqrt(p * (1 - p) / base.n)))
        shift = max(null * test.relative, test.absolute)
        return null, min(1 - _P_EPS, max(_P_EPS, null + sign * shift)), math.nan
    if test.family == "poisson":
        lam = base.sum / windows
        null = max(_P_EPS, lam + sign * z * math.sqrt(lam / windows))
        return null, max(_P_EPS, null * (1 + sign * test.relative)), math.nan
    sigma = math.sqrt(base.variance) if base.n >= 2 else math.nan
    null = base.mean + sign * z * sigma / math.sqrt(base.n)
    shift = test.absolute + test.relative * abs(base.mean) + test.sigmas * sigma
    return null, null + sign * shift, sigma


def _llr(test: TestSpec, now: MetricStat, null: float, alt: float, sigma: float) -> float:
    if test.family == "bernoulli":
        tested = effective(test, now)
        return bernoulli_llr(tested.sum, tested.n, null, alt)
    if test.family == "poisson":
        return poisson_llr(now.sum, null, alt)
    if now.n == 0 or not sigma > 0:
        return 0.0
    return gaussian_llr(now.n, now.mean, null, sigma, alt - null)


def _enough(test: TestSpec, base: MetricStat, config: MonitorConfig) -> bool:
    if test.family == "poisson":
        return base.sum >= config.min_baseline_n
    return base.n >= config.min_baseline_n


def _step_tests(
    spec: DetectorSpec, states: list[TestState], window: MetricWindow,
    baseline: dict[str, MetricStat], windows: int, config: MonitorConfig,
) -> None:
    for test, ts in zip(spec.tests, states, strict=False):
        base = baseline.get(test.metric)
        if base is None or not _enough(test, base, config):
            continue
        now = window.stats.get(test.metric, MetricStat())
        ts.null, ts.alternative, sigma = _hypotheses(test, effective(test, base), windows,
                                                     config.baseline_z)
        llr = _llr(test, now, ts.null, ts.alternative, sigma)
        ts.statistic = cusum_step(ts.statistic, llr, config.threshold * config.cap_factor)
        positive = ts.statistic > 0
        ts.since_reset = ts.since_reset + now if positive else MetricStat()
        ts.windows = ts.windows + 1 if positive else 0
        if not positive:
            ts.parts = {}
        elif test.parts:
            pool(ts.parts, {k: v for k, v in window.stats.items() if k.startswith(test.parts)})


def _firing(spec: DetectorSpec, states: list[TestState], config: MonitorConfig) -> bool:
    return all(
        ts.statistic >= config.threshold
        and (test.family == "poisson" or ts.since_reset.n >= config.min_current_n)
        for test, ts in zip(spec.tests, states, strict=False)
    )


def _alert(
    spec: DetectorSpec, states: list[TestState], window: MetricWindow, comparison: Comparison,
    baseline: _Baseline | None, config: MonitorConfig,
) -> Alert:
    labels = {"checkpoint": window.checkpoint_id, "arm": _arm(window), "org": window.org_id,
              "baseline": comparison}
    base = baseline.stats if baseline else {}
    windows = baseline.windows if baseline else 0
    tests = [describe_test(test, ts.since_reset, base.get(test.metric, MetricStat()),
                           (windows, ts.windows), ts.statistic, ts.null, ts.alternative,
                           config.confidence, (ts.parts, base))
             for test, ts in zip(spec.tests, states, strict=False)]
    evidence = {
        "statistic": "one-sided CUSUM of log-likelihood ratios, one step per window",
        "threshold_h": config.threshold,
        "false_alarm_bound_windows": round(math.exp(config.threshold)),
        "baseline": baseline.name if baseline else "-", "comparison": comparison,
        "window_end": window.window_end.isoformat(), "tests": tests,
    }
    return Alert(
        detector=spec.name, fingerprint=alert_fingerprint(spec.name, labels),
        title=f"{spec.title} {_AGAINST[comparison]}", severity=spec.severity,
        summary=summary_line(tests), evidence=evidence,
        runbook=f"{spec.runbook} {_NEXT_STEP[comparison]}",
        labels={"alertname": spec.name, **labels, "severity": spec.severity},
        window_end=window.window_end,
    )


def _arm(window: MetricWindow) -> str:
    """A reward key pools the arms a checkpoint serves: one policy, whichever users' arm (a
    promoted canary serves both), tested on all its traffic as its parent's totals are."""
    return window.arm if window.scope == "ingest" else ALL


def evaluate(state: MonitorState, window: MetricWindow, config: MonitorConfig) -> list[Transition]:
    """Fold one closed window into the detectors; returns the alert transitions it causes.
    A copy of a window among the latest few of its key and partition changes nothing."""
    recent = state.recent.setdefault(
        (window.scope, window.checkpoint_id, window.arm, window.org_id, window.partition),
        deque(maxlen=_RECENT_WINDOWS))
    if (text := window.model_dump_json()) in recent:
        return []
    recent.append(text)
    key = (window.checkpoint_id, _arm(window), window.org_id)
    if window.scope == "rewards" and window.checkpoint_id not in state.first_seen:
        state.first_seen.append(window.checkpoint_id)
    key_state = state.keys.setdefault(key, _KeyState())
    transitions: list[Transition] = []
    for comparison, baseline in _baselines(state, key_state, window, config).items():
        for spec in config.detectors:
            if spec.enabled and spec.scope == window.scope:
                transition = _step(spec, key_state, window, comparison, baseline, config)
                if transition is not None:
                    transitions.append(transition)
    _absorb(state, key_state, window, config)
    return transitions


def _step(
    spec: DetectorSpec, key_state: _KeyState, window: MetricWindow, comparison: Comparison,
    baseline: _Baseline | None, config: MonitorConfig,
) -> Transition | None:
    """One detector against one baseline: its tests step, then it fires or clears."""
    states = key_state.tests.setdefault((spec.name, comparison),
                                        [TestState() for _ in spec.tests])
    if baseline is not None:
        _step_tests(spec, states, window, baseline.stats, baseline.windows, config)
    was_active = key_state.active.get((spec.name, comparison), False)
    if not was_active and baseline is not None and _firing(spec, states, config):
        alert = _alert(spec, states, window, comparison, baseline, config)
        if spec.severity != "critical" or _shows_critical_change(spec, alert, config):
            key_state.active[(spec.name, comparison)] = True
            return Transition("fired", alert)
    elif was_active and any(ts.statistic <= 0 for ts in states):
        key_state.active[(spec.name, comparison)] = False
        return Transition("resolved", _alert(spec, states, window, comparison, baseline, config))
    return None


def _absorb(
    state: MonitorState, key_state: _KeyState, window: MetricWindow, config: MonitorConfig,
) -> None:
    """After testing, the window joins the baselines it may serve."""
    if window.scope == "ingest":
        if not any(key_state.active.values()):
            key_state.trailing.append(dict(window.stats))
            while len(key_state.trailing) > config.ingest_baseline_windows:
                key_state.trailing.popleft()
        return
    pool(state.totals.setdefault((window.checkpoint_id, window.org_id), {}), window.stats)
    if key_state.own_past is not None:
        key_state.own_past.add(window.window_end.timestamp(), dict(window.stats))


def _shows_critical_change(spec: DetectorSpec, alert: Alert, config: MonitorConfig) -> bool:
    """Every test's interval excludes a change smaller than ``critical_margin`` of the effect
    the test is designed to detect: a small real drift is a warning's business."""
    return all(shows_change(evidence, config.critical_margin * test.designed_change)
               for test, evidence in zip(spec.tests, alert.evidence["tests"], strict=True))
