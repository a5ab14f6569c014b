"""The outcome detectors (mean reward, kept edits per edit and per trajectory, dissatisfied
follow-ups) on windows drawn at random: a change of the size each is designed for fires a
critical alert, the same stream without it fires nothing at all; the reward's evidence names the
components that moved; the latency alert reads in milliseconds."""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from schemas.metrics import MetricStat, MetricWindow
from streams.monitors.config import MonitorConfig, default_detectors
from streams.monitors.detectors import MonitorState, Transition, evaluate

T0 = datetime(2026, 1, 1, tzinfo=UTC)
PER_WINDOW = 50  # trajectories a one-minute window
Draw = Callable[[random.Random], dict[str, tuple[float, float]]]  # metric → (weight, value)


def _trajectory(keep: float = 0.6, dissatisfied: float = 0.3, rest: float = 0.55) -> Draw:
    """One trajectory: 1–4 proposed edits each kept with probability ``keep``; a dissatisfied
    follow-up with probability ``dissatisfied``; a reward of 0.5 per kept edit, −0.5 for the
    follow-up, plus the rest ~ N(rest, 1.2): a mean near 0.4 with a spread near 1.4."""
    def draw(rng: random.Random) -> dict[str, tuple[float, float]]:
        proposed = rng.randint(1, 4)
        kept = sum(rng.random() < keep for _ in range(proposed))
        unhappy = float(rng.random() < dissatisfied)
        parts = {"reward.kept_3600s": 0.5 * kept, "reward.dissatisfied": -0.5 * unhappy,
                 "reward.rest": rng.gauss(rest, 1.2)}
        return {"kept_edit_rate": (proposed, kept), "kept_edits": (1.0, kept),
                "dissatisfied_followup_rate": (1.0, unhappy),
                "reward": (1.0, sum(parts.values())),
                **{name: (1.0, value) for name, value in parts.items()}}
    return draw


