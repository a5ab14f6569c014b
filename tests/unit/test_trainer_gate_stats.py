"""Paired differences and the cluster-bootstrap non-inferiority verdict."""

from __future__ import annotations

import pytest

from schemas.evals import TaskResult
from trainer.bootstrap import (
    cluster_bootstrap_interval,
    cluster_of,
    non_inferiority,
    pair_results,
)
from trainer.gate import describe_gate


def _results(scores: dict[str, float], family: str = "f") -> list[TaskResult]:
    return [TaskResult(task_id, family, score) for task_id, score in scores.items()]


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
    verdict = non_inferiority(pair_results(candidate, incumbent), margin=0.2, seed=3)
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
    a = non_inferiority(pair_results(results, results), margin=0.0001, seed=7)
    assert a.passed and a.overall.mean_diff == 0.0
    assert describe_gate(a.evidence()) == ("gate pass: all families +0.000 [+0.000, +0.000]; "
                                           "every family's lower bound above -0.0001")
    assert a == non_inferiority(pair_results(results, results), margin=0.0001, seed=7)
