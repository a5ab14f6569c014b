"""Detectors on hand-built metric windows: one CUSUM step computed by hand, firing, clearing."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from schemas.checkpoints import CheckpointEvent
from schemas.metrics import MetricStat, MetricWindow, read_window
from schemas.quarantine import UnusableRecord
from streams.monitors.config import MonitorConfig, default_detectors, load_config
from streams.monitors.detectors import MonitorState, evaluate, note_checkpoint
from streams.monitors.errors import MonitorConfigError

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _config(*names: str, **changes: float) -> MonitorConfig:
    detectors = tuple(d for d in default_detectors() if d.name in names)
    return replace(MonitorConfig(baseline_z=0.0), detectors=detectors, **changes)


def _statistic(state: MonitorState, checkpoint: str, detector: str, org: str = "*",
               test: int = 0) -> float:
    """The CUSUM statistic of one test of a detector against the checkpoint's parent."""
    return state.keys[(checkpoint, "*", org)].tests[(detector, "parent")][test].statistic


class _Windows:
    def __init__(self) -> None:
        self.minute = 0

    def __call__(self, checkpoint: str, scope: str = "rewards", org: str = "*", arm: str = "a",
                 **stats: tuple[float, float]):
        self.minute += 1
        start = T0 + timedelta(minutes=self.minute)
        return MetricWindow(
            scope=scope, window_start=start, window_end=start + timedelta(minutes=1),  # type: ignore[arg-type]
            checkpoint_id=checkpoint, arm=arm if scope == "rewards" else "*", org_id=org,
            stats={k: MetricStat(n=n, sum=s, sumsq=s) for k, (n, s) in stats.items()})


def test_edit_rate_collapse_step_by_hand_then_fire_and_clear() -> None:
    config, state, window = _config("edit_rate_collapse"), MonitorState(), _Windows()
    for _ in range(2):  # baseline: c0 at 60% over 1,000 trajectories
        assert evaluate(state, window("c0", edit_rate=(500, 300)), config) == []
    # p0 = .6, p1 = .6 − max(.25·.6, 0) = .45; 30 of 100:
    # 30·ln(.45/.6) + 70·ln(.55/.4) = −8.630462 + 22.291761 = 13.661299 < h = 14
    assert evaluate(state, window("c1", edit_rate=(100, 30)), config) == []
    ts = state.keys[("c1", "*", "*")].tests[("edit_rate_collapse", "parent")][0]
    assert ts.statistic == pytest.approx(13.661299, abs=1e-5)
    fired = evaluate(state, window("c1", edit_rate=(100, 30)), config)
    assert [t.kind for t in fired] == ["fired"]
    alert = fired[0].alert
    assert alert.labels == {"alertname": "edit_rate_collapse", "checkpoint": "c1", "arm": "*",
                            "org": "*", "baseline": "parent", "severity": "critical"}
    assert alert.title == "Edit rate collapsed against the parent checkpoint"
    test = alert.evidence["tests"][0]
    assert test["baseline"]["value"] == 0.6 and test["baseline"]["n"] == 1000
    assert test["now"]["value"] == 0.3 and test["now"]["n"] == 200
    assert test["change"]["value"] == pytest.approx(-0.5)
    assert alert.evidence["baseline"] == "c0"
    assert "edit_rate 0.3 (n=200) vs 0.6 (n=1,000): -50.0%" in alert.summary
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
    assert _statistic(state, "c1", "edit_rate_collapse") == 0.0


def test_registry_parent_is_the_baseline() -> None:
    config, state, window = _config("edit_rate_collapse"), MonitorState(), _Windows()
    evaluate(state, window("c0", edit_rate=(1000, 600)), config)
    evaluate(state, window("c1", edit_rate=(1000, 100)), config)  # c1 collapsed against c0
    note_checkpoint(state, CheckpointEvent(
        event_id="e", sequence=3, occurred_at=T0, kind="created", status="candidate",
        checkpoint_id="c2", model="m", parent_id="c0", path="/x"))
    # c2 at 60% is fine against its parent c0, though far above c1 (seen just before it).
    assert evaluate(state, window("c2", edit_rate=(1000, 600)), config) == []
    assert _statistic(state, "c2", "edit_rate_collapse") == 0.0


