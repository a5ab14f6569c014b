"""The canary's A/B rule: sample ratio first, then the primary's margin, then the guardrails."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import pytest

from streams.monitors.abreport import AbReport, AbRow
from streams.monitors.abrule import AbRule, judge_ab
from streams.monitors.errors import MonitorConfigError


def _row(metric: str, better: str, low: float, high: float, scale: str = "relative") -> AbRow:
    return AbRow(metric, metric, better, scale, 1.0, 1.0, (low + high) / 2, low, high)  # type: ignore[arg-type]


def _report(reward: tuple[float, float] = (-0.2, 0.6), broken: tuple[float, float] = (-0.3, 0.5),
            latency: tuple[float, float] = (0.1, 0.4), srm_p: float = 0.4) -> AbReport:
    rows = (_row("kept_edits", "up", -0.2, 0.3),
            _row("dissatisfied_followup_rate", "down", -0.4, 0.1),
            _row("latency_ms", "down", *latency),
            _row("broken_call_trajectory_rate", "down", *broken),
            _row("reward", "up", *reward, scale="difference"))
    return AbReport("prod", "cand", 80, 80, (1.0, 1.0), 0.95, rows, 0.7, srm_p, 0.001)


def test_a_candidate_whose_interval_rules_out_the_margin_passes_even_with_slower_latency() -> None:
    verdict = judge_ab(_report(latency=(0.1, 0.4)), AbRule(margin=0.75))
    assert verdict.passed
    assert verdict.reason == ("reward +0.200 [-0.200, +0.600] rules out a loss of 0.75; "
                              "no guardrail worse beyond its tolerance")


def test_the_primary_must_rule_out_a_loss_of_the_margin() -> None:
    verdict = judge_ab(_report(reward=(-0.9, 0.3)), AbRule(margin=0.75))
    assert not verdict.passed
    assert verdict.reason == "reward -0.300 [-0.900, +0.300] does not rule out a loss of 0.75"
    assert not judge_ab(_report(reward=(-0.75, 0.3)), AbRule(margin=0.75)).passed  # on it: no
    assert judge_ab(_report(reward=(-0.74, 0.3)), AbRule(margin=0.75)).passed


def test_a_guardrail_surely_worse_beyond_its_tolerance_blocks_a_non_inferior_primary() -> None:
    verdict = judge_ab(_report(broken=(0.4, 2.2)), AbRule())
    assert not verdict.passed
    assert verdict.reason == ("guardrail broken_call_trajectory_rate +130.00% "
                              "[+40.00%, +220.00%] is worse beyond its tolerance 25.00%")
    # Latency is not a guardrail unless the rule names it.
    assert not judge_ab(_report(latency=(0.3, 0.4)),
                        AbRule(guardrails=("latency_ms",))).passed


def test_a_significant_drift_within_the_tolerance_does_not_veto() -> None:
    # worse with confidence, but not surely by more than 25%
    assert judge_ab(_report(broken=(0.1, 0.9)), AbRule()).passed
    assert not judge_ab(_report(broken=(0.1, 0.9)),
                        AbRule(guardrail_relative_tolerance=0.05)).passed
    # kept edits (higher is better): the interval's upper end decides
    kept_down = AbReport("prod", "cand", 80, 80, (1.0, 1.0), 0.95,
                         (_row("kept_edits", "up", -0.6, -0.26),
                          _row("reward", "up", 0.0, 0.4, scale="difference")), 0.7, 0.4, 0.001)
    assert not judge_ab(kept_down, AbRule(guardrails=("kept_edits",))).passed
    assert judge_ab(kept_down, AbRule(guardrails=("kept_edits",),
                                      guardrail_relative_tolerance=0.3)).passed


def test_a_rate_rising_from_zero_is_held_to_the_difference_tolerance() -> None:
    # A production that never called a tool broke none; its mender breaks a few.
    mender = AbReport("prod", "cand", 76, 84, (1.0, 1.0), 0.95,
                      (_row("broken_call_trajectory_rate", "down", 0.009, 0.110,
                            scale="difference"),
                       _row("reward", "up", 0.755, 1.350, scale="difference")), 0.7, 0.5, 0.001)
    broken_only = AbRule(guardrails=("broken_call_trajectory_rate",))
    assert judge_ab(mender, broken_only).passed
    verdict = judge_ab(mender, replace(broken_only, guardrail_difference_tolerance=0.005))
    assert not verdict.passed and verdict.reason.endswith("beyond its tolerance 0.005")


def test_a_sample_ratio_mismatch_fails_whatever_the_metrics_say() -> None:
    verdict = judge_ab(_report(reward=(0.5, 0.9), srm_p=0.0004), AbRule())
    assert not verdict.passed and verdict.reason.startswith("sample ratio mismatch (p=0.0004")


def test_no_interval_is_no_evidence_and_the_evidence_is_json() -> None:
    report = _report(reward=(math.nan, math.nan))
    verdict = judge_ab(report, AbRule())
    assert not verdict.passed and "no interval" in verdict.reason
    evidence = json.loads(json.dumps(verdict.evidence(report, AbRule()), allow_nan=False))
    assert evidence["passed"] is False and evidence["margin"] == 0.75
    assert evidence["guardrail_tolerance"] == {"relative": 0.25, "difference": 0.05}
    assert evidence["rows"][-1] == {"metric": "reward", "scale": "difference", "better": "up",
                                    "baseline": 1.0, "candidate": 1.0, "change": None,
                                    "low": None, "high": None,
                                    "verdict": "no significant change"}
    assert evidence["srm"]["detected"] is False and evidence["n_candidate"] == 80


def test_a_negative_margin_or_tolerance_is_refused() -> None:
    with pytest.raises(MonitorConfigError, match="margin=-0.1"):
        AbRule(margin=-0.1)
    with pytest.raises(MonitorConfigError, match="guardrail_difference_tolerance=nan"):
        AbRule(guardrail_difference_tolerance=math.nan)
