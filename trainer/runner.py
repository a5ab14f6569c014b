"""The ``rewardstream train`` loop: read reward batches, update, and close cycles into gated
candidates, once or continuously. Under torchrun, rank 0 reads and every rank trains its shard.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from infra.settings import Settings
from trainer.config import TrainConfig
from trainer.consumer import RewardConsumer
from trainer.cycle import CycleResult, TrainingCycle
from trainer.distributed import init_distributed
from trainer.registry_io import JsonlRegistryStore, KafkaRegistryStore, RegistryStore

__all__ = ["print_line", "run_training"]


def print_line(line: dict[str, Any]) -> None:
    """A progress line on stdout, as JSON."""
    print(json.dumps(line, sort_keys=True, default=str), flush=True)


class _CycleClock:
    """When a cycle is complete: after steps_per_cycle updates, else once the period is over."""

    def __init__(self, config: TrainConfig, trainer: TrainingCycle) -> None:
        self.config, self.trainer = config, trainer
        self.started_s = time.monotonic()

    def done(self) -> bool:
        steps = self.trainer.steps_this_cycle
        if self.config.steps_per_cycle is not None:
            return steps >= self.config.steps_per_cycle
        return steps >= 1 and time.monotonic() - self.started_s >= self.config.cycle_period_s


def run_training(config: TrainConfig, *, settings: Settings, records_file: Path | None = None,
                 registry_file: Path | None = None, continuous: bool = False,
                 max_cycles: int | None = None,
                 emit: Callable[[dict[str, Any]], None] = print_line) -> list[CycleResult]:
    dist = init_distributed()
    store: RegistryStore = (JsonlRegistryStore(registry_file) if registry_file is not None
                            else KafkaRegistryStore(settings))
    trainer = TrainingCycle(config, store, dist=dist)
    results = trainer.start()
    for result in results:
        emit({"event": "recovered", "checkpoint": result.checkpoint_id,
              "decision": result.decision})
    source: RewardConsumer | None = None
    if dist.is_main:  # the trainer's own selection runs in its update, after its dedupe
        source = RewardConsumer(settings, config.group_id, positions=trainer.positions,
                                records_file=records_file)
    timeout_s = None if config.deterministic else config.batch_timeout_s
    try:
        while max_cycles is None or len(results) < max_cycles:
            trainer.begin()
            clock = _CycleClock(config, trainer)
            while True:
                payload = None
                if source is not None:  # rank 0 decides, so every rank leaves the loop together
                    done = clock.done()
                    batch = [] if done else source.next_batch(config.batch_records, timeout_s,
                                                              clock.done).records
                    payload = (done, batch, source.exhausted())
                decided = dist.broadcast(payload)
                assert decided is not None  # rank 0 always decides
                done, batch, exhausted = decided
                if done or (exhausted and not batch):
                    break
                if batch and (stats := trainer.update(batch)) is not None and dist.is_main:
                    emit({"event": "step", "step": trainer.global_step, "records": len(batch),
                          "loss": stats.loss, "tokens": stats.tokens})
            if trainer.steps_this_cycle == 0:
                break  # the records file ran out before this cycle trained anything
            finished = dist.broadcast(trainer.finish(
                on_durable=source.commit if source is not None else lambda _: None))
            assert finished is not None  # rank 0's, on every rank
            result = finished
            results.append(result)
            if dist.is_main:
                emit({"event": "cycle", "checkpoint": result.checkpoint_id,
                      "decision": result.decision, "passed": result.evidence.get("passed")})
            if not continuous or exhausted:
                break
    finally:
        if source is not None:
            source.close()
    return results