def test_an_org_is_compared_with_its_own_past_only() -> None:
    config, state, window = _config("edit_rate_collapse"), MonitorState(), _Windows()
    for _ in range(2):  # c0: acme edits in 60% of trajectories, evil in 10%
        evaluate(state, window("c0", org="acme", edit_rate=(500, 300)), config)
        evaluate(state, window("c0", org="evil", edit_rate=(500, 50)), config)
    # evil keeps its own 10% under c1: against acme's 60% (or the two together) that would be
    # a collapse, against evil's own past it is nothing.
    quiet = [evaluate(state, window("c1", org="evil", edit_rate=(100, 10)), config)
             for _ in range(5)]
    assert not any(quiet)
    assert _statistic(state, "c1", "edit_rate_collapse", org="evil") == 0.0
    fired = [t for _ in range(3)
             for t in evaluate(state, window("c1", org="acme", edit_rate=(100, 30)), config)]
    assert [(t.kind, t.alert.labels["org"]) for t in fired] == [("fired", "acme")]


def test_divergence_needs_both_tests() -> None:
    config, state, window = _config("reward_kept_divergence"), MonitorState(), _Windows()
    for _ in range(5):  # reward and kept edits: mean 1, sd ≈ 1 (values 0 and 2)
        evaluate(state, window("c0", reward=(200, 200), kept_edits=(200, 200)), config)
    state.totals[("c0", "*")] = {k: MetricStat(n=1000, sum=1000, sumsq=2000)
                                 for k in ("reward", "kept_edits")}
    up_only = [evaluate(state, window("c1", reward=(500, 700), kept_edits=(500, 500)), config)
               for _ in range(5)]
    assert not any(up_only)
    assert _statistic(state, "c1", "reward_kept_divergence", test=1) == 0.0
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


def test_windows_the_detectors_cannot_fold_are_refused_with_the_statistic_at_fault() -> None:
    window = _Windows()
    good = window("c0", edit_rate=(100, 60), log_latency=(100, 750))
    assert read_window(good.model_dump_json().encode()) == good
    refused = {
        "stats.edit_rate: a rate of 150 in 100 is outside 0..1": window("c0", edit_rate=(100, 150)),
        "stats.log_latency: its mean (sum 1e+300 over n 1e-300) is not finite":
            window("c0", log_latency=(1e-300, 1e300)),
        "stats.ingest_events: a count of -5 is negative": window("*", scope="ingest").model_copy(
            update={"stats": {"ingest_events": MetricStat(n=1, sum=-5, sumsq=25)}}),
    }
    for reason, bad in refused.items():
        with pytest.raises(UnusableRecord) as info:
            read_window(bad.model_dump_json().encode())
        assert str(info.value) == reason


def test_a_critical_alert_waits_until_its_own_interval_excludes_no_change() -> None:
    config = _config("broken_call_spike", threshold=2.0, min_current_n=8.0, min_baseline_n=15.0)
    as_warning = replace(config, detectors=tuple(replace(d, severity="warning")
                                                 for d in config.detectors))
    runs = {"critical": (config, MonitorState(), _Windows()),
            "warning": (as_warning, MonitorState(), _Windows())}
    for cfg, state, window in runs.values():  # baseline: 10% of 200 trajectories
        assert evaluate(state, window("c0", broken_call_trajectory_rate=(200, 20)), cfg) == []
    # 4 of 10 under c1: LLR vs p1 = .2 is 4·ln 2 + 6·ln(.8/.9) = 2.066 ≥ h = 2, but the change
    # +300% has se sqrt(.4·.6/10 + 4²·.1·.9/200)/.1 = 1.766: its interval [−46%, +646%]
    # includes no change. The warning fires on it; the critical alert waits.
    cfg, state, window = runs["warning"]
    fired = evaluate(state, window("c1", broken_call_trajectory_rate=(10, 4)), cfg)
    assert [t.kind for t in fired] == ["fired"]
    low, high = fired[0].alert.evidence["tests"][0]["change"]["interval"]
    assert low == pytest.approx(3 - 1.959964 * 1.766352, abs=1e-4) and low < 0 < high
    cfg, state, window = runs["critical"]
    assert evaluate(state, window("c1", broken_call_trajectory_rate=(10, 4)), cfg) == []
    assert _statistic(state, "c1", "broken_call_spike") >= 2.0
    # 8 of 20: se sqrt(.24/20 + .0072)/.1 = 1.385641, the interval [+28%, +572%]: it fires.
    fired = evaluate(state, window("c1", broken_call_trajectory_rate=(10, 4)), cfg)
    assert [t.kind for t in fired] == ["fired"] and fired[0].alert.severity == "critical"
    low, _ = fired[0].alert.evidence["tests"][0]["change"]["interval"]
    assert low == pytest.approx(3 - 1.959964 * 1.385641, abs=1e-4) and low > 0


