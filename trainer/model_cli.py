"""``rewardstream model import``: a GGUF file or Hugging Face directory -> a local model dir."""

from __future__ import annotations

import time
from enum import StrEnum
from pathlib import Path

import typer


class Dtype(StrEnum):
    float32 = "float32"
    bfloat16 = "bfloat16"
    float16 = "float16"

__all__ = ["register"]

model_app = typer.Typer(
    help="Pretrained models: import a GGUF file or a Hugging Face directory as a model "
         "directory the trainer, the engine, the harness and vLLM load.",
    no_args_is_help=True,
)


@model_app.command("import")
def import_command(
    source: Path = typer.Argument(..., help="A .gguf file, or a Hugging Face model directory "
                                            "(config.json, weights, tokenizer)."),
    out: Path = typer.Option(..., "--out", help="New directory to write the model to."),
    dtype: Dtype = typer.Option(Dtype.float32, help="Precision of the saved weights: float32 (CPU "
                                              "default), bfloat16 or float16."),
) -> None:
    """Import a pretrained causal LM as safetensors weights, tokenizer and chat template.

    GGUF weights are dequantised (their quantisation error stays in the weights); the rebuilt
    tokenizer is repaired from the GGUF's metadata (end-of-sequence and padding tokens, digit
    pre-tokenisation) and checked on sample code. Nothing is downloaded.

    Example: rewardstream model import SmolLM2-135M-Instruct.Q4_1.gguf --out models/smollm2
    """
    from rich.console import Console

    from trainer.model_import import import_model

    console = Console(stderr=True)
    started = time.monotonic()
    with console.status("importing") as status:
        def stage(text: str) -> None:
            console.log(text)
            status.update(f"{text} ...")

        report = import_model(source, out, dtype.value, stage)
    checks = report.tokenizer_checks
    typer.echo(f"imported {report.source_kind} {source.name} ({report.architecture}, "
               f"{report.parameters / 1e6:.1f}M parameters, {report.dtype}) into {out} in "
               f"{time.monotonic() - started:.0f} s")
    for change in report.tokenizer_changes:
        typer.echo(f"  tokenizer repaired: {change}")
    template = "yes" if report.chat_template else "none (the engine uses its default)"
    typer.echo(f"  chat template: {template}")
    typer.echo(f"  sample code round-trips: {checks['round_trips']}; digits split one by one: "
               f"{checks['digits_split']}")


def register(app: typer.Typer) -> None:
    app.add_typer(model_app, name="model")
