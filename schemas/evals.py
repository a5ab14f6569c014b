"""The eval-suite contract the gate runs on candidate and incumbent checkpoints.

The trainer's gate calls an :class:`EvalSuite`; the harness implements it with its bench tasks.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

__all__ = ["EvalSuite", "TaskResult"]


@dataclass(frozen=True)
class TaskResult:
    task_id: str
    family: str  # tasks of one family form one cluster in the gate's bootstrap
    score: float  # higher is better, in [0, 1]
    sandbox_isolated: bool = True  # False: scored in a sandbox the operator let run unisolated
    broken_calls: int = 0  # tool calls the sandbox could not run: malformed, unknown, bad args


class EvalSuite(Protocol):
    def evaluate(self, checkpoint_dir: Path, seed: int) -> list[TaskResult]:
        """Score a checkpoint on every task; the same seed gives the same task draws."""
        ...
