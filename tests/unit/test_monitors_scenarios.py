"""Simulated traffic through the pure path: the failure modes alert, stable traffic does not."""

from __future__ import annotations

import pytest

from schemas.rewards import Component, Signal
from streams.monitors.config import MonitorConfig
from streams.monitors.offline import run_offline
from streams.monitors.simulate import PROFILES, Profile, Segment, simulate
from streams.reward import components, signals
from streams.spec import DEFAULT_SPEC_PATH, load_spec, parse_spec

HEALTHY = PROFILES["healthy"]
SWITCH = 3000  # trajectories of the healthy parent before the new checkpoint takes over


def _after_switch(profile: str, seed: int = 7) -> dict[str, int]:
    """Detector → trajectories after the switch until it fired over the fleet (each org's
    detectors see a third of the traffic and fire later, or not at all)."""
    segments = [Segment({"default": ("c0", HEALTHY)}, SWITCH),
                Segment({"default": ("c1", PROFILES[profile])}, 3000)]
    result = run_offline(simulate(segments, seed=seed), MonitorConfig())
    return {t.alert.detector: count - SWITCH for count, t in result.transitions
            if t.kind == "fired" and t.alert.labels["checkpoint"] == "c1"
            and t.alert.labels["org"] == "*"}


def test_edit_deferral_raises_edit_rate_collapse_within_600_trajectories() -> None:
    fired = _after_switch("defers_edits")
    assert 0 < fired["edit_rate_collapse"] <= 600
    assert "clarification_spike" in fired


def test_broken_tool_calls_raise_the_spike_within_800_trajectories() -> None:
    fired = _after_switch("broken_calls")
    assert 0 < fired["broken_call_spike"] <= 800
    assert set(fired) == {"broken_call_spike"}


def test_reward_hacking_raises_the_divergence_alert_within_1500_trajectories() -> None:
    assert 0 < _after_switch("reward_hacking")["reward_kept_divergence"] <= 1500


@pytest.mark.slow
def test_stable_traffic_of_60000_trajectories_raises_nothing() -> None:
    # Five checkpoint generations and an A/B phase, all the same healthy policy.
    segments = [Segment({"default": (f"c{i}", HEALTHY)}, 10_000) for i in range(5)]
    segments.append(Segment({"control": ("c4", HEALTHY), "candidate": ("c5", HEALTHY)}, 10_000))
    result = run_offline(simulate(segments, seed=11), MonitorConfig())
    assert result.trajectories == 60_000
    assert result.transitions == []


GENEROUS = parse_spec(DEFAULT_SPEC_PATH.read_text().replace("accepted_edit = 0.25",
                                                            "accepted_edit = 1.0"))


def test_simulated_records_are_scored_by_the_reward_spec_under_the_joins_names() -> None:
    segments = [Segment({"a": ("c0", HEALTHY)}, 200)]
    default = list(simulate(segments, seed=3))
    generous = list(simulate(segments, seed=3, spec=GENEROUS))
    assert {r.spec_version for r in default} == {load_spec().version}
    assert {r.spec_version for r in generous} == {GENEROUS.version}
    for record, regraded in zip(default, generous, strict=True):
        assert set(record.signals) == set(signals([], load_spec()))
        assert record.components == components(record.signals, "completed", load_spec())
        assert record.total == sum(record.components.values())
        assert regraded.signals == record.signals
        assert regraded.components[Component.ACCEPTED_EDITS] == \
            record.signals[Signal.EDITS_ACCEPTED]


DRIFT_AT = 2500  # trajectories of one checkpoint (2.3 h at 0.3 a second) before its drift


def _drift(profile: Profile, seed: int = 7) -> dict[str, list[tuple[int, str]]]:
    """Detector → (trajectories after the drift, baseline) of each fleet alert it fired, when the
    traffic of one long-lived checkpoint turns into ``profile``: no new checkpoint id."""
    segments = [Segment({"default": ("c0", HEALTHY)}, DRIFT_AT),
                Segment({"default": ("c0", profile)}, 1000)]
    result = run_offline(simulate(segments, seed=seed, rate_per_s=0.3), MonitorConfig())
    fired: dict[str, list[tuple[int, str]]] = {}
    for count, t in result.transitions:
        if t.kind == "fired" and t.alert.labels["org"] == "*":
            fired.setdefault(t.alert.detector, []).append(
                (count - DRIFT_AT, t.alert.labels["baseline"]))
    return fired


@pytest.mark.parametrize(("profile", "detector", "within"), [
    (PROFILES["broken_calls"], "broken_call_spike", 800),  # 0.03 → 0.15 of trajectories
    (Profile(p_broken=0.89), "broken_call_spike", 200),  # the long-lived checkpoint's outage
    (PROFILES["defers_edits"], "edit_rate_collapse", 600),
    (PROFILES["reward_hacking"], "kept_edit_rate_drop", 600),
])
def test_a_drift_under_one_checkpoint_fires_against_its_own_past(
        profile: Profile, detector: str, within: int) -> None:
    fired = _drift(profile)
    assert [baseline for _, baseline in fired[detector]] == ["trailing"]
    assert 0 < fired[detector][0][0] <= within


def test_the_same_checkpoint_without_the_drift_fires_nothing() -> None:
    assert _drift(HEALTHY) == {}
