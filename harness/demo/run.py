"""``rewardstream demo``: the closed loop on one machine, end to end.

Broker and topics (fresh prefix) → the warm-started policy (cached) → services → K cycles of
simulated users through gateway and ingest, rewards from the worker, the canary's A/B, an
update + gate by the trainer, promotions hot-loaded by the gateway → summary table and plot in
the run directory. Whatever it started — services, and the broker when none was running — it
stops at the end, also on Ctrl-C (SIGINT), SIGTERM or a failure, and says so.
"""

from __future__ import annotations

import secrets
import signal
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

from harness.demo.config import DEMO_MONITOR_THRESHOLDS, DEMO_WINDOW_S, DemoConfig
from harness.demo.cycles import CycleRunner, train_config
from harness.demo.deploy import deploy_hack, wait_served
from harness.demo.report import CycleRow, alert_line
from harness.demo.stack import Stack, service_env, start_stack
from harness.demo.summary import finish
from harness.demo.topics_io import AlertFollower, RewardReader
from harness.demo.traffic import Traffic
from schemas.alerts import AlertEvent
from schemas.rewards import RewardRecord

if TYPE_CHECKING:
    from infra.settings import Settings
    from trainer.config import TrainConfig

__all__ = ["run_demo", "new_run_dir"]


@dataclass
class _Run:
    """What a run started (to stop, newest first) and what it saw."""

    closers: list[Callable[[], object]] = field(default_factory=list)
    services: list[str] = field(default_factory=list)
    rows: list[CycleRow] = field(default_factory=list)
    fired: list[tuple[int, AlertEvent]] = field(default_factory=list)  # (cycle, event)
    records: dict[str, list[RewardRecord]] = field(default_factory=dict)  # per checkpoint


def new_run_dir(root: Path) -> tuple[Path, str]:
    stamp = f"{datetime.now(UTC):%Y%m%d-%H%M%S}-{secrets.token_hex(2)}"
    return root / f"demo-{stamp}", f"demo-{stamp}."


def _bar(console: Console, label: str, total: int) -> tuple[Progress, TaskID]:
    progress = Progress(TextColumn(label), BarColumn(), MofNCompleteColumn(),
                        TextColumn("loss {task.fields[loss]:.3f}"), TimeElapsedColumn(),
                        console=console, transient=True)
    return progress, progress.add_task(label, total=total, loss=float("nan"))


def _policy(console: Console, config: DemoConfig) -> Path:
    from harness.demo.policies import cached_policy

    sft = config.sft
    progress, bar = _bar(console, "SFT warm start", sft.steps)
    with progress:
        started = time.monotonic()
        path, built = cached_policy(sft, lambda step, loss: progress.update(
            bar, completed=step + 1, loss=loss))
    verb = f"built in {time.monotonic() - started:.0f} s" if built else "cached"
    console.print(f"[bold]policy[/] {verb}: {path}")
    return path


def _hack_adapter(console: Console, config: DemoConfig, hack: str,
                  trainer_config: TrainConfig) -> Path:
    """The --hack variant's adapter; ``hack`` is ``config.hack``, known to be set."""
    from harness.demo.policies import HACK_SFT_STEPS, build_hack_adapter

    progress, bar = _bar(console, f"--hack {config.hack_label} variant", HACK_SFT_STEPS)
    with progress:
        path = build_hack_adapter(hack, config.hack_strength, trainer_config, 5e-3, config.seed,
                                  lambda step, loss: progress.update(bar, completed=step + 1,
                                                                     loss=loss))
    console.print(f"[bold]--hack {config.hack_label}[/] variant (LoRA over the policy, the hack "
                  f"on {config.hack_strength:.0%} of its demonstrations): {path}")
    return path


def _announce(console: Console, config: DemoConfig, stack: Stack, prefix: str) -> None:
    console.print(f"[bold]console[/] {stack.console_url}  staff key: [bold]{stack.staff_key}[/] "
                  "(paste it at the console's sign-in)")
    console.print(f"[bold]topics[/] prefix {prefix!r}; service logs in {config.log_dir}/")
    thresholds = ", ".join(f"{k}={v}" for k, v in DEMO_MONITOR_THRESHOLDS.items())
    console.print(f"[bold]monitors[/] demo thresholds (sized for a demo's short, "
                  f"small checkpoints, not production's defaults): {thresholds}")
    console.print(f"[bold]promotion[/] needs the offline gate (held-out tasks, every family's "
                  f"95% lower bound above -{config.gate_margin:g}; share of tasks with a "
                  f"broken tool call not surely up by more than "
                  f"{config.gate_broken_call_tolerance:g}) AND the release controller's "
                  f"A/B on the canary arm ({config.canary_share:.0%} of the users, sticky by "
                  f"user; a cycle's traffic goes on until it decides, at most "
                  f"{config.canary_max_trajectories} trajectories): {config.rule().describe()}")


def _raise_interrupt(_signum: int, _frame: object) -> None:
    raise KeyboardInterrupt


