"""One demo cycle: traffic on production (and on the canary arm, when a candidate waits for its
A/B) → reward records → the canary's A/B decides its promotion → the trainer's cycle API
(update, candidate, gate) → a passing candidate serves the canary arm of the next cycle."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from harness.demo.canary import judge_canary
from harness.demo.config import DemoConfig
from harness.demo.deploy import wait_served
from harness.demo.metrics import cycle_figures
from harness.demo.report import (
    CanaryRow,
    CycleRow,
    canary_line,
    components_line,
    cycle_line,
    short,
)
from harness.demo.topics_io import RewardReader
from harness.demo.traffic import Traffic
from infra.supervisor import Supervisor
from schemas.rewards import RewardRecord
from streams.monitors.abreport import format_report
from trainer.gate import describe_gate, failed_checks

if TYPE_CHECKING:
    from trainer.config import TrainConfig
    from trainer.cycle import TrainingCycle

__all__ = ["CycleRunner", "train_config"]


def train_config(config: DemoConfig, policy_dir: Path) -> TrainConfig:
    from trainer.config import TrainConfig

    return TrainConfig(
        model_dir=policy_dir.resolve(), out_dir=config.run_dir / "checkpoints",
        model_name="demo-policy", lora=True, lora_rank=config.lora_rank,
        lora_alpha=2.0 * config.lora_rank, lora_targets=config.lora_targets, lr=config.lr,
        batch_records=config.batch_records,
        micro_batch_size=config.batch_records, max_staleness=1, gate_margin=config.gate_margin,
        gate_broken_call_tolerance=config.gate_broken_call_tolerance,
        gate_resamples=1000, seed=config.seed, canary=True,
    ).validate()


class CycleRunner:
    def __init__(self, config: DemoConfig, console: Console, traffic: Traffic,
                 reader: RewardReader, training: TrainingCycle, services: Supervisor,
                 gateway_url: str,
                 gateway_key: str) -> None:
        self.config = config
        self.console = console
        self.traffic = traffic
        self.reader = reader
        self.training = training  # with canary=True
        self.services = services
        self.gateway_url = gateway_url
        self.gateway_key = gateway_key
        self.cycle = 0  # the cycle in progress
        self.records: dict[str, list[RewardRecord]] = {}  # every cycle's, per checkpoint
        # The cohort's place (task and sampling seed) of this cycle's trajectories, and each
        # place's reward in the previous cycle: the canary A/B's covariate (the same cohort every
        # cycle; the arms are drawn anew, so the previous reward is measured before the split).
        self._places: dict[str, int] = {}
        self._previous: dict[int, float] = {}

    def _progress(self) -> Progress:
        return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                        TimeElapsedColumn(), console=self.console, transient=True)

    def _wait(self, wanted: dict[str, str]) -> None:
        wait_served(self.gateway_url, self.gateway_key, wanted, self.services)

    def _traffic(self, cycle: int) -> list:  # -> list[ConsumedRecord]
        config = self.config
        with self._progress() as progress:
            bar = progress.add_task(f"cycle {cycle}: trajectories", total=config.trajectories)
            cohort = config.seed * 1000 + cycle if config.fresh_cohorts else config.seed
            ordered = self.traffic.run(config.trajectories, cohort, f"c{cycle}",
                                       lambda _id: progress.advance(bar))
            self._places = {trajectory: place for place, trajectory in enumerate(ordered)}
            wanted = set(ordered)
            self.traffic.flush()
            rewards = progress.add_task(f"cycle {cycle}: reward records", total=len(wanted))
            consumed = self.reader.collect(wanted, config.rewards_timeout_s,
                                           lambda n: progress.update(rewards, completed=n))
        if len(consumed) < len(wanted):
            self.console.print(f"[yellow]{len(wanted) - len(consumed)} of {len(wanted)} reward "
                               f"records did not arrive within {config.rewards_timeout_s:.0f} s[/]")
        return consumed

    def _covariates(self) -> dict[str, float]:
        if self.config.fresh_cohorts:  # another cohort's rewards say nothing of this one's
            return {}
        return {trajectory: self._previous[place] for trajectory, place in self._places.items()
                if place in self._previous}

    def _conclude(self, production: str, canary: str, records: list[RewardRecord]) -> CanaryRow:
        """The canary's A/B on this cycle's records decides it; a promotion is waited for."""
        report, verdict, evidence = judge_canary(records, production, canary, self.config,
                                                 self._covariates())
        decision = self.training.conclude_canary(canary, evidence).decision
        if decision == "promoted":
            self._wait({"production": canary})
        row = CanaryRow(canary, decision, verdict.reason, report)
        if report is not None:
            self.console.print(format_report(report, ("production", "canary")), markup=False,
                               highlight=False)
        self.console.print(canary_line(row))
        return row

    def run(self, cycle: int) -> CycleRow:
        """Cycle ``cycle``; the last one trains nothing (no traffic would be left to test its
        candidate), it only concludes the canary its traffic served."""
        self.cycle = cycle
        registry = self.training.store.read()
        model = self.training.config.model
        serving = registry.production(model)
        assert serving is not None  # TrainingCycle.start registered the base as production
        production = serving.checkpoint_id
        waiting = registry.canary(model)
        canary = waiting.checkpoint_id if waiting is not None else None
        self._wait({"production": production, "canary": canary or production})
        started = time.monotonic()
        consumed = self._traffic(cycle)
        collected = time.monotonic()
        records = [c.record for c in consumed if c.record is not None]
        for record in records:
            self.records.setdefault(record.checkpoint_id, []).append(record)
        figures = cycle_figures(records)
        self.services.check_alive()
        self.console.print(cycle_line(cycle, production, canary, figures, collected - started))
        self.console.print(components_line(figures))
        canary_row = self._conclude(production, canary, records) if canary else None
        self._previous = {self._places[r.trajectory_id]: r.total for r in records
                          if r.trajectory_id in self._places}
        result = None
        if cycle < self.config.cycles:
            with self._progress() as progress:
                progress.add_task(f"cycle {cycle}: update + gate ({len(consumed)} records)",
                                  total=None)
                result = self.training.run(consumed)
        if result is not None and result.decision in ("canary", "promoted"):
            arm = "canary" if result.decision == "canary" else "production"
            self._wait({arm: result.checkpoint_id})
        evidence = result.evidence if result else {}
        row = CycleRow(cycle, production, canary_row, figures,
                       result.decision if result else "none",
                       result.checkpoint_id if result else "",
                       float(evidence.get("candidate_mean", float("nan"))),
                       float(evidence.get("incumbent_mean", float("nan"))),
                       describe_gate(evidence) if evidence else "",
                       tuple(failed_checks(evidence)),
                       collected - started, time.monotonic() - collected)
        if result is not None:
            colour = "red" if result.decision == "rejected" else "green"
            then = "; it serves the canary arm next cycle" if result.decision == "canary" else ""
            self.console.print(
                f"  [{colour} bold]gate: {result.decision}[/] {short(result.checkpoint_id)} "
                f"(held-out solve rate {row.eval_candidate:.2f} vs production "
                f"{row.eval_incumbent:.2f}; update + gate {row.update_gate_s:.0f} s): "
                f"{escape(row.gate_reason)}{then}")
        return row
