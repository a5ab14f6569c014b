"""One training cycle, as a Python API: new reward records -> update(s) -> candidate -> gate ->
promotion or rejection, every step an event in the registry. With ``canary`` set, a candidate
that passes the gate serves the canary arm instead, and the release controller
(``rewardstream release run``) promotes or rejects it on its A/B.

``TrainingCycle.run(records)`` does a whole cycle in-process (the closed-loop demo calls it);
the ``rewardstream train`` loop drives the same object batch by batch from Kafka. Each cycle
starts from the registry's production checkpoint (weights and optimizer moments), so a rejected
candidate never becomes the base of the next one; what belongs to the data stream (EMA baseline,
dedupe window, positions, RNG) carries over from the trainer's newest checkpoint.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import torch

from schemas.checkpoints import (
    CheckpointEvent,
    Registry,
    enter_canary,
    promotion,
    rejection,
)
from schemas.dedupe import DedupeWindow
from schemas.errors import RegistryError
from schemas.evals import EvalSuite
from schemas.ids import uuid7
from trainer.actor import load_actor
from trainer.advantages import EmaBaseline
from trainer.checkpoint_io import (
    CheckpointMeta,
    TrainerState,
    latest_checkpoint,
    load_trainer_state,
    read_meta,
    write_checkpoint,
)
from trainer.config import TrainConfig
from trainer.consumer import Lineage
from trainer.distributed import DistContext
from trainer.evalsuite import build_suite
from trainer.gate import Gate
from trainer.prepare import prepare_batch
from trainer.registry_io import RegistryStore
from trainer.source import ConsumedRecord
from trainer.update import PolicyUpdater, UpdateStats, make_optimizer

__all__ = ["CycleResult", "TrainingCycle", "run_gate"]

Decision = Literal["promoted", "rejected", "canary"]


@dataclass(frozen=True)
class CycleResult:
    checkpoint_id: str
    decision: Decision
    path: Path
    evidence: dict[str, Any]
    stats: dict[str, Any]


@dataclass
class _CycleLog:
    """What one cycle consumed and did, for the checkpoint's metadata."""

    ranges: dict[str, list[int]] = field(default_factory=dict)
    counts: Counter[str] = field(default_factory=Counter)
    steps: list[dict[str, Any]] = field(default_factory=list)
    spec_versions: set[str] = field(default_factory=set)
    orgs: set[str] = field(default_factory=set)

    def consumed(self, record: ConsumedRecord) -> None:
        if record.offset is None:
            return
        name = f"{record.topic}:{record.partition}"
        first, _ = self.ranges.get(name, [record.offset, record.offset])
        self.ranges[name] = [first, record.offset]


def _now() -> datetime:
    return datetime.now(UTC)


def run_gate(store: RegistryStore, gate: Gate, checkpoint_id: str, directory: Path,
                    canary: bool, now: datetime) -> tuple[Decision, dict[str, Any]]:
    """Gate a registered candidate against its model's production and publish the decision:
    rejected, or (passed) promoted, or the canary arm when ``canary``."""
    registry = store.read()
    model = registry.get(checkpoint_id).model
    incumbent = registry.production(model)
    if incumbent is None:
        raise RegistryError(f"model {model!r} has no production checkpoint to gate "
                            f"{checkpoint_id!r} against; promote its base model first")
    with torch.random.fork_rng(devices=[]):
        outcome = gate.judge((checkpoint_id, directory),
                             (incumbent.checkpoint_id, Path(incumbent.path)))
    evidence = outcome.evidence(checkpoint_id, incumbent.checkpoint_id, gate.seed)
    decision: Decision = "rejected"
    if outcome.verdict.passed:
        decision = "canary" if canary else "promoted"
    decide = {"promoted": promotion, "rejected": rejection, "canary": enter_canary}[decision]
    store.publish([decide(registry, checkpoint_id, now, "gate", evidence)])
    return decision, evidence


