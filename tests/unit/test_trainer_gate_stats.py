"""Paired differences, the cluster-bootstrap non-inferiority verdict and the broken-call
guardrail."""

from __future__ import annotations

import pytest

from schemas.evals import TaskResult
from trainer.bootstrap import (
    cluster_bootstrap_interval,
    cluster_of,
    gate_verdict,
    pair_results,
)
from trainer.gate import describe_gate, failed_checks


def _results(scores: dict[str, float], family: str = "f", broke: frozenset[str] = frozenset()
             ) -> list[TaskResult]:
    return [TaskResult(task_id, family, score, broken_calls=int(task_id in broke))
            for task_id, score in scores.items()]


def test_pairs_by_task_and_refuses_different_task_sets() -> None:
    pairs = pair_results(_results({"t#0": 0.5, "t#1": 1.0}), _results({"t#1": 0.5, "t#0": 0.5}))
    assert [(p.task_id, p.cluster, p.diff) for p in pairs] == [("t#0", "t", 0.0), ("t#1", "t", 0.5)]
    with pytest.raises(ValueError, match="different tasks"):
        pair_results(_results({"a": 1.0}), _results({"b": 1.0}))
    assert cluster_of("plain") == "plain"


def test_cluster_interval_resamples_whole_clusters() -> None:
    # Two clusters of ten identical draws: +0.1 and -0.3. Resampling two clusters gives mean
    # 0.1 (p=1/4), -0.1 (p=1/2) or -0.3 (p=1/4), so the 95% interval is exactly [-0.3, 0.1].
    diffs = [0.1] * 10 + [-0.3] * 10
    clusters = ["a"] * 10 + ["b"] * 10
    lower, upper = cluster_bootstrap_interval(diffs, clusters, 0.95, 4000, seed=1)
    assert (lower, upper) == pytest.approx((-0.3, 0.1))
    naive_lower, _ = cluster_bootstrap_interval(diffs, [str(i) for i in range(20)], 0.95, 4000, 1)
    assert naive_lower > -0.2  # treating draws as independent is far too confident


def test_non_inferiority_fails_the_family_whose_interval_crosses_the_margin() -> None:
    good = {f"g{i}#0": 0.5 for i in range(5)}
    bad = {"b0#0": 0.9, "b0#1": 0.9, "b1#0": 0.5, "b1#1": 0.5}
    incumbent = _results(good, "good") + _results({k: 0.8 for k in bad}, "bad")
    candidate = _results({k: 0.51 for k in good}, "good") + _results(bad, "bad")
    verdict = gate_verdict(pair_results(candidate, incumbent), 0.2, 0.05, seed=3)
    by_family = {f.family: f for f in verdict.families}
    assert by_family["good"].passed and by_family["good"].lower == pytest.approx(0.01)
    assert not by_family["bad"].passed and by_family["bad"].lower == pytest.approx(-0.3)
    assert by_family["bad"].clusters == 2 and by_family["bad"].tasks == 4
    assert not verdict.passed
    assert verdict.evidence()["families"][0]["family"] == "bad"
    # The reason names the failing family, its change and interval, and the margin.
    mean_bad = by_family["bad"].mean_diff
    assert describe_gate(verdict.evidence()) == (
        f"gate fail: bad {mean_bad:+.3f} [-0.300, {by_family['bad'].upper:+.3f}]: "
        "lower bound at or below the margin -0.2")


def test_identical_models_pass_and_the_verdict_is_reproducible() -> None:
    results = _results({f"t{i}": i / 10 for i in range(6)}, "f")
    a = gate_verdict(pair_results(results, results), 0.0001, 0.05, seed=7)
    assert a.passed and a.overall.mean_diff == 0.0
    assert describe_gate(a.evidence()) == (
        "gate pass: all families +0.000 [+0.000, +0.000]; every family's lower bound above "
        "-0.0001; tasks with a broken call 0.00 → 0.00 (+0.000 [+0.000, +0.000])")
    assert a == gate_verdict(pair_results(results, results), 0.0001, 0.05, seed=7)


def _tasks(families: int, per_family: int) -> dict[str, list[str]]:
    return {f"f{k}": [f"f{k}-t{i}" for i in range(per_family)] for k in range(families)}


def _suite(tasks: dict[str, list[str]], broke_per_family: int) -> list[TaskResult]:
    """Every task solved; the first ``broke_per_family`` tasks of each family break a call."""
    return [r for family, ids in tasks.items()
            for r in _results(dict.fromkeys(ids, 1.0), family, frozenset(ids[:broke_per_family]))]


def test_a_candidate_that_surely_breaks_more_calls_fails_the_gate_with_its_reason() -> None:
    tasks = _tasks(families=5, per_family=10)
    verdict = gate_verdict(pair_results(_suite(tasks, 5), _suite(tasks, 1)), 0.3, 0.05, seed=2)
    guardrail = verdict.guardrail
    # Same solve rate everywhere, so every family passes on score; 4 more tasks of 10 broke in
    # every family, so the interval collapses on +0.4, far above the 0.05 tolerance.
    assert all(f.passed for f in verdict.families) and verdict.overall.passed
    assert (guardrail.incumbent_share, guardrail.candidate_share) == pytest.approx((0.1, 0.5))
    assert guardrail.lower == pytest.approx(0.4) and not guardrail.passed and not verdict.passed
    assert failed_checks(verdict.evidence()) == ["broken calls"]
    assert describe_gate(verdict.evidence()) == (
        "gate fail: tasks with a broken call 0.10 → 0.50 (+0.400 [+0.400, +0.400]): lower bound "
        "above the tolerance +0.05")


def test_broken_calls_within_the_tolerance_or_not_surely_up_pass_the_guardrail() -> None:
    tasks = _tasks(families=5, per_family=20)
    # One more broken task in twenty per family: +0.05, not above the tolerance.
    within = gate_verdict(pair_results(_suite(tasks, 3), _suite(tasks, 2)), 0.3, 0.05, seed=2)
    assert within.guardrail.lower == pytest.approx(0.05) and within.passed
    # Far more breakage in one family only: the mean is up, but resampling families finds
    # draws without it, so the lower bound does not clear the tolerance.
    candidate = _suite(tasks, 2)
    candidate = [TaskResult(r.task_id, r.family, r.score, broken_calls=1)
                 if r.family == "f0" else r for r in candidate]
    one_family = gate_verdict(pair_results(candidate, _suite(tasks, 2)), 0.3, 0.05, seed=2)
    assert one_family.guardrail.mean_diff == pytest.approx(0.18)
    assert one_family.guardrail.lower <= 0.05 and one_family.passed
    # Fewer broken calls never fail it.
    assert gate_verdict(pair_results(_suite(tasks, 0), _suite(tasks, 9)), 0.3, 0.0).passed
