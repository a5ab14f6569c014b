"""The calibration the thresholds are sized by: false alarms on stable traffic (simulated, or
drawn from recorded trajectories) and how soon each failure mode fires."""

from __future__ import annotations

from dataclasses import replace

from streams.monitors.calibrate import calibrate, describe, resampled
from streams.monitors.config import MonitorConfig
from streams.monitors.simulate import PROFILES, Segment, simulate


def test_stable_runs_count_their_alarms_and_failure_modes_their_delays() -> None:
    # Small thresholds on small runs, so that both happen in a second.
    config = replace(MonitorConfig(), window_s=10, grace_s=2, threshold=3.0,
                     min_baseline_n=15.0, min_current_n=15.0, trailing_gap_s=60,
                     trailing_span_s=600)
    result = calibrate(config, seeds=1, checkpoints=2, per_checkpoint=500, rate_per_s=2.0,
                       profiles=("broken_calls",))
    assert result.trajectories == 2 * 500 and result.windows > 0
    assert result.runs_alarmed <= result.seeds
    assert set(result.delays) == {("broken_calls", "new checkpoint"), ("broken_calls", "drift")}
    spike = result.delays[("broken_calls", "new checkpoint")]["broken_call_spike"]
    assert len(spike) == 1 and all(sev == "critical" and 0 < delay <= 500 for sev, delay in spike)
    lines = describe(result)
    assert lines[0].startswith("stable traffic: 1,000 trajectories in ")
    assert "  broken_calls as a new checkpoint:" in lines


def test_recorded_trajectories_are_drawn_anew_as_stable_traffic() -> None:
    pool = list(simulate([Segment({"a": ("old", PROFILES["healthy"])}, 50)], seed=1))
    drawn = list(resampled(pool, checkpoints=3, per_checkpoint=20, rate_per_s=2.0, seed=4))
    assert [r.checkpoint_id for r in drawn] == ["c0"] * 20 + ["c1"] * 20 + ["c2"] * 20
    assert len({r.trajectory_id for r in drawn}) == 60  # each its own trajectory
    ends = [r.ended_at for r in drawn]
    assert ends == sorted(ends) and len(set(ends)) == 60
    originals = {(r.total, tuple(sorted(r.signals.items()))) for r in pool}
    assert all((r.total, tuple(sorted(r.signals.items()))) in originals for r in drawn)
    assert drawn == list(resampled(pool, checkpoints=3, per_checkpoint=20, rate_per_s=2.0, seed=4))
    quiet = calibrate(MonitorConfig(), seeds=1, checkpoints=2, per_checkpoint=100, pool=pool)
    assert quiet.trajectories == 200 and quiet.delays == {}
