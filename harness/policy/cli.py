"""``rewardstream policy ...``: build the tiny warm-started policy and score policies."""

from __future__ import annotations

from pathlib import Path

import typer

from harness.policy.expert import parse_mix
from harness.policy.sft import SftConfig
from harness.tasks import held_out_per_family

__all__ = ["register"]

policy_app = typer.Typer(
    help="The tiny coding policy: build it (tokenizer + model + SFT on expert demonstrations) "
         "and score it on the held-out bench tasks.",
    no_args_is_help=True,
)


@policy_app.command("build")
def build(
    out: Path = typer.Option(..., help="Directory to write the model, tokenizer and policy.json."),
    mix: str = typer.Option(
        "warm", metavar="NAME[:STRENGTH]", help="Demonstration mix: expert (no mistakes), warm "
        "(imperfect: the default), clarify or broken-calls (the two reward-hacking policies of "
        "the demo's --hack: the warm mix with the hack on STRENGTH of the demonstrations, a "
        "share in (0, 1], 1 when omitted; e.g. broken-calls:0.3)."),
    steps: int = typer.Option(SftConfig.steps, min=1, help="SFT optimiser steps (batch 16)."),
    seed: int = typer.Option(0, help="Seed of demonstrations, initialisation and batches."),
    threads: int = typer.Option(1, min=1, help="Torch threads; a model this small trains "
                                "fastest on one, more only help on an idle machine."),
) -> None:
    """Build a tiny policy from nothing: demonstrations, tokenizer, model, SFT.

    About two minutes on one CPU core. Example: `rewardstream policy build --out runs/policy`,
    or `rewardstream policy build --mix broken-calls:0.3 --out runs/broken-30`
    """
    try:
        name, strength = parse_mix(mix)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--mix") from None
    import torch
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from harness.policy.sft import build_policy

    torch.set_num_threads(threads)
    columns = (TextColumn("[bold]SFT[/]"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
               TextColumn("loss {task.fields[loss]:.3f}"), TimeElapsedColumn())
    config = SftConfig(mix=name, strength=strength, steps=steps, seed=seed)
    with Progress(*columns) as progress:
        bar = progress.add_task("sft", total=steps, loss=float("nan"))
        info = build_policy(out, config,
                            on_step=lambda step, loss: progress.update(bar, completed=step + 1,
                                                                       loss=loss))
    typer.echo(f"policy written to {out}: {info['demonstrations']} demonstration turns, "
               f"final loss {info['final_loss']}")


@policy_app.command("eval")
def evaluate(
    policy: Path = typer.Argument(None, help="Model directory (omit with --expert)."),
    expert: bool = typer.Option(False, help="Score the scripted expert instead of a model."),
    per_family: int = typer.Option(8, min=1, max=held_out_per_family(),
                                   help="Held-out tasks per family."),
    seed: int = typer.Option(0, help="Sampling seed; the same seed replays the same episodes."),
    temperature: float = typer.Option(1.0, min=0.0, help="0 for greedy decoding."),
) -> None:
    """Score a policy on held-out tasks (hidden tests pass = 1), per task family.

    Example: `rewardstream policy eval runs/policy --per-family 10`
    """
    from harness.evals import HarnessEvalSuite, family_scores
    from harness.policy.expert import ExpertPolicy

    suite = HarnessEvalSuite(per_family=per_family, temperature=temperature)
    if expert:
        results = suite.evaluate_policy(lambda task: ExpertPolicy(task, seed=seed), seed)
    elif policy is None:
        raise typer.BadParameter("give a model directory, or --expert")
    else:
        results = suite.evaluate(policy, seed)
    for family, score in family_scores(results).items():
        typer.echo(f"{family:18s} {score:.2f}")
    typer.echo(f"{'all':18s} {sum(r.score for r in results) / len(results):.2f} "
               f"({len(results)} tasks)")


def register(app: typer.Typer) -> None:
    app.add_typer(policy_app, name="policy")
