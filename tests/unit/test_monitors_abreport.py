"""The A/B report's statistics on hand-computed examples."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from schemas.rewards import RewardRecord
from streams.monitors.abreport import build_report, format_report, sample_ratio_mismatch
from streams.monitors.errors import MonitorInputError

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _record(i: int, arm: str, total: float, latency_ms: float) -> RewardRecord:
    return RewardRecord(
        trajectory_id=f"t{i}", spec_version="v", checkpoint_id=f"ck-{arm}", arm=arm,
        outcome="completed", ended_at=T0, finalized_by="complete", finalized_at=T0, samples=[],
        components={"x": total}, total=total,
        signals={"latency_ms_mean": latency_ms, "edits_accepted": 1.0, "kept_fraction": 1.0},
        event_ids=[])


def test_relative_changes_and_intervals_by_hand() -> None:
    records = [_record(0, "A", 1, 100), _record(1, "A", 2, 100), _record(2, "A", 3, 100),
               _record(3, "B", 2, 90), _record(4, "B", 3, 90), _record(5, "B", 4, 90)]
    report = build_report(records, "A", "B")
    reward = next(r for r in report.rows if r.metric == "reward")
    # means 2 → 3, variances 1 and 1, n 3: se = sqrt(1/3 + 1.5²·1/3) / 2 = .520416
    assert reward.relative == pytest.approx(0.5)
    assert reward.low == pytest.approx(0.5 - 1.959964 * 0.520416, abs=1e-5)
    assert reward.high == pytest.approx(0.5 + 1.959964 * 0.520416, abs=1e-5)
    assert reward.verdict == "no significant change"
    latency = next(r for r in report.rows if r.metric == "latency_ms")
    assert latency.relative == pytest.approx(-0.1)
    assert latency.low == latency.high == pytest.approx(-0.1)  # no variance
    assert latency.verdict == "better"  # lower latency is better
    assert report.n_baseline == report.n_candidate == 3 and not report.srm_detected
    text = format_report(report)
    assert "Latency (ms)" in text and "-10.00%" in text and "sample ratio ok" in text


def test_sample_ratio_mismatch() -> None:
    statistic, p = sample_ratio_mismatch([44_000, 45_000], [1, 1])
    assert statistic == pytest.approx(11.236, abs=1e-3)
    assert p == pytest.approx(0.000802, abs=2e-6)
    statistic, p = sample_ratio_mismatch([900, 100], [9, 1])
    assert statistic == 0.0 and p == 1.0


def test_unknown_arm_is_named() -> None:
    with pytest.raises(MonitorInputError, match="--candidate 'Z'"):
        build_report([_record(0, "A", 1, 1)], "A", "Z")