@contextmanager
def _signals_ignored() -> Iterator[None]:
    """Cleanup runs to its end: a second Ctrl-C must not leave a service or the broker behind."""
    previous = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def run_demo(config: DemoConfig, prefix: str, console: Console | None = None) -> list[CycleRow]:
    """Run the demo; returns one row per cycle (also saved with the plot in ``run_dir``)."""
    import torch

    from infra import broker
    from infra.settings import load_settings

    console = console or Console(width=None if sys.stdout.isatty() else 150)
    config.run_dir.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(1)
    started_at = time.monotonic()
    settings = replace(load_settings(), topic_prefix=prefix)
    owns_broker = not broker.status(settings).running  # a Ctrl-C may come before start returns
    _check_ports(config, settings, owns_broker)  # before the minutes of a policy build
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    run = _Run()
    interrupted = False
    try:
        state, owns_broker = broker.start(settings)
        console.print(f"[bold]broker[/] {'started' if owns_broker else 'running'}: "
                      f"{state.describe()}")
        _loop(console, config, settings, prefix, run)
        time.sleep(2 * DEMO_WINDOW_S)  # let the last windows close
    except KeyboardInterrupt:
        console.print(f"[yellow]interrupted after {len(run.rows)} cycle(s); stopping what the "
                      "demo started[/]")
        interrupted = True
    finally:
        signal.signal(signal.SIGTERM, previous)
        with _signals_ignored():
            _stop(console, settings, run, owns_broker)
    if run.rows:
        finish(console, config, run.rows, run.fired, run.records,
               time.monotonic() - started_at)
    if interrupted:
        raise SystemExit(130)
    return run.rows


def _check_ports(config: DemoConfig, settings: Settings, starts_broker: bool) -> None:
    from infra.ports import PortUse, check_ports

    uses = [PortUse(port, f"the demo's {name}", "--port-offset") for name, port in (
        ("ingest", config.ingest_port), ("gateway", config.gateway_port),
        ("console", config.console_port))]
    if starts_broker and settings.external_bootstrap is None:
        uses += [PortUse(settings.kafka_port, "the Kafka broker", "REWARDSTREAM_KAFKA_PORT"),
                 PortUse(settings.kafka_controller_port, "the Kafka controller",
                         "REWARDSTREAM_KAFKA_CONTROLLER_PORT")]
    check_ports(uses)


def _stop(console: Console, settings: Settings, run: _Run, owns_broker: bool) -> None:
    from infra import broker

    for close in reversed(run.closers):
        close()
    if run.services:
        console.print(f"[bold]stopped[/] the services: {', '.join(run.services)}")
    if owns_broker:
        if broker.stop(settings):  # False when it never came up
            console.print(f"[bold]broker[/] stopped: the demo had started it on "
                          f"{settings.bootstrap_servers}")
    else:
        console.print(f"[bold]broker[/] left running on {settings.bootstrap_servers}: it was "
                      "running before the demo")


def _loop(console: Console, config: DemoConfig, settings: Settings, prefix: str,
          run: _Run) -> None:
    """Everything between the broker and the summary; what it starts, it adds to ``run``."""
    from harness.evals import HarnessEvalSuite
    from infra.topics import create_topics
    from trainer.cycle import TrainingCycle
    from trainer.registry_io import KafkaRegistryStore

    create_topics(settings)
    policy_dir = _policy(console, config)
    trainer_config = train_config(config, policy_dir)
    hack_dir = (_hack_adapter(console, config, config.hack, trainer_config)
                if config.hack else None)
    def on_restart(name: str, code: int, restarts: int) -> None:
        console.print(f"[yellow]{name} exited with {code}; restarted (restart {restarts}), "
                      f"see {config.log_dir / name}.log[/]")

    stack = start_stack(config, service_env(prefix, config.run_dir), policy_dir, on_restart)
    run.closers.append(stack.services.stop_all)
    run.services = [service.name for service in stack.services.running]
    _announce(console, config, stack, prefix)
    store = KafkaRegistryStore(settings)
    suite = HarnessEvalSuite(per_family=config.eval_per_family, temperature=config.temperature)
    training = TrainingCycle(trainer_config, store, suite=suite)
    training.start()
    wait_served(stack.gateway_url, stack.gateway_key,
                {"production": trainer_config.base_checkpoint_id}, stack.services)
    runner: CycleRunner | None = None

    def on_alert(event: AlertEvent) -> None:
        run.fired.append((runner.cycle if runner else 0, event))
        line = alert_line(event)
        if line:
            console.print(line)

    alerts = AlertFollower(settings, on_alert)
    run.closers.append(alerts.stop)
    traffic = Traffic(stack.gateway_url, stack.gateway_key, stack.ingest_url, stack.api_key,
                      config.run_dir / "sdk-queue", config.temperature, config.concurrency)
    run.closers.append(traffic.close)
    reader = RewardReader(settings)
    run.closers.append(reader.close)
    runner = CycleRunner(config, console, traffic, reader, training, stack.services,
                         stack.gateway_url, stack.gateway_key)
    run.records = runner.records
    for cycle in range(1, config.cycles + 1):
        if hack_dir is not None and cycle == 2:
            served = run.rows[-1].served_by  # its traffic is the monitors' baseline
            hack_id = deploy_hack(store, trainer_config.model, hack_dir, policy_dir, served,
                                  config.hack_label)
            wait_served(stack.gateway_url, stack.gateway_key, {"production": hack_id},
                        stack.services)
            console.print(f"[red bold]--hack {config.hack_label}[/]: deployed {hack_id} around the "
                          f"gate and the canary (parent {served}); watch the monitors")
        run.rows.append(runner.run(cycle))
