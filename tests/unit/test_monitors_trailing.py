"""A key's own past as its baseline: which windows it pools (the gap, the span, the buckets), and
that every reward detector runs against it beside the parent, as an alert of its own."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from schemas.alerts import Alert
from schemas.checkpoints import CheckpointEvent, Registry
from schemas.metrics import MetricStat, MetricWindow
from streams.monitors.config import MonitorConfig, default_detectors
from streams.monitors.detectors import MonitorState, evaluate
from streams.monitors.protect import auto_protect_target
from streams.monitors.trailing import TrailingBaseline

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _one(value: float) -> dict[str, MetricStat]:
    return {"reward": MetricStat(n=1, sum=value, sumsq=value * value)}


def test_the_baseline_pools_the_windows_that_ended_a_gap_to_a_gap_and_span_before() -> None:
    past = TrailingBaseline(gap_s=3600, span_s=86400, window_s=60)  # buckets of 15 min
    for minute in range(1, 27 * 60 + 1):  # one window a minute, valued by the hour it ended in
        past.add(minute * 60.0, _one((minute - 1) // 60))
    at = 27 * 3600.0  # the window ending now: baseline = windows ended in (2 h, 26 h]
    stats, windows = past.baseline(at)
    assert windows == 24 * 60 and stats["reward"].n == 24 * 60
    assert stats["reward"].sum == sum(60 * hour for hour in range(2, 26))
    assert past.describe() == "its own windows 1 h–25 h before"
    # A quarter of an hour later the edges have moved one bucket, and what fell out is dropped.
    stats, windows = past.baseline(at + 900)
    assert windows == 24 * 60 and stats["reward"].sum == (
        sum(60 * hour for hour in range(2, 26)) - 15 * 2 + 15 * 26)
    assert min(past.buckets) * 900 >= at + 900 - 3600 - 86400


def test_windows_of_the_last_gap_are_never_their_own_baseline() -> None:
    past = TrailingBaseline(gap_s=600, span_s=3600, window_s=60)
    for minute in range(1, 10):
        past.add(minute * 60.0, _one(1.0))
    assert past.baseline(10 * 60.0) == ({}, 0)  # all within the last 10 minutes
    past.add(10 * 60.0, _one(1.0))
    stats, windows = past.baseline(20 * 60.0 + 30)
    assert windows == 10  # buckets of 150 s ending by 10 min 30 s: the first ten windows


def test_a_window_arriving_late_for_the_pooled_range_is_counted_at_once() -> None:
    past = TrailingBaseline(gap_s=0, span_s=600, window_s=60)
    for minute in range(1, 6):
        past.add(minute * 60.0, _one(1.0))
    assert past.baseline(6 * 60.0)[1] == 5
    past.add(3 * 60.0, _one(1.0))  # another partition's copy of an old window
    assert past.baseline(6 * 60.0)[1] == 6


def _window(minute: int, checkpoint: str, n: float, edits: float) -> MetricWindow:
    start = T0 + timedelta(minutes=minute)
    return MetricWindow(scope="rewards", window_start=start,
                        window_end=start + timedelta(minutes=1), checkpoint_id=checkpoint,
                        arm="a", stats={"edit_rate": MetricStat(n=n, sum=edits, sumsq=edits)})


def test_a_collapse_under_one_checkpoint_fires_against_its_own_past_only() -> None:
    config = replace(MonitorConfig(baseline_z=0.0), detectors=tuple(
        d for d in default_detectors() if d.name == "edit_rate_collapse"))
    state = MonitorState()
    fired = []
    for minute in range(180):  # three hours of c0 at 60%, then its edit rate halves
        edits = 30 if minute < 150 else 15
        fired += evaluate(state, _window(minute, "c0", 50, edits), config)
    assert [(t.kind, t.alert.labels["baseline"]) for t in fired] == [("fired", "trailing")]
    alert = fired[0].alert
    # Each window at 30% adds 15·ln(.45/.6) + 35·ln(.55/.4) = 6.83 against p0 = .6, p1 = .45:
    # h = 14 is passed in the third.
    assert alert.window_end == T0 + timedelta(minutes=153)
    assert alert.title == "Edit rate collapsed against its own past"
    assert alert.evidence["baseline"] == "c0: its own windows 1 h–25 h before"
    assert alert.evidence["comparison"] == "trailing"
    assert "the checkpoint did not change" in alert.runbook
    # Baseline: the windows that ended by 1:30 (the last whole quarter an hour before 2:33).
    assert alert.summary.startswith("edit_rate 0.3 (n=150) vs 0.6 (n=4,450): -50.0%")


def test_a_drift_alert_does_not_roll_production_back() -> None:
    """The checkpoint did not change; rolling it back is no answer to a drift around it."""
    registry = Registry()
    registry.add(CheckpointEvent(event_id="e1", sequence=1, occurred_at=T0, kind="promoted",
                                 status="production", checkpoint_id="ck1", model="m",
                                 path="/ckpt/ck1"))

    def alert(baseline: str) -> Alert:
        return Alert(detector="edit_rate_collapse", fingerprint="f", title="t",
                     severity="critical", summary="s", evidence={}, runbook="r", window_end=T0,
                     labels={"checkpoint": "ck1", "arm": "a", "org": "*", "baseline": baseline})

    assert auto_protect_target(registry, alert("parent")) == "ck1"
    assert auto_protect_target(registry, alert("trailing")) is None


def test_a_zero_span_turns_the_trailing_comparisons_off() -> None:
    config = replace(MonitorConfig(baseline_z=0.0, trailing_span_s=0), detectors=tuple(
        d for d in default_detectors() if d.name == "edit_rate_collapse"))
    state = MonitorState()
    for minute in range(180):
        assert evaluate(state, _window(minute, "c0", 50, 30 if minute < 150 else 15),
                        config) == []
    assert set(state.keys[("c0", "*", "*")].tests) == {("edit_rate_collapse", "parent")}