def test_shows_change_reads_the_side_the_test_watches() -> None:
    from streams.monitors.evidence import shows_change

    def test(direction: str, low: float | None, high: float | None) -> dict:
        return {"direction": direction, "change": {"interval": [low, high]}}

    assert shows_change(test("up", 0.1, 2.0)) and not shows_change(test("up", -0.1, 2.0))
    assert shows_change(test("down", -0.9, -0.2)) and not shows_change(test("down", -0.9, 0.0))
    assert not shows_change(test("down", 0.2, 0.9))  # a rise is not what a drop test shows
    assert not shows_change(test("up", None, None))


def test_a_critical_alert_waits_while_its_interval_allows_a_drift_too_small_to_act_on() -> None:
    # Baseline 90% edits; c1 at 80% (−11%). The test is designed for a −25% collapse, so with
    # the default margin (a quarter of it) the interval must exclude every drop under 6.25%.
    def windows_until_fired(margin: float) -> tuple[int, list[float]]:
        config = _config("edit_rate_collapse", threshold=1.0, min_current_n=50.0,
                         critical_margin=margin)
        state, window = MonitorState(), _Windows()
        for _ in range(2):
            assert evaluate(state, window("c0", edit_rate=(500, 450)), config) == []
        for k in range(1, 13):
            fired = evaluate(state, window("c1", edit_rate=(100, 80)), config)
            if fired:
                return k, fired[0].alert.evidence["tests"][0]["change"]["interval"]
        raise AssertionError("never fired")

    early, (_, early_high) = windows_until_fired(0.0)
    later, (_, later_high) = windows_until_fired(0.25)
    assert -0.0625 < early_high < 0  # excludes no change, but not a drop of 6.25%
    assert later > early and later_high < -0.0625


@pytest.mark.parametrize(("text", "problem"), [
    ("critical_margin: 1.5", "critical_margin must be between 0 and 1, got 1.5"),
    ("threshold: 0", "threshold must be > 0"),
    ("critical_margins: 0.2", "unknown monitor setting(s) ['critical_margins']"),
])
def test_a_bad_monitor_setting_is_refused_naming_it(text: str, problem: str,
                                                     tmp_path: Path) -> None:
    path = tmp_path / "monitors.yaml"
    path.write_text(text)
    with pytest.raises(MonitorConfigError) as raised:
        load_config(path)
    assert problem in str(raised.value)


def test_a_window_published_again_is_folded_once() -> None:
    """A restarted metrics worker publishes its last fold's windows again; the copy moves no
    baseline and no test, and the next window fires exactly where it would have."""
    config, window = _config("edit_rate_collapse"), _Windows()
    once, twice = MonitorState(), MonitorState()
    baseline = [window("c0", edit_rate=(500, 300)) for _ in range(2)]
    low = window("c1", edit_rate=(100, 30))
    for state, copies in ((once, 1), (twice, 3)):
        for each in baseline:
            for _ in range(copies):
                assert evaluate(state, each, config) == []
        for _ in range(copies):
            assert evaluate(state, low, config) == []
    assert twice.totals == once.totals
    assert twice.keys[("c1", "*", "*")].tests == once.keys[("c1", "*", "*")].tests
    after = window("c1", edit_rate=(100, 30))
    assert [t.kind for t in evaluate(twice, after, config)] == ["fired"]
    # The same figures from another partition are another window: they add up.
    evaluate(once, low.model_copy(update={"partition": 1}), config)
    assert once.totals[("c1", "*")]["edit_rate"].n == 200


def test_the_arms_one_checkpoint_serves_are_tested_together() -> None:
    """A promoted canary serves both arms: one policy, so its evidence is all its traffic."""
    config, state, window = _config("edit_rate_collapse"), MonitorState(), _Windows()
    for _ in range(2):
        evaluate(state, window("c0", edit_rate=(500, 300)), config)
    # Each window at 30% of 50 adds 15·ln(.45/.6) + 35·ln(.55/.4) = 6.83: arm a's, then arm
    # b's, then a's again pass h = 14 together, where each arm alone would need three.
    assert evaluate(state, window("c1", arm="a", edit_rate=(50, 15)), config) == []
    assert evaluate(state, window("c1", arm="b", edit_rate=(50, 15)), config) == []
    fired = evaluate(state, window("c1", arm="a", edit_rate=(50, 15)), config)
    assert [t.kind for t in fired] == ["fired"]
    assert fired[0].alert.labels["arm"] == "*"
    assert fired[0].alert.evidence["tests"][0]["now"]["n"] == 150
