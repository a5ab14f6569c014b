"""``rewardstream demo``: the closed loop on one machine, end to end.

Broker and topics (fresh prefix) → the warm-started policy (cached) → services → K cycles of
simulated users through gateway and ingest, rewards from the worker, an update + gate by the
trainer, promotion hot-loaded by the gateway → summary table and plot in the run directory.
Every service is stopped at the end, also on Ctrl-C or failure.
"""

from __future__ import annotations

import secrets
import signal
import sys
import time
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from harness.demo.config import DEMO_MONITOR_THRESHOLDS, DemoConfig
from harness.demo.cycles import CycleRunner, deploy_hack, train_config, wait_served
from harness.demo.report import CycleRow, alert_line, save_plot, save_rows, summary_table
from harness.demo.stack import Stack, service_env, start_stack
from harness.demo.topics_io import AlertFollower, RewardReader
from harness.demo.traffic import Traffic

__all__ = ["run_demo", "new_run_dir"]


def new_run_dir(root: Path) -> tuple[Path, str]:
    stamp = f"{datetime.now(timezone.utc):%Y%m%d-%H%M%S}-{secrets.token_hex(2)}"
    return root / f"demo-{stamp}", f"demo-{stamp}."


def _bar(console: Console, label: str, total: int) -> tuple[Progress, object]:
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


def _hack_adapter(console: Console, config: DemoConfig, trainer_config) -> Path:
    from harness.demo.policies import HACK_SFT_STEPS, build_hack_adapter

    progress, bar = _bar(console, f"--hack {config.hack} variant", HACK_SFT_STEPS)
    with progress:
        path = build_hack_adapter(config.hack, trainer_config, 5e-3, config.seed,
                                  lambda step, loss: progress.update(bar, completed=step + 1,
                                                                     loss=loss))
    console.print(f"[bold]--hack {config.hack}[/] variant (LoRA over the policy): {path}")
    return path


def _announce(console: Console, config: DemoConfig, stack: Stack, prefix: str) -> None:
    console.print(f"[bold]console[/] {stack.console_url}  staff key: [bold]{stack.staff_key}[/] "
                  "(paste it at the console's prompt)")
    console.print(f"[bold]topics[/] prefix {prefix!r}; service logs in {config.log_dir}/")
    thresholds = ", ".join(f"{k}={v}" for k, v in DEMO_MONITOR_THRESHOLDS.items())
    console.print(f"[bold]monitors[/] demo thresholds (sized for a demo's short, "
                  f"small checkpoints, not production's defaults): {thresholds}")


def run_demo(config: DemoConfig, prefix: str, console: Console | None = None) -> list[CycleRow]:
    """Run the demo; returns one row per cycle (also saved with the plot in ``run_dir``)."""
    import torch

    from infra import broker
    from infra.settings import load_settings
    from infra.topics import create_topics
    from trainer.cycle import TrainingCycle
    from trainer.registry_io import KafkaRegistryStore

    from harness.evals import HarnessEvalSuite
    from schemas.topics import topic_name

    console = console or Console(width=None if sys.stdout.isatty() else 150)
    config.run_dir.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(1)
    settings = replace(load_settings(), topic_prefix=prefix)
    state, started = broker.start(settings)
    console.print(f"[bold]broker[/] {'started' if started else 'running'}: {state.describe()}")
    create_topics(settings)
    policy_dir = _policy(console, config)
    trainer_config = train_config(config, policy_dir)
    hack_dir = _hack_adapter(console, config, trainer_config) if config.hack else None

    env = service_env(prefix, config.run_dir)
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    stack: Stack | None = None
    alerts: AlertFollower | None = None
    traffic: Traffic | None = None
    reader: RewardReader | None = None
    rows: list[CycleRow] = []
    interrupted = False
    try:
        stack = start_stack(config, env, policy_dir)
        _announce(console, config, stack, prefix)
        store = KafkaRegistryStore(settings.bootstrap_servers,
                                   topic_name(prefix, "checkpoints"))
        suite = HarnessEvalSuite(per_family=config.eval_per_family,
                                 temperature=config.temperature)
        training = TrainingCycle(trainer_config, store, suite=suite)
        training.start()
        wait_served(stack.gateway_url, trainer_config.base_checkpoint_id, stack.services)
        alerts = AlertFollower(settings.bootstrap_servers, prefix,
                               lambda event: _print_alert(console, event))
        traffic = Traffic(stack.gateway_url, stack.ingest_url, stack.api_key,
                          config.run_dir / "sdk-queue", config.temperature, config.concurrency)
        reader = RewardReader(settings.bootstrap_servers, prefix)
        runner = CycleRunner(config, console, traffic, reader, training, stack.services,
                             stack.gateway_url)
        for cycle in range(1, config.cycles + 1):
            if hack_dir is not None and cycle == 2:
                served = rows[-1].served_by  # its traffic is the monitors' baseline
                hack_id = deploy_hack(store, trainer_config.model, hack_dir, policy_dir, served,
                                      config.hack or "")
                wait_served(stack.gateway_url, hack_id, stack.services)
                console.print(f"[red bold]--hack {config.hack}[/]: deployed {hack_id} "
                              f"around the gate (parent {served}); watch the monitors")
            rows.append(runner.run(cycle))
        time.sleep(2 * DEMO_MONITOR_THRESHOLDS["window_s"])  # let the last windows close
    except KeyboardInterrupt:
        console.print(f"[yellow]interrupted after {len(rows)} cycle(s); stopping services[/]")
        interrupted = True
    finally:
        signal.signal(signal.SIGTERM, previous)
        for closer in (alerts and alerts.stop, traffic and traffic.close,
                       reader and reader.close, stack and stack.services.stop_all):
            if closer:
                closer()
    if rows:
        _finish(console, config, rows, alerts)
    if interrupted:
        raise SystemExit(130)
    return rows


def _raise_interrupt(_signum: int, _frame: object) -> None:
    raise KeyboardInterrupt


def _print_alert(console: Console, event) -> None:
    line = alert_line(event)
    if line:
        console.print(line)


def _finish(console: Console, config: DemoConfig, rows: list[CycleRow],
            alerts: AlertFollower | None) -> None:
    console.print(summary_table(rows))
    title = "rewardstream demo" + (f" --hack {config.hack}" if config.hack else "")
    plot = save_plot(rows, config.run_dir / "metrics.png", title)
    save_rows(rows, config.run_dir / "cycles.json")
    fired = sorted({e.alert.detector for e in (alerts.events if alerts else [])
                    if e.kind == "fired" and e.alert})
    console.print(f"alerts fired: {', '.join(fired) or 'none'}")
    console.print(f"[bold]plot[/] {plot}  [bold]per-cycle data[/] {config.run_dir / 'cycles.json'}"
                  f"  [bold]logs[/] {config.log_dir}/")
