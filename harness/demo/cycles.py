"""One demo cycle: traffic on production (and on a running canary's share of the users) →
reward records → the trainer's cycle API (update, candidate, gate) → a passing candidate
becomes a canary, which the release controller (a service of the stack) starts and decides.

The demo owns no A/B: while a canary runs, the cycle drives more rounds of its cohort (the same
tasks, new users and sampling seeds) until the controller decides, or the canary's budget
(``canary_max_trajectories``) is spent, where the rule rejects; it prints what was decided."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from harness.demo.canary import canary_row, decision_of
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
from infra.errors import ServiceError
from infra.supervisor import Supervisor
from schemas.checkpoints import CheckpointEvent
from schemas.rewards import RewardRecord
from streams.monitors.abreport import format_report
from streams.release.view import describe_look
from trainer.gate import describe_gate, failed_checks

if TYPE_CHECKING:
    from trainer.config import TrainConfig
    from trainer.cycle import TrainingCycle

__all__ = ["CycleRunner", "train_config"]

T = TypeVar("T")
_CHECK_EVERY = 16  # trajectories between two looks at the registry while a canary runs


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

    def _progress(self) -> Progress:
        return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                        TimeElapsedColumn(), console=self.console, transient=True)

    def _wait(self, wanted: dict[str, str]) -> None:
        wait_served(self.gateway_url, self.gateway_key, wanted, self.services)

    def _round(self, cycle: int, draw: int, stop: Callable[[], bool]) -> list:
        """One round of the cohort (draw 0: the cycle's own; later: a canary's extra traffic);
        -> list[ConsumedRecord]."""
        config = self.config
        label = f"cycle {cycle}" + (f", canary round {draw + 1}" if draw else "")
        with self._progress() as progress:
            bar = progress.add_task(f"{label}: trajectories", total=config.trajectories)
            cohort = config.seed * 1000 + cycle if config.fresh_cohorts else config.seed
            ordered = self.traffic.run(config.trajectories, cohort, f"c{cycle}d{draw}",
                                       lambda _id: progress.advance(bar), draw=draw, stop=stop)
            wanted = set(ordered)
            self.traffic.flush()
            rewards = progress.add_task(f"{label}: reward records", total=len(wanted))
            consumed = self.reader.collect(wanted, config.rewards_timeout_s,
                                           lambda n: progress.update(rewards, completed=n))
        if len(consumed) < len(wanted):
            self.console.print(f"[yellow]{len(wanted) - len(consumed)} of {len(wanted)} reward "
                               f"records did not arrive within {config.rewards_timeout_s:.0f} s[/]")
        return consumed

    def _decision(self, canary: str) -> CheckpointEvent | None:
        return decision_of(self.training.store.read(), canary)

    def _started(self, canary: CheckpointEvent) -> None:
        """Wait until the release controller started the gated checkpoint's canary."""
        self._await_controller(
            lambda: self.training.store.read().get(canary.checkpoint_id).canary, 60.0,
            f"did not start the canary of {canary.checkpoint_id} within 60 s")

    def _await_controller(self, outcome: Callable[[], T | None], timeout_s: float,
                          failure: str) -> T:
        """``outcome()`` once it is not None, the services checked alive while it is awaited;
        ServiceError naming the controller's log past ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while (value := outcome()) is None:
            self.services.check_alive()
            if time.monotonic() > deadline:
                raise ServiceError(f"the release controller {failure}; see "
                                   f"{self.services.log_dir / 'release.log'}")
            time.sleep(0.5)
        return value

    def _until_decided(self, cycle: int, canary: str, sent: int) -> tuple[list, CheckpointEvent]:
        """More rounds while the canary runs and its budget lasts, then its decision."""
        checks = itertools.count(1)

        def decided() -> bool:  # every _CHECK_EVERY trajectories: reading the registry costs
            return next(checks) % _CHECK_EVERY == 0 and self._decision(canary) is not None

        more, draw = [], 1
        while self._decision(canary) is None and sent < self.config.canary_max_trajectories:
            round_records = self._round(cycle, draw, decided)
            more += round_records
            sent += len(round_records)
            draw += 1
        decision = self._await_controller(
            lambda: self._decision(canary), self.config.decision_timeout_s,
            f"has not decided {canary} after {sent} trajectories")
        return more, decision

    def _show(self, row: CanaryRow) -> None:
        if row.report is not None:
            self.console.print(format_report(row.report, ("production", "canary")),
                               markup=False, highlight=False)
        if row.look:
            self.console.print(describe_look(row.look), markup=False, highlight=False)
        self.console.print(canary_line(row))

    def run(self, cycle: int) -> CycleRow:
        """Cycle ``cycle``; the last one trains nothing (no traffic would be left to test its
        candidate), it only drives the canary its traffic serves to a decision."""
        self.cycle = cycle
        registry = self.training.store.read()
        model = self.training.config.model
        serving = registry.production(model)
        assert serving is not None  # TrainingCycle.start registered the base as production
        production = serving.checkpoint_id
        waiting = registry.canary(model)
        if waiting is not None:
            self._started(waiting)
        canary = waiting.checkpoint_id if waiting is not None else None
        self._wait({"production": production, **({"canary": canary} if canary else {})})
        started = time.monotonic()
        cohort = self._round(cycle, 0, lambda: False)
        consumed, decided = list(cohort), None
        if canary is not None:
            more, decision = self._until_decided(cycle, canary, len(cohort))
            consumed += more
            decided = canary_row(decision)
            if decided.decision == "promoted":
                self._wait({"production": canary})
        collected = time.monotonic()
        records = [c.record for c in consumed if c.record is not None]
        for record in records:
            self.records.setdefault(record.checkpoint_id, []).append(record)
        figures = cycle_figures(records)
        self.services.check_alive()
        self.console.print(cycle_line(cycle, production, canary, figures, collected - started))
        self.console.print(components_line(figures))
        if decided is not None:
            self._show(decided)
        result = None
        if cycle < self.config.cycles:
            with self._progress() as progress:
                progress.add_task(f"cycle {cycle}: update + gate ({len(cohort)} records)",
                                  total=None)
                result = self.training.run(cohort)
        evidence = result.evidence if result else {}
        row = CycleRow(cycle, production, decided, figures,
                       result.decision if result else "none",
                       result.checkpoint_id if result else "",
                       float(evidence.get("candidate_mean", float("nan"))),
                       float(evidence.get("incumbent_mean", float("nan"))),
                       describe_gate(evidence) if evidence else "",
                       tuple(failed_checks(evidence)),
                       collected - started, time.monotonic() - collected)
        if result is not None:
            colour = "red" if result.decision == "rejected" else "green"
            then = ("; the release controller starts its canary" if result.decision == "canary"
                    else "")
            self.console.print(
                f"  [{colour} bold]gate: {result.decision}[/] {short(result.checkpoint_id)} "
                f"(held-out solve rate {row.eval_candidate:.2f} vs production "
                f"{row.eval_incumbent:.2f}; update + gate {row.update_gate_s:.0f} s): "
                f"{escape(row.gate_reason)}{then}")
        return row