def _stream(rng: random.Random, segments: list[tuple[str, Draw, int]]) -> list[MetricWindow]:
    """One-minute windows of ``PER_WINDOW`` trajectories each, segment after segment."""
    windows = []
    for checkpoint, draw, trajectories in segments:
        for _ in range(trajectories // PER_WINDOW):
            stats: dict[str, list[float]] = {}
            for _ in range(PER_WINDOW):
                for name, (weight, value) in draw(rng).items():
                    n, total, squares = stats.get(name, [0.0, 0.0, 0.0])
                    stats[name] = [n + weight, total + value, squares + value * value]
            start = T0 + timedelta(minutes=len(windows))
            windows.append(MetricWindow(
                scope="rewards", window_start=start, window_end=start + timedelta(minutes=1),
                checkpoint_id=checkpoint, arm="a", trajectories=PER_WINDOW,
                stats={k: MetricStat(n=n, sum=s, sumsq=q) for k, (n, s, q) in stats.items()}))
    return windows


def _run(windows: list[MetricWindow], config: MonitorConfig) -> list[tuple[int, Transition]]:
    state, out = MonitorState(), []
    for index, window in enumerate(windows):
        out += [((index + 1) * PER_WINDOW, t) for t in evaluate(state, window, config)]
    return out


PARENT = 6000  # the parent checkpoint's trajectories before the candidate serves
# Each detector, a change it must catch at the default thresholds, and within how many of the
# candidate's trajectories (measured over 5 seeds: 500–800, 400–650, 350–700, 500–2,100).
CHANGES = {
    "reward_drop": (_trajectory(rest=0.25), 1500),  # −0.3 (designed for −0.2; σ ≈ 1.4)
    "kept_edit_rate_drop": (_trajectory(keep=0.48), 1000),  # −20% per edit
    "kept_edits_drop": (_trajectory(keep=0.48), 1000),  # −20% per trajectory
    "dissatisfied_spike": (_trajectory(dissatisfied=0.4), 2500),  # +33% (designed for +25%)
}


@pytest.mark.parametrize("detector", sorted(CHANGES))
def test_a_change_of_the_stated_size_fires_critical_against_the_parent(detector: str) -> None:
    changed, within = CHANGES[detector]
    for seed in range(2):
        transitions = _run(_stream(random.Random(seed), [("c0", _trajectory(), PARENT),
                                                         ("c1", changed, within)]),
                           MonitorConfig())
        fired = [(count - PARENT, t.alert) for count, t in transitions
                 if t.kind == "fired" and t.alert.detector == detector]
        assert fired, f"seed {seed}: {detector} did not fire"
        after, alert = fired[0]
        assert 0 < after <= within and alert.severity == "critical"
        assert alert.labels["checkpoint"] == "c1" and alert.labels["baseline"] == "parent"


def test_a_stable_stream_of_the_same_length_fires_nothing() -> None:
    """The longest stream above with no change: no detector fires, against the parent or
    against its own past (the bound: one false alarm per e**14 windows per key and test)."""
    longest = max(within for _, within in CHANGES.values())
    for seed in range(3):
        stable = _run(_stream(random.Random(seed), [("c0", _trajectory(), PARENT),
                                                    ("c1", _trajectory(), longest)]),
                      MonitorConfig())
        assert stable == [], f"seed {seed}: {[t.alert.summary for _, t in stable]}"


def test_a_reward_drop_names_the_components_that_moved() -> None:
    # Kept edits fall (−0.15 of reward), dissatisfied follow-ups rise (−0.05); the rest holds.
    changed = _trajectory(keep=0.5, dissatisfied=0.4)
    fired = [t.alert for _, t in _run(_stream(random.Random(5), [
        ("c0", _trajectory(), PARENT), ("c1", changed, 3000)]), MonitorConfig())
             if t.kind == "fired" and t.alert.detector == "reward_drop"]
    test = fired[0].evidence["tests"][0]
    assert test["change"]["scale"] == "difference"
    assert test["change"]["value"] == pytest.approx(test["now"]["value"]
                                                    - test["baseline"]["value"], abs=1e-5)
    moved = {part["part"]: part for part in test["parts"]}
    assert [part["part"] for part in test["parts"]][:2] == ["kept_3600s", "dissatisfied"]
    assert moved["kept_3600s"]["change"] == pytest.approx(-0.15, abs=0.05)
    assert moved["dissatisfied"]["change"] == pytest.approx(-0.05, abs=0.03)
    assert abs(moved["rest"]["change"]) < 0.1
    assert sum(p["change"] for p in test["parts"]) == pytest.approx(test["change"]["value"],
                                                                    abs=1e-5)
    summary = fired[0].summary
    assert summary.startswith("reward ")
    kept, unhappy = moved["kept_3600s"], moved["dissatisfied"]
    assert (f"moved: kept_3600s {kept['change']:+.3f} [{kept['interval'][0]:+.3f}, "
            f"{kept['interval'][1]:+.3f}], dissatisfied {unhappy['change']:+.3f}") in summary


def test_the_latency_alert_reads_in_milliseconds_and_a_factor() -> None:
    config = replace(MonitorConfig(baseline_z=0.0), detectors=tuple(
        d for d in default_detectors() if d.name == "latency_regression"))

    def window(minute: int, checkpoint: str, log_ms: float) -> MetricWindow:
        start = T0 + timedelta(minutes=minute)
        # 100 trajectories with log latency log_ms ± 0.5 (sd 0.5)
        stat = MetricStat(n=100, sum=100 * log_ms, sumsq=100 * (log_ms ** 2 + 0.25))
        return MetricWindow(scope="rewards", window_start=start,
                            window_end=start + timedelta(minutes=1), checkpoint_id=checkpoint,
                            arm="a", stats={"log_latency": stat})

    for minute in range(5):
        assert evaluate(MonitorState(), window(minute, "c0", math.log(46)), config) == []
    state = MonitorState()
    for minute in range(5):
        evaluate(state, window(minute, "c0", math.log(46)), config)
    fired = evaluate(state, window(5, "c1", math.log(1565)), config)
    assert fired[0].alert.summary.startswith(
        "latency (geometric mean) 1,565 ms (n=100) vs 46 ms (n=500): ×34.0 [×")
