"""One demo cycle: traffic on the production checkpoint → reward records → the trainer's cycle
API (update, candidate, gate) → on promotion, wait until the gateway serves the new adapter."""

from __future__ import annotations

import time
from datetime import datetime, timezone
from pathlib import Path

import httpx
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from harness.demo.config import DemoConfig
from harness.demo.metrics import cycle_figures
from harness.demo.report import CycleRow, components_line, cycle_line
from harness.demo.services import ServiceError, Services
from harness.demo.topics_io import RewardReader
from harness.demo.traffic import Traffic
from schemas.checkpoints import CheckpointEvent
from schemas.ids import uuid7

__all__ = ["CycleRunner", "deploy_hack", "production_served", "train_config"]


def train_config(config: DemoConfig, policy_dir: Path):  # -> TrainConfig
    from trainer.config import TrainConfig

    return TrainConfig(
        model_dir=policy_dir.resolve(), out_dir=config.run_dir / "checkpoints",
        model_name="demo-policy", lora=True, lora_rank=config.lora_rank,
        lora_alpha=2.0 * config.lora_rank, lora_targets=config.lora_targets, lr=config.lr,
        batch_records=config.batch_records,
        micro_batch_size=config.batch_records, max_staleness=1, gate_margin=config.gate_margin,
        gate_resamples=1000, seed=config.seed,
    ).validate()


def production_served(gateway_url: str) -> str | None:
    """The checkpoint the gateway's production arm serves now."""
    try:
        models = httpx.get(gateway_url + "/v1/models", timeout=5.0).json()["data"]
        arms = models[0]["arms"]
    except (httpx.HTTPError, ValueError, KeyError, IndexError):
        return None
    return next((a["checkpoint_id"] for a in arms.values()), None)


def wait_served(gateway_url: str, checkpoint_id: str, services: Services,
                timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while production_served(gateway_url) != checkpoint_id:
        services.check_alive()
        if time.monotonic() > deadline:
            raise ServiceError(f"the gateway did not switch to {checkpoint_id} within "
                               f"{timeout_s:.0f} s; see {services.log_dir / 'gateway.log'}")
        time.sleep(0.3)


def deploy_hack(store, model: str, adapter_dir: Path, base_path: Path, parent_id: str,
                hack: str) -> str:
    """Register the variant as a checkpoint of ``parent_id`` and make it production by hand
    (around the gate, as an operator could), so its traffic is compared against the parent's."""
    from trainer.registry import promotion

    checkpoint_id = adapter_dir.name
    now = datetime.now(timezone.utc)
    registry = store.read()
    created = CheckpointEvent(
        event_id=str(uuid7()), sequence=registry.next_sequence, occurred_at=now, kind="created",
        status="candidate", checkpoint_id=checkpoint_id, model=model, parent_id=parent_id,
        path=str(adapter_dir.resolve()), adapter=True,
        base_path=str(base_path.resolve()),
        actor="demo", evidence={"reason": f"--hack {hack}: a policy that games the reward"})
    store.publish([created])
    store.publish([promotion(store.read(), checkpoint_id, now, "demo",
                             {"reason": f"--hack {hack}: deployed around the gate"})])
    return checkpoint_id


class CycleRunner:
    def __init__(self, config: DemoConfig, console: Console, traffic: Traffic,
                 reader: RewardReader, training, services: Services, gateway_url: str) -> None:
        self.config = config
        self.console = console
        self.traffic = traffic
        self.reader = reader
        self.training = training  # trainer.cycle.TrainingCycle
        self.services = services
        self.gateway_url = gateway_url

    def _progress(self) -> Progress:
        return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                        TimeElapsedColumn(), console=self.console, transient=True)

    def run(self, cycle: int) -> CycleRow:
        config = self.config
        served_by = production_served(self.gateway_url) or "?"
        started = time.monotonic()
        with self._progress() as progress:
            bar = progress.add_task(f"cycle {cycle}: trajectories", total=config.trajectories)
            cohort = config.seed * 1000 + cycle if config.fresh_cohorts else config.seed
            wanted = set(self.traffic.run(config.trajectories, cohort,
                                          lambda _id: progress.advance(bar)))
            self.traffic.flush()
            rewards = progress.add_task(f"cycle {cycle}: reward records", total=len(wanted))
            consumed = self.reader.collect(wanted, config.rewards_timeout_s,
                                           lambda n: progress.update(rewards, completed=n))
            progress.add_task(f"cycle {cycle}: update + gate ({len(consumed)} records)",
                              total=None)
            collected = time.monotonic()
            result = self.training.run(consumed)
        self.services.check_alive()
        figures = cycle_figures([c.record for c in consumed if c.record is not None])
        if len(consumed) < len(wanted):
            self.console.print(f"[yellow]{len(wanted) - len(consumed)} of {len(wanted)} reward "
                               f"records did not arrive within {config.rewards_timeout_s:.0f} s[/]")
        decision = result.decision if result else "none"
        if result is not None and result.decision == "promoted":
            wait_served(self.gateway_url, result.checkpoint_id, self.services)
        evidence = result.evidence if result else {}
        row = CycleRow(cycle, served_by, figures, decision,
                       result.checkpoint_id if result else "",
                       float(evidence.get("candidate_mean", float("nan"))),
                       float(evidence.get("incumbent_mean", float("nan"))),
                       collected - started, time.monotonic() - collected)
        self.console.print(cycle_line(row))
        self.console.print(components_line(figures))
        return row
