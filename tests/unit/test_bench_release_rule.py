"""A small run of the sequential rule's simulation: its error rate at -margin stays within
alpha while it is looked at after every batch, and better candidates decide sooner."""

from __future__ import annotations

from bench.release_rule import Population, simulate
from streams.release.rule import SequentialRule


def test_peeking_after_every_batch_keeps_the_error_rate_within_alpha() -> None:
    rule = SequentialRule(margin=0.15, alpha=0.1, max_trajectories=2000)
    population = Population(sd=0.5, task_share=0.5, tasks=40, covariate_draws=3)
    worse, equal, better = simulate([-0.15, 0.0, 0.15], runs=120, rule=rule, share=0.5,
                                    batch=10, population=population, seed=1)
    assert worse["promoted"] <= rule.alpha
    assert equal["promoted"] >= 0.8 and better["promoted"] >= 0.95
    assert better["median_trajectories"] < equal["median_trajectories"]
    assert worse["at_maximum"] < 0.2  # a candidate worse by the margin is mostly rejected early
