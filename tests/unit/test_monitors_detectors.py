"""Detectors on hand-built metric windows: one CUSUM step computed by hand, firing, clearing."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from schemas.checkpoints import CheckpointEvent
from schemas.metrics import MetricStat, MetricWindow
from streams.monitors.config import MonitorConfig, default_detectors
from streams.monitors.detectors import MonitorState, evaluate, note_checkpoint

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _config(*names: str, **changes: float) -> MonitorConfig:
    detectors = tuple(d for d in default_detectors() if d.name in names)
    return replace(MonitorConfig(baseline_z=0.0), detectors=detectors, **changes)


class _Windows:
    def __init__(self) -> None:
        self.minute = 0

    def __call__(self, checkpoint: str, scope: str = "rewards", **stats: tuple[float, float]):
        self.minute += 1
        start = T0 + timedelta(minutes=self.minute)
        return MetricWindow(
            scope=scope, window_start=start, window_end=start + timedelta(minutes=1),  # type: ignore[arg-type]
            checkpoint_id=checkpoint, arm="a" if scope == "rewards" else "*",
            stats={k: MetricStat(n=n, sum=s, sumsq=s) for k, (n, s) in stats.items()})


def test_edit_rate_collapse_step_by_hand_then_fire_and_clear() -> None:
    config, state, window = _config("edit_rate_collapse"), MonitorState(), _Windows()
    for _ in range(2):  # baseline: c0 at 60% over 1,000 trajectories
        assert evaluate(state, window("c0", edit_rate=(500, 300)), config) == []
    # p0 = .6, p1 = .6 − max(.25·.6, 0) = .45; 30 of 100:
    # 30·ln(.45/.6) + 70·ln(.55/.4) = −8.630462 + 22.291761 = 13.661299 < h = 14
    assert evaluate(state, window("c1", edit_rate=(100, 30)), config) == []
    ts = state.keys[("c1", "a", "*")].tests["edit_rate_collapse"][0]
    assert ts.statistic == pytest.approx(13.661299, abs=1e-5)
    fired = evaluate(state, window("c1", edit_rate=(100, 30)), config)
    assert [t.kind for t in fired] == ["fired"]
    alert = fired[0].alert
    assert alert.labels == {"alertname": "edit_rate_collapse", "checkpoint": "c1", "arm": "a",
                            "org": "*", "severity": "critical"}
    test = alert.evidence["tests"][0]
    assert test["baseline"]["value"] == 0.6 and test["baseline"]["n"] == 1000
    assert test["now"]["value"] == 0.3 and test["now"]["n"] == 200
    assert test["relative_change"]["value"] == pytest.approx(-0.5)
    assert alert.evidence["baseline"] == "c0"
    assert "edit_rate 0.3 (n=200) vs 0.6 (n=1000): -50.0%" in alert.summary
    # Recovery at 60%: each window adds 60·ln(.75) + 40·ln(1.375) = −4.522777; from 27.322598
    # the statistic reaches 0 on the 7th window.
    for _ in range(6):
        assert evaluate(state, window("c1", edit_rate=(100, 60)), config) == []
    cleared = evaluate(state, window("c1", edit_rate=(100, 60)), config)
    assert [t.kind for t in cleared] == ["resolved"]
    assert cleared[0].alert.fingerprint == alert.fingerprint


def test_no_baseline_no_alarm_and_small_baselines_wait() -> None:
    config, state, window = _config("edit_rate_collapse"), MonitorState(), _Windows()
    assert evaluate(state, window("c0", edit_rate=(100, 10)), config) == []  # first checkpoint
    assert evaluate(state, window("c1", edit_rate=(200, 0)), config) == []  # baseline n 100 < 300
    assert state.keys[("c1", "a", "*")].tests["edit_rate_collapse"][0].statistic == 0.0


def test_registry_parent_is_the_baseline() -> None:
    config, state, window = _config("edit_rate_collapse"), MonitorState(), _Windows()
    evaluate(state, window("c0", edit_rate=(1000, 600)), config)
    evaluate(state, window("c1", edit_rate=(1000, 100)), config)  # c1 collapsed against c0
    note_checkpoint(state, CheckpointEvent(
        event_id="e", sequence=3, occurred_at=T0, kind="created", status="candidate",
        checkpoint_id="c2", model="m", parent_id="c0", path="/x"))
    # c2 at 60% is fine against its parent c0, though far above c1 (seen just before it).
    assert evaluate(state, window("c2", edit_rate=(1000, 600)), config) == []
    assert state.keys[("c2", "a", "*")].tests["edit_rate_collapse"][0].statistic == 0.0


def test_divergence_needs_both_tests() -> None:
    config, state, window = _config("reward_kept_divergence"), MonitorState(), _Windows()
    for _ in range(5):  # reward and kept edits: mean 1, sd ≈ 1 (values 0 and 2)
        evaluate(state, window("c0", reward=(200, 200), kept_edits=(200, 200)), config)
    state.totals["c0"] = {k: MetricStat(n=1000, sum=1000, sumsq=2000) for k in ("reward", "kept_edits")}
    up_only = [evaluate(state, window("c1", reward=(500, 700), kept_edits=(500, 500)), config)
               for _ in range(5)]
    assert not any(up_only)
    assert state.keys[("c1", "a", "*")].tests["reward_kept_divergence"][1].statistic == 0.0
    both = evaluate(state, window("c1", reward=(500, 700), kept_edits=(500, 300)), config)
    assert [t.kind for t in both] == ["fired"]
    assert len(both[0].alert.evidence["tests"]) == 2


def test_ingest_volume_drop_against_trailing_windows() -> None:
    config, state, window = _config("ingest_volume_drop"), MonitorState(), _Windows()
    for _ in range(10):
        assert evaluate(state, window("*", "ingest", ingest_events=(100, 100)), config) == []
    # λ0 = 100, λ1 = 50: a silent window adds 0·ln(.5) − (50 − 100) = 50 ≥ h
    fired = evaluate(state, window("*", "ingest"), config)
    assert [t.kind for t in fired] == ["fired"]
    assert fired[0].alert.evidence["tests"][0]["now"]["value"] == 0.0
    assert len(state.keys[("*", "*", "*")].trailing) == 10  # alarmed windows stay out