class TrainingCycle:
    def __init__(self, config: TrainConfig, store: RegistryStore, suite: EvalSuite | None = None,
                 dist: DistContext | None = None, clock: Callable[[], datetime] = _now) -> None:
        self.config = config
        self.store = store
        self.dist = dist or DistContext()
        self.clock = clock
        self.gate = Gate(suite or build_suite(config.eval_suite, config.eval_demos),
                         config.gate_margin, config.gate_broken_call_tolerance,
                         config.gate_confidence, config.gate_resamples,
                         config.gate_seed)
        self.baseline = EmaBaseline(config.ema_decay)
        self.dedupe: DedupeWindow[str] = DedupeWindow(config.dedupe_window)
        self.positions: dict[str, int] = {}
        self.global_step = 0
        self.latest_id: str | None = None
        self._log = _CycleLog()
        self._updater: PolicyUpdater | None = None
        self._base: CheckpointEvent | None = None
        self._registry: Registry | None = None
        if config.deterministic:
            torch.use_deterministic_algorithms(True)
        torch.manual_seed(config.seed)
        self._restore()

    # -- start-up -----------------------------------------------------------------------------
    def _restore(self) -> None:
        latest = latest_checkpoint(self.config.out_dir)
        if latest is None:
            return
        meta = read_meta(latest)
        state = meta.trainer_state
        self.baseline = EmaBaseline.from_dict(state.ema)
        self.dedupe = DedupeWindow(self.config.dedupe_window, keys=state.dedupe_keys)
        self.positions = dict(meta.positions)
        self.global_step = state.global_step
        self.latest_id = meta.checkpoint_id
        load_trainer_state(latest, None, restore_rng=True)

    def start(self) -> list[CycleResult]:
        """Register the base model as production if nothing is; gate a durable, undecided
        checkpoint left by a crash. Returns the decisions it made."""
        if not self.dist.is_main:
            return []
        registry = self.store.read()
        if registry.production(self.config.model) is None:
            self.store.publish([self._base_event(registry)])
            registry = self.store.read()
        if self.latest_id is None:
            return []
        event = registry.latest.get(self.latest_id)
        if event is not None and event.status != "candidate":
            return []
        directory = self.config.out_dir / self.latest_id
        meta = read_meta(directory)
        if event is None:
            self.store.publish([self._created_event(registry, meta, directory)])
        return [self._decide(self.latest_id, directory, meta.stats)]

    def _base_event(self, registry: Registry) -> CheckpointEvent:
        return CheckpointEvent(
            event_id=str(uuid7()), sequence=registry.next_sequence, occurred_at=self.clock(),
            kind="promoted", status="production", checkpoint_id=self.config.base_checkpoint_id,
            model=self.config.model, path=str(self.config.model_dir.resolve()),
            evidence={"reason": "base model registered as the first production checkpoint"},
        )

    # -- a cycle --------------------------------------------------------------------------------
    def begin(self) -> None:
        """Load production (weights and optimizer moments) as this cycle's actor."""
        registry = self.dist.broadcast(self.store.read() if self.dist.is_main else None)
        assert registry is not None  # rank 0's, on every rank
        base = registry.production(self.config.model)
        if base is None:
            raise RuntimeError("no production checkpoint: call start() first")
        start_dir = Path(base.path)
        is_trainer_ckpt = (start_dir / "trainer_state.safetensors").exists()
        with torch.random.fork_rng(devices=[]):
            actor = load_actor(self.config, start_dir if is_trainer_ckpt else None,
                               self.dist.device)
        optimizer = make_optimizer(actor.trainable(), self.config)
        if is_trainer_ckpt:
            load_trainer_state(start_dir, optimizer, restore_rng=False)
            for group in optimizer.param_groups:  # today's settings, yesterday's moments
                group.update(lr=self.config.lr, weight_decay=self.config.weight_decay,
                             betas=self.config.adam_betas, eps=self.config.adam_eps)
        self._updater = PolicyUpdater(actor, optimizer, self.config, self.dist)
        self._base, self._registry, self._log = base, registry, _CycleLog()

    @property
    def steps_this_cycle(self) -> int:
        return len(self._log.steps)

    def update(self, records: Sequence[ConsumedRecord]) -> UpdateStats | None:
        """One optimizer step on the fresh, first-seen records of ``records`` (None if none)."""
        assert self._updater is not None and self._registry is not None and self._base is not None
        for record in records:
            self._log.consumed(record)
            if record.offset is not None:
                self.positions[f"{record.topic}:{record.partition}"] = record.offset + 1
        registry = self._registry
        prepared = prepare_batch(
            records, self.baseline, selection=self.config.selection(),
            lineage=Lineage(registry.generation(self._base.checkpoint_id) or 0,
                            registry.generation),
            max_seq_len=self.config.max_seq_len, vocab_size=self._updater.actor.vocab_size,
            whiten=self.config.whiten, dedupe=self.dedupe, now=self.clock())
        self._log.counts.update(prepared.counts)
        self._log.spec_versions |= prepared.spec_versions
        self._log.orgs |= prepared.orgs
        if not prepared.samples:
            return None
        stats = self._updater.step(prepared.samples)
        self.global_step += 1
        lags = prepared.lags
        self._log.steps.append({**asdict(stats), "step": self.global_step,
                                "mean_reward":
                                    prepared.reward_sum / prepared.counts["records_trained"],
                                "max_lag": max(lags), "mean_lag": sum(lags) / len(lags)})
        return stats

    def finish(self, on_durable: Callable[[dict[str, int]], None] = lambda _: None,
               ) -> CycleResult | None:
        """Checkpoint (durable, then commit offsets), register the candidate, gate it."""
        assert self._updater is not None and self._base is not None and self._registry is not None
        self.dist.barrier()
        if not self.dist.is_main:
            return None
        checkpoint_id = f"{self.config.model}-{uuid7()}"
        meta = self._meta(checkpoint_id)
        actor, optimizer = self._updater.actor, self._updater.optimizer
        directory = write_checkpoint(self.config.out_dir, checkpoint_id, actor.save, optimizer,
                                     meta)
        self.latest_id = checkpoint_id
        on_durable(dict(self.positions))
        registry = self.store.read()
        self.store.publish([self._created_event(registry, meta, directory)])
        return self._decide(checkpoint_id, directory, meta.stats)

    def run(self, records: Sequence[ConsumedRecord]) -> CycleResult | None:
        """A whole cycle in-process: updates of ``batch_records`` records each, then the gate."""
        self.start()
        self.begin()
        size = self.config.batch_records
        for start in range(0, len(records), size):
            self.update(records[start : start + size])
        return self.finish()

    # -- metadata and decisions -------------------------------------------------------------------
    def _meta(self, checkpoint_id: str) -> CheckpointMeta:
        assert self._base is not None
        log = self._log
        return CheckpointMeta(
            checkpoint_id=checkpoint_id, parent_id=self._base.checkpoint_id,
            model=self.config.model, adapter=self.config.lora,
            base_path=str(self.config.model_dir.resolve()) if self.config.lora else None,
            offsets=dict(log.ranges), positions=dict(self.positions),
            reward_spec_version=",".join(sorted(log.spec_versions)) or None,
            orgs=sorted(log.orgs),
            hyperparams=self.config.hyperparams(),
            stats={"counts": dict(log.counts), "steps": log.steps},
            trainer_state=TrainerState(global_step=self.global_step,
                                       ema=self.baseline.to_dict(),
                                       dedupe_keys=self.dedupe.keys()),
        )

    def _created_event(self, registry: Registry, meta: CheckpointMeta,
                       directory: Path) -> CheckpointEvent:
        return CheckpointEvent(
            event_id=str(uuid7()), sequence=registry.next_sequence, occurred_at=self.clock(),
            kind="created", status="candidate", checkpoint_id=meta.checkpoint_id,
            model=meta.model, parent_id=meta.parent_id, path=str(directory.resolve()),
            adapter=meta.adapter, base_path=meta.base_path,
            reward_spec_version=meta.reward_spec_version, offsets=meta.offsets, orgs=meta.orgs,
            hyperparams=meta.hyperparams, stats=meta.stats,
        )

    def gate_checkpoint(self, checkpoint_id: str) -> CycleResult:
        """Gate a registered candidate (one this trainer made, or one planted by hand)."""
        event = self.store.read().get(checkpoint_id)
        return self._decide(checkpoint_id, Path(event.path), event.stats)

    def _decide(self, checkpoint_id: str, directory: Path, stats: dict[str, Any]) -> CycleResult:
        decision, evidence = run_gate(self.store, self.gate, checkpoint_id, directory,
                                      self.config.canary, self.clock())
        return CycleResult(checkpoint_id, decision, directory, evidence, stats)
