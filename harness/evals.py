"""The eval suite the gate runs: the policy on held-out bench tasks, scored by hidden tests.

Implements :class:`schemas.evals.EvalSuite`. Each task is one full trajectory in the same
harness users get (same tools, same limits, a simulated user who answers clarifying questions);
the score is 1 when the hidden tests pass on the final workspace, else 0. Families are the
clusters of the gate's bootstrap. Sampling is seeded per task, so one seed replays exactly.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from harness.agent import AgentConfig, run_trajectory
from harness.instrument import TrajectoryContext
from harness.policy.base import Policy
from harness.tasks import Task, held_out_per_family, sample_tasks
from harness.users import SimulatedUser, UserConfig
from schemas.evals import TaskResult

__all__ = ["HarnessEvalSuite", "family_scores"]

# Users in evals always answer: the score measures the policy, not the user's patience.
_EVAL_USER = UserConfig(decision_noise=0.0, late_revert=0.0, gives_up_on_needless_question=0.0)


def _discard(_event: object) -> None:
    return None


@dataclass(frozen=True)
class HarnessEvalSuite:
    per_family: int = 8
    task_seed: int = 0  # which held-out tasks; fixed, so candidate and incumbent see the same
    temperature: float = 1.0
    max_turns: int = 6
    max_new_tokens: int = 96  # per completion of an in-process policy

    def __post_init__(self) -> None:
        # Fewer tasks in one family than asked would score it on a coarser grid than the rest.
        if not 1 <= self.per_family <= held_out_per_family():
            raise ValueError(f"per_family={self.per_family} is outside 1..{held_out_per_family()}:"
                             f" the family with fewest held-out tasks has {held_out_per_family()}")

    def tasks(self) -> list[Task]:
        return sample_tasks(self.per_family, held_out=True, seed=self.task_seed)

    def evaluate(self, checkpoint_dir: Path, seed: int) -> list[TaskResult]:
        from harness.policy.local import LocalPolicy

        policy = LocalPolicy.from_dir(checkpoint_dir, temperature=self.temperature,
                                      max_new_tokens=self.max_new_tokens)
        return self.evaluate_policy(lambda _task: policy, seed)

    def evaluate_policy(self, policy_for: Callable[[Task], Policy], seed: int) -> list[TaskResult]:
        results = []
        config = AgentConfig(max_turns=self.max_turns)
        for index, task in enumerate(self.tasks()):
            context = TrajectoryContext(f"eval-{seed}-{task.task_id}", f"eval-{seed}", "eval")
            episode = run_trajectory(task, policy_for(task), _discard,
                                     user=SimulatedUser(_EVAL_USER, seed), context=context,
                                     config=config, seed=seed * 10_007 + index)
            results.append(TaskResult(task.task_id, task.family, float(bool(episode.passed)),
                                      sandbox_isolated=bool(episode.isolated),
                                      broken_calls=episode.broken_calls))
        return results


def family_scores(results: list[TaskResult]) -> dict[str, float]:
    """Mean score per family."""
    by_family: dict[str, list[float]] = defaultdict(list)
    for result in results:
        by_family[result.family].append(result.score)
    return {family: sum(s) / len(s) for family, s in sorted(by_family.items())}
