"""The sequential rule: its always-valid bound, the split test, and each decision it can take."""

from __future__ import annotations

import json
import math
import random
from statistics import NormalDist

import pytest

from streams.monitors.abreport import AbReport, AbRow, AbTally
from streams.monitors.errors import MonitorConfigError
from streams.release.rule import SequentialRule, judge_look
from streams.release.sequential import (
    information_needed,
    mixture_log_value,
    radius,
    srm_log_bayes_factor,
)


def test_the_bound_solves_the_mixture_at_one_over_alpha_and_shrinks_with_information() -> None:
    for information in (10.0, 100.0, 1000.0):
        r = radius(information, 0.05, 0.15)
        assert mixture_log_value(r * information, information, 0.15) == \
            pytest.approx(math.log(20), abs=1e-9)
    widths = [radius(i, 0.05, 0.15) for i in (50, 100, 200, 400, 800)]
    assert widths == sorted(widths, reverse=True)
    # Wider than a fixed one-sided 95% interval at the same information: the price of peeking.
    assert radius(400, 0.05, 0.15) > NormalDist().inv_cdf(0.95) / math.sqrt(400)
    assert radius(0, 0.05, 0.15) == math.inf


def test_information_needed_inverts_the_bound() -> None:
    needed = information_needed(0.15, 0.05, 0.15)
    assert needed is not None
    assert radius(needed, 0.05, 0.15) < 0.15 < radius(needed * 0.99, 0.05, 0.15)
    assert information_needed(0.0, 0.05, 0.15) is None
    assert information_needed(0.15, 0.05, 0.15, most=10.0) is None


def test_the_lower_bound_holds_at_every_look_at_least_one_minus_alpha_of_the_time() -> None:
    rng = random.Random(7)
    crossed = 0
    radii = [radius(n, 0.1, 0.2) for n in range(1, 401)]  # unit variance: information n
    for _ in range(300):
        total = 0.0
        for n in range(1, 401):
            total += rng.gauss(0.0, 1.0)
            if total / n - radii[n - 1] > 0.0:  # the true mean, 0, excluded
                crossed += 1
                break
    assert crossed / 300 <= 0.1


def test_the_split_test_flags_a_skewed_split_and_not_a_fair_one() -> None:
    assert srm_log_bayes_factor(500, 500, 0.5, 100) < 0
    assert srm_log_bayes_factor(400, 600, 0.5, 100) > math.log(1000)
    assert srm_log_bayes_factor(100, 900, 0.1, 100) < 0


def _row(metric: str, change: float, se: float, better: str = "down",
         scale: str = "relative") -> AbRow:
    z = 1.959964
    return AbRow(metric, metric, better, scale, 1.0, 1.0 + change, change, change - z * se,  # type: ignore[arg-type]
                 change + z * se, se)


def _report(reward: tuple[float, float], n: tuple[int, int] = (400, 400),
            broken: tuple[float, float] = (0.0, 0.1)) -> AbReport:
    rows = (_row("kept_edits", 0.0, 0.1, "up"), _row("dissatisfied_followup_rate", 0.0, 0.1),
            _row("latency_ms", 0.5, 0.01), _row("broken_call_trajectory_rate", *broken),
            _row("reward", *reward, better="up", scale="difference"))
    return AbReport("prod", "cand", n[0], n[1], (1.0, 1.0), 0.95, rows, 0.0, 1.0, 0.001)


RULE = SequentialRule(margin=0.15, alpha=0.05, max_trajectories=2000)


def test_it_promotes_once_the_lower_bound_clears_the_margin() -> None:
    look = judge_look(_report((0.05, 0.05)), RULE, 60.0)
    assert look.decision == "promote"
    assert look.primary.low > -0.15 and "rules out a loss of 0.15" in look.reason
    # The fixed 95% interval would have promoted at a standard error this rule does not.
    undecided = judge_look(_report((0.0, 0.09)), RULE, 60.0)
    assert -0.15 > undecided.primary.low and 0.0 - 1.96 * 0.09 > -0.18
    assert undecided.decision == "continue" and undecided.needed is not None
    assert "past the maximum of 2000" in undecided.reason  # 800 now, ~1400 more


