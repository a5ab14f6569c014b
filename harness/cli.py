"""``rewardstream demo``: the main command of ``bash infra/bootstrap.sh demo`` (docs/demo.md)."""

from __future__ import annotations

from pathlib import Path

import typer

from harness.demo.config import DemoConfig
from harness.policy.expert import HACKS, parse_mix
from harness.tasks import held_out_per_family

__all__ = ["register"]


def demo(
    cycles: int = typer.Option(DemoConfig.cycles, min=1, help="Training cycles to run."),
    trajectories: int = typer.Option(DemoConfig.trajectories, min=1,
                                     help="Simulated users' trajectories per cycle."),
    fresh_cohorts: bool = typer.Option(
        DemoConfig.fresh_cohorts, help="Draw new users and tasks every cycle instead of meeting "
        "the same cohort each time (then a cycle's figures also move with the draw)."),
    hack: str | None = typer.Option(
        None, metavar="NAME[:STRENGTH]", help="Deploy a reward-gaming variant after the first "
        "cycle: clarify (asks, then stops instead of editing) or broken-calls (sends its edit "
        "calls malformed), on STRENGTH of the trajectories (a share in (0, 1]; 1 when "
        "omitted), e.g. broken-calls:0.3."),
    runs: Path = typer.Option(Path("runs"), help="Where the run directory is made."),
    lr: float = typer.Option(DemoConfig.lr,
                             help="Learning rate of the LoRA policy-gradient updates."),
    lora_rank: int = typer.Option(DemoConfig.lora_rank, min=1, help="LoRA rank."),
    batch_records: int = typer.Option(DemoConfig.batch_records, min=1,
                                      help="Reward records per update."),
    temperature: float = typer.Option(DemoConfig.temperature, min=0.05,
                                      help="Sampling temperature (serving and the gate's evals)."),
    concurrency: int = typer.Option(DemoConfig.concurrency, min=1,
                                    help="Trajectories in flight at once."),
    eval_per_family: int = typer.Option(DemoConfig.eval_per_family, min=1,
                                        max=held_out_per_family(),
                                        help="Held-out gate tasks per family."),
    gate_margin: float = typer.Option(
        DemoConfig.gate_margin, min=0.0, help="Non-inferiority margin of the gate (solve-rate "
        "change a family may lose, 95% lower bound)."),
    gate_broken_call_tolerance: float = typer.Option(
        DemoConfig.gate_broken_call_tolerance, min=0.0, max=1.0, help="The gate also fails a "
        "candidate whose share of held-out tasks with a broken tool call is up by more than "
        "this (95% lower bound)."),
    canary_share: float = typer.Option(
        DemoConfig.canary_share, min=0.05, max=0.95, help="Share of the users (sticky by "
        "user) the canary arm gets while the release controller runs its A/B."),
    ab_margin: float = typer.Option(
        DemoConfig.ab_margin, min=0.0, help="Non-inferiority margin of the canary's sequential "
        "A/B: the reward loss (canary − production) its always-valid lower bound must rule "
        "out."),
    ab_alpha: float = typer.Option(
        DemoConfig.ab_alpha, min=1e-6, max=0.5, help="The sequential rule's alpha: most chance "
        "of promoting a canary worse by the margin."),
    canary_max_trajectories: int = typer.Option(
        DemoConfig.canary_max_trajectories, min=2, help="A canary's budget (both arms): the "
        "cycle's traffic goes on until the rule decides, and at this many it rejects."),
    seed: int = typer.Option(DemoConfig.seed, help="Seed of tasks, users and training."),
    port_offset: int = typer.Option(0, help="Added to the services' ports (ingest 18400, "
                                    "gateway 18000, console 18090), to run two demos at once."),
) -> None:
    """The closed loop on this machine: broker, ingest, reward worker, monitors, console,
    gateway and trainer; simulated users work with the served policy, their events become
    rewards, each cycle trains a LoRA candidate; one that passes the gate's offline evaluation
    serves a canary arm beside production in the next cycle, where the release controller
    decides it by a sequential A/B (the cycle's traffic goes on until it decides), and it is
    promoted (the gateway hot-loads it) only if non-inferior. Prints per cycle reward, kept-edit,
    dissatisfied and broken-call rates, latency, the A/B table and every decision with its
    reason; ends with a table and a plot in `runs/demo-<time>/`. It stops what it started (a
    broker too, unless one was running), also on Ctrl-C.

    The first run builds the warm-started policy (SFT; about two minutes on one core, then cached
    under ~/.cache/rewardstream). Example: `rewardstream demo --cycles 6`, or
    `rewardstream demo --hack clarify` to watch the edit-rate-collapse alert fire, or
    `rewardstream demo --hack broken-calls:0.3` for a variant that breaks calls on about 30% of
    its trajectories.
    """
    from harness.demo.run import new_run_dir, run_demo

    hack_name, hack_strength = _hack(hack)
    run_dir, prefix = new_run_dir(runs)
    config = DemoConfig(run_dir=run_dir, cycles=cycles, trajectories=trajectories,
                        fresh_cohorts=fresh_cohorts, hack=hack_name, hack_strength=hack_strength,
                        lr=lr, lora_rank=lora_rank, batch_records=batch_records,
                        temperature=temperature, concurrency=concurrency,
                        eval_per_family=eval_per_family, gate_margin=gate_margin,
                        gate_broken_call_tolerance=gate_broken_call_tolerance,
                        canary_share=canary_share, ab_margin=ab_margin, ab_alpha=ab_alpha,
                        canary_max_trajectories=canary_max_trajectories, seed=seed,
                        ingest_port=DemoConfig.ingest_port + port_offset,
                        gateway_port=DemoConfig.gateway_port + port_offset,
                        console_port=DemoConfig.console_port + port_offset)
    typer.echo(f"run directory: {run_dir}")
    run_demo(config, prefix)


