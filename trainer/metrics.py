"""The trainer's Prometheus figures, counted from the lines ``run_training`` emits."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from infra.health_http import Figure

__all__ = ["TRAINER_FIGURES", "TrainerTotals"]


@dataclass
class TrainerTotals:
    """Since the process started; read by its /metrics."""

    steps: int = 0  # policy-gradient updates
    records: int = 0  # reward records trained on
    tokens: int = 0
    loss: float = 0.0  # of the last update
    cycles: Counter[str] = field(default_factory=Counter)  # closed, by the gate's decision

    def counting(self, emit: Callable[[dict[str, Any]], None]
                 ) -> Callable[[dict[str, Any]], None]:
        """``emit``, counting each line on its way."""
        def count_and_emit(line: dict[str, Any]) -> None:
            if line.get("event") == "step":
                self.steps += 1
                self.records += int(line.get("records", 0))
                self.tokens += int(line.get("tokens", 0))
                self.loss = float(line.get("loss", 0.0))
            elif line.get("event") == "cycle":
                self.cycles[str(line.get("decision"))] += 1
            emit(line)

        return count_and_emit


TRAINER_FIGURES = (
    Figure("rewardstream_trainer_updates", "steps", "counter",
           "Policy-gradient updates since start"),
    Figure("rewardstream_trainer_records", "records", "counter",
           "Reward records trained on since start"),
    Figure("rewardstream_trainer_tokens", "tokens", "counter",
           "Completion tokens trained on since start"),
    Figure("rewardstream_trainer_loss", "loss", "gauge", "The last update's loss"),
    Figure("rewardstream_trainer_cycles", "cycles", "counter",
           "Cycles closed since start, by the gate's decision", "decision",
           ("promoted", "rejected", "canary")),
)
