"""The A/B report's statistics on hand-computed examples."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from schemas.rewards import RewardRecord
from streams.monitors.abreport import build_report, format_report, sample_ratio_mismatch
from streams.monitors.errors import MonitorInputError

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _record(i: int, arm: str, total: float, latency_ms: float, kept: float = 1.0,
            broken: float = 0.0) -> RewardRecord:
    return RewardRecord(
        trajectory_id=f"t{i}", spec_version="v", checkpoint_id=f"ck-{arm}", arm=arm,
        outcome="completed", ended_at=T0, finalized_by="complete", finalized_at=T0, samples=[],
        components={"x": total}, total=total,
        signals={"latency_ms_mean": latency_ms, "edits_proposed": kept, "edits_accepted": kept,
                 "kept_fraction": 1.0, "broken_tool_calls": broken},
        event_ids=[])


def test_relative_changes_differences_and_intervals_by_hand() -> None:
    records = [_record(0, "A", 1, 100, kept=1), _record(1, "A", 2, 100, kept=2),
               _record(2, "A", 3, 100, kept=3), _record(3, "B", 2, 90, kept=2),
               _record(4, "B", 3, 90, kept=3), _record(5, "B", 4, 90, kept=4)]
    report = build_report(records, "A", "B")
    kept = report.row("kept_edits")
    # means 2 → 3, variances 1 and 1, n 3: se = sqrt(1/3 + 1.5²·1/3) / 2 = .520416
    assert (kept.scale, kept.change) == ("relative", pytest.approx(0.5))
    assert kept.low == pytest.approx(0.5 - 1.959964 * 0.520416, abs=1e-5)
    assert kept.high == pytest.approx(0.5 + 1.959964 * 0.520416, abs=1e-5)
    assert kept.verdict == "no significant change"
    # The reward is a difference, in reward units: 3 − 2, se = sqrt(1/3 + 1/3) = .816497.
    reward = report.row("reward")
    assert (reward.scale, reward.change) == ("difference", pytest.approx(1.0))
    assert reward.low == pytest.approx(1.0 - 1.959964 * 0.816497, abs=1e-5)
    assert reward.high == pytest.approx(1.0 + 1.959964 * 0.816497, abs=1e-5)
    latency = report.row("latency_ms")
    assert latency.change == pytest.approx(-0.1)
    assert latency.low == latency.high == pytest.approx(-0.1)  # no variance
    assert latency.verdict == "better"  # lower latency is better
    assert report.n_baseline == report.n_candidate == 3 and not report.srm_detected
    text = format_report(report, ("production", "canary"))
    assert "Latency (ms)" in text and "-10.00%" in text and "sample ratio ok" in text
    assert "+1.000" in text and "canary B (n=3) vs production A (n=3), split 50%/50%" in text


def test_a_negative_baseline_reward_still_reads_the_right_way() -> None:
    # A relative change of −0.5 → +0.5 would be −200%; the difference is +1.
    records = [_record(0, "A", -0.5, 1), _record(1, "A", -0.5, 1),
               _record(2, "B", 0.5, 1), _record(3, "B", 0.5, 1)]
    reward = build_report(records, "A", "B").row("reward")
    assert reward.change == pytest.approx(1.0) and reward.verdict == "better"


def test_a_rate_rising_from_zero_is_a_difference_with_an_interval() -> None:
    records = [_record(i, "A", 0, 1) for i in range(4)]
    records += [_record(4 + i, "B", 0, 1, broken=float(i % 2)) for i in range(4)]
    broken = build_report(records, "A", "B").row("broken_call_trajectory_rate")
    # 0 of 4 → 2 of 4: +0.5, se = sqrt(0 + (1/3)/4) = .288675 (sample variance of 0,1,0,1)
    assert (broken.scale, broken.change) == ("difference", pytest.approx(0.5))
    assert broken.low == pytest.approx(0.5 - 1.959964 * 0.288675, abs=1e-5)
    assert broken.verdict == "no significant change" and broken.low < 0


def test_sample_ratio_mismatch() -> None:
    statistic, p = sample_ratio_mismatch([44_000, 45_000], [1, 1])
    assert statistic == pytest.approx(11.236, abs=1e-3)
    assert p == pytest.approx(0.000802, abs=2e-6)
    statistic, p = sample_ratio_mismatch([900, 100], [9, 1])
    assert statistic == 0.0 and p == 1.0


def test_unknown_arm_is_named() -> None:
    with pytest.raises(MonitorInputError, match="--candidate 'Z'"):
        build_report([_record(0, "A", 1, 1)], "A", "Z")


def test_a_repeated_record_counts_once() -> None:
    records = [_record(0, "A", 1, 100), _record(1, "A", 3, 100), _record(2, "B", 2, 90),
               _record(3, "B", 4, 90)]
    repeated = [*records, records[0], records[0], records[3]]  # the join repeated some
    once, twice = build_report(records, "A", "B"), build_report(repeated, "A", "B")
    assert (twice.n_baseline, twice.n_candidate) == (2, 2)
    assert twice == once  # same means, intervals and sample-ratio check


def test_one_orgs_report_holds_only_its_records() -> None:
    acme = [_record(i, arm, 1 + i % 2, 100).model_copy(update={"org_id": "acme"})
            for i, arm in enumerate("AABB")]
    # evil's records reuse acme's trajectory ids with extreme rewards
    evil = [r.model_copy(update={"org_id": "evil", "total": 1e6}) for r in acme]
    report = build_report(acme + evil, "A", "B", org="acme")
    assert (report.n_baseline, report.n_candidate) == (2, 2)
    assert next(r for r in report.rows if r.metric == "reward").candidate == 1.5
    with pytest.raises(MonitorInputError, match="of org 'nobody'"):
        build_report(acme + evil, "A", "B", org="nobody")


def test_a_covariate_adjusts_only_the_reward_and_the_report_says_so() -> None:
    # Task difficulty (the covariate) spreads the rewards; the candidate adds +0.5 to each.
    difficulty = [-2.0, -1.0, 0.0, 1.0, 2.0, -1.5, 0.5, 1.5]
    records = [_record(i, "A", d + 0.1 * (-1) ** i, 100) for i, d in enumerate(difficulty)]
    records += [_record(10 + i, "B", d + 0.5 + 0.1 * (-1) ** i, 100)
                for i, d in enumerate(difficulty)]
    covariates = {f"t{i}": d for i, d in enumerate(difficulty)}
    covariates |= {f"t{10 + i}": d for i, d in enumerate(difficulty)}
    plain = build_report(records, "A", "B")
    adjusted = build_report(records, "A", "B", covariates=covariates)
    raw, cuped = plain.row("reward"), adjusted.row("reward")
    assert raw.verdict == "no significant change" and cuped.verdict == "better"
    assert cuped.change == pytest.approx(0.5, abs=1e-9)
    assert cuped.high - cuped.low < 0.2 * (raw.high - raw.low)
    assert adjusted.row("kept_edits") == plain.row("kept_edits")
    assert plain.reward_variance_reduction is None
    assert adjusted.reward_variance_reduction == pytest.approx(0.99, abs=0.01)
    assert adjusted.evidence()["reward_variance_reduction"] == adjusted.reward_variance_reduction
    assert "CUPED" in format_report(adjusted) and "CUPED" not in format_report(plain)
