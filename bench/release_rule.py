"""``rewardstream bench release-rule``: the sequential rule's error rates, by simulation.

Simulated canaries go through the controller's own pure fold: each trajectory's contributions
into :class:`~streams.monitors.abreport.AbTally` (its arm drawn with the canary's share, as the
gateway draws users), and :func:`~streams.release.rule.judge_look` after every batch, until it
promotes, rejects, or reaches the rule's maximum. A trajectory's reward is its task's effect
plus noise (the share of the variance that is the task's is ``--task-share``), and its
covariate is its task's mean over ``--covariate-draws`` earlier trajectories (the same task's
reward before the split, as the controller measures it). The guardrails carry no effect, so a
rejection comes from the reward or the split.

Printed per true effect (canary − production, in reward units): the share promoted, the share
rejected, and the median trajectories (both arms) to the decision. At ``−margin`` the share
promoted is the rule's error rate, to set against its ``alpha``.
"""

from __future__ import annotations

import json
import math
import random
import statistics
from dataclasses import dataclass
from typing import Any

import typer

from streams.monitors.abreport import AbTally
from streams.release.rule import SequentialRule, judge_look

__all__ = ["Population", "register", "simulate", "simulate_canary"]


@dataclass(frozen=True)
class Population:
    sd: float = 1.4  # a trajectory's reward spread, both parts
    task_share: float = 0.6  # the share of its variance that is the task's
    tasks: int = 160
    covariate_draws: int = 2  # earlier trajectories of a task its covariate averages


def _contributions(reward: float, rng: random.Random) -> dict[str, tuple[float, float]]:
    return {"reward": (1.0, reward), "kept_edits": (1.0, float(rng.random() < 0.6)),
            "dissatisfied_followup_rate": (1.0, float(rng.random() < 0.3)),
            "latency_ms": (1.0, rng.lognormvariate(4.5, 0.3)),
            "broken_call_trajectory_rate": (1.0, float(rng.random() < 0.15))}


def simulate_canary(effect: float, rule: SequentialRule, share: float, batch: int,
                    population: Population, rng: random.Random) -> tuple[str, int]:
    """One canary: (its decision, trajectories when it was taken)."""
    between = population.sd * math.sqrt(population.task_share)
    within = population.sd * math.sqrt(1 - population.task_share)
    task_means = [rng.gauss(0, between) for _ in range(population.tasks)]
    covariates = [m + rng.gauss(0, within / math.sqrt(population.covariate_draws))
                  for m in task_means]
    tally, n = AbTally(), 0
    while True:
        for _ in range(batch):
            task = rng.randrange(population.tasks)
            canary = rng.random() < share
            reward = task_means[task] + rng.gauss(0, within) + (effect if canary else 0.0)
            tally.add("canary" if canary else "production", _contributions(reward, rng),
                      covariates[task])
            n += 1
        if tally.count("canary") < 2 or tally.count("production") < 2:
            continue
        report = tally.report("production", "canary", shares=(1 - share, share), adjust=True)
        look = judge_look(report, rule, elapsed_s=0.0)
        if look.decision != "continue":
            return look.decision, n


def simulate(effects: list[float], runs: int, rule: SequentialRule, share: float, batch: int,
             population: Population, seed: int) -> list[dict[str, Any]]:
    rows = []
    for index, effect in enumerate(effects):
        rng = random.Random(seed * 1_000_003 + index)
        outcomes = [simulate_canary(effect, rule, share, batch, population, rng)
                    for _ in range(runs)]
        promoted = sum(1 for decision, _ in outcomes if decision == "promote")
        rows.append({"effect": effect, "runs": runs, "promoted": promoted / runs,
                     "rejected": 1 - promoted / runs,
                     "median_trajectories": statistics.median(n for _, n in outcomes),
                     "at_maximum": sum(1 for _, n in outcomes if n >= rule.max_trajectories)
                     / runs})
    return rows


def release_rule(
    runs: int = typer.Option(1000, min=1, help="Simulated canaries per effect."),
    margin: float = typer.Option(0.15, min=0.0, help="Non-inferiority margin (reward units)."),
    alpha: float = typer.Option(0.05, min=1e-6, max=0.5, help="The rule's alpha."),
    max_trajectories: int = typer.Option(4000, min=10, help="Both arms; then it rejects."),
    share: float = typer.Option(0.5, min=0.01, max=0.99, help="The canary's share."),
    batch: int = typer.Option(20, min=1, help="Trajectories between two looks."),
    sd: float = typer.Option(Population.sd, min=0.0, help="A trajectory's reward spread."),
    task_share: float = typer.Option(Population.task_share, min=0.0, max=0.99,
                                     help="Share of its variance that is the task's."),
    covariate_draws: int = typer.Option(Population.covariate_draws, min=1,
                                        help="Earlier trajectories a task's covariate averages."),
    effect: list[float] = typer.Option(None, help="True effects to simulate (default: "
                                       "-margin, 0, +margin/2, +margin)."),
    seed: int = typer.Option(0, help="Random seed."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object per effect."),
) -> None:
    """The sequential rule's error rates on simulated canaries, looked at after every batch:
    the share promoted at a true effect of -margin (its error rate, at most alpha) and the
    median trajectories to a decision for an equal and for better candidates."""
    rule = SequentialRule(margin=margin, alpha=alpha, max_trajectories=max_trajectories)
    effects = effect or [-margin, 0.0, margin / 2, margin]
    population = Population(sd, task_share, Population.tasks, covariate_draws)
    rows = simulate(effects, runs, rule, share, batch, population, seed)
    if as_json:
        typer.echo("\n".join(json.dumps(row) for row in rows))
        return
    typer.echo(f"{rule.describe()}; share {share:g}, a look every {batch} trajectories, "
               f"{runs} canaries per effect, reward sd {sd:g} ({task_share:.0%} the task's)")
    typer.echo(f"{'effect':>8} {'promoted':>9} {'rejected':>9} {'median n':>9} {'at max':>7}")
    for row in rows:
        typer.echo(f"{row['effect']:>+8.3f} {row['promoted']:>9.3f} {row['rejected']:>9.3f} "
                   f"{row['median_trajectories']:>9.0f} {row['at_maximum']:>7.3f}")


def register(bench_app: typer.Typer) -> None:
    bench_app.command("release-rule")(release_rule)