def _hack(text: str | None) -> tuple[str | None, float]:
    """``--hack NAME[:STRENGTH]`` as (name, strength); a clear error for anything else."""
    if text is None:
        return None, 1.0
    try:
        name, strength = parse_mix(text)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--hack") from None
    if name not in HACKS:
        raise typer.BadParameter(f"{text!r}: {name} is not a hack; choose {', '.join(HACKS)}",
                                 param_hint="--hack")
    return name, strength


def demo_sweep(
    seeds: int = typer.Option(5, min=1, help="Seeds 0 … N−1 of every variant."),
    hack: list[str] = typer.Option(
        ["clarify:0.25", "clarify:0.5", "broken-calls:0.25", "broken-calls:0.5"],
        metavar="NAME[:STRENGTH]", help="The --hack variants to run (repeatable)."),
    healthy: bool = typer.Option(True, help="Also run the demo without a hack."),
    cycles: int = typer.Option(2, min=2, help="Cycles a run; the variant's first is cycle 2."),
    out: Path = typer.Option(Path("runs/sweep"), help="Where each run's directory is made; a "
                             "run already there is read, not run again."),
    port_offset: int = typer.Option(0, help="Added to the demo's ports (as demo's option)."),
) -> None:
    """The demo over seeds, healthy and with each --hack variant, one run at a time; prints a
    table of each run's reward in cycles 1 and 2, what the variant did, and the critical alerts
    on it in its first cycle (cycle 2), the false criticals and the warnings, then one line a
    variant. Written to OUT/sweep.json too. A stopped sweep resumes where it was.

    About 2–6 minutes a run on a 2-core machine, an hour for the default 25 (the first run also
    builds the demo's policy, ~1.5 min). Example: `rewardstream demo-sweep --seeds 5 --out
    runs/sweep`
    """
    from harness.demo.sweep import HEALTHY, format_table, run_sweep

    for text in hack:
        _hack(text)  # every variant is checked before the first run starts
    variants = ([HEALTHY] if healthy else []) + list(hack)
    rows = run_sweep(out, variants, range(seeds), cycles, port_offset, typer.echo)
    typer.echo(format_table(rows))


def register(app: typer.Typer) -> None:
    app.command("demo")(demo)
    app.command("demo-sweep")(demo_sweep)