def test_it_rejects_a_candidate_surely_worse_and_waits_for_the_undecided() -> None:
    worse = judge_look(_report((-0.3, 0.05)), RULE, 60.0)
    assert worse.decision == "reject" and "surely worse" in worse.reason
    waiting = judge_look(_report((-0.1, 0.08)), RULE, 60.0)
    assert waiting.decision == "continue" and waiting.needed is not None and waiting.needed > 0
    at_max = judge_look(_report((-0.1, 0.08), n=(1000, 1000)), RULE, 60.0)
    assert at_max.decision == "reject" and "not shown" in at_max.reason
    late = judge_look(_report((-0.1, 0.08)), RULE, RULE.max_duration_s)
    assert late.decision == "reject"


def test_it_waits_for_enough_trajectories_on_each_arm() -> None:
    look = judge_look(_report((0.5, 0.01), n=(10, 40)), RULE, 1.0)
    assert look.decision == "continue" and look.needed == 20 and "30" in look.reason


def test_a_guardrail_surely_worse_beyond_its_tolerance_rejects() -> None:
    look = judge_look(_report((0.3, 0.02), broken=(0.9, 0.1)), RULE, 1.0)
    assert look.decision == "reject" and "broken_call_trajectory_rate" in look.reason
    # Worse, but not surely beyond the tolerance: promoted on the reward.
    assert judge_look(_report((0.3, 0.02), broken=(0.3, 0.1)), RULE, 1.0).decision == "promote"


def test_a_sample_ratio_mismatch_rejects_first() -> None:
    look = judge_look(_report((0.3, 0.02), n=(600, 400)), RULE, 1.0)
    assert look.decision == "reject" and "sample ratio" in look.reason


def test_the_look_evidence_is_json_and_the_rule_round_trips() -> None:
    report = _report((0.0, 0.09))
    evidence = judge_look(report, RULE, 5.0).evidence(report, RULE)
    decoded = json.loads(json.dumps(evidence, allow_nan=False))
    assert decoded["decision"] == "continue" and decoded["passed"] is False
    assert decoded["primary_bound"]["metric"] == "reward"
    assert SequentialRule.from_dict(decoded["parameters"]) == RULE


def test_bad_parameters_are_refused_by_name() -> None:
    with pytest.raises(MonitorConfigError, match="alpha"):
        SequentialRule(alpha=1.5)
    with pytest.raises(MonitorConfigError, match="margin"):
        SequentialRule(margin=-0.1)
    with pytest.raises(MonitorConfigError, match="unknown"):
        SequentialRule.from_dict({"margn": 0.1})


def test_the_tally_reports_what_build_report_reports() -> None:
    tally = AbTally()
    rng = random.Random(3)
    for i in range(200):
        side = "b" if i % 2 else "a"
        reward = rng.gauss(0.2 if side == "b" else 0.0, 1.0)
        values = {"reward": reward, "kept_edits": rng.random(),
                  "dissatisfied_followup_rate": float(rng.random() < 0.3),
                  "latency_ms": 100 + rng.random(),
                  "broken_call_trajectory_rate": float(rng.random() < 0.1)}
        assert tally.add(side, {k: (1.0, v) for k, v in values.items()}, reward + 0.1, f"k{i}")
    assert not tally.add("a", {k: (1.0, 0.0) for k in values}, None, "k0")  # a repeat
    report = tally.report("a", "b", adjust=True)
    row = report.row("reward")
    assert report.n_baseline == report.n_candidate == 100
    assert row.low < row.change < row.high and row.se == pytest.approx(
        (row.high - row.change) / 1.959964)
