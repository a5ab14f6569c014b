"""``rewardstream bench trainer``: tokens/s of the trainer's update step against a plain PyTorch
loop doing the same step (forward, token log-probs, truncated-IS policy-gradient loss, backward,
clip, AdamW) on an identical copy of the same model, in the same run: a small Llama-style model
built locally, or any local model directory (``--model``), fully fine-tuned or with LoRA."""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedTokenizerFast

    from trainer.batch import TokenBatch, TrainSample

__all__ = ["register"]


def _setup(root: Path, hidden: int, layers: int) -> tuple[PreTrainedTokenizerFast, Path]:
    """A tokenizer and a model directory built locally."""
    from transformers.utils import logging

    from harness.policy.tiny import TinyModelConfig, build_tiny_model, build_tokenizer
    from trainer.evalsuite import DEFAULT_DEMONSTRATIONS

    logging.disable_progress_bar()

    corpus = [t for texts in DEFAULT_DEMONSTRATIONS.values() for t in texts] * 4
    tokenizer = build_tokenizer(corpus, vocab_size=400)
    config = TinyModelConfig(hidden_size=hidden, layers=layers, heads=4,
                             intermediate_size=hidden * 4)
    return tokenizer, build_tiny_model(tokenizer, root / "model", config)


def _samples(count: int, prompt_len: int, completion_len: int,
             vocab: int) -> list[TrainSample]:
    import torch

    from trainer.batch import TrainSample

    g = torch.Generator().manual_seed(0)
    out = []
    for i in range(count):
        ids = torch.randint(4, vocab, (prompt_len + completion_len,), generator=g).tolist()
        out.append(TrainSample(tuple(ids[:prompt_len]), tuple(ids[prompt_len:]),
                               (-2.0,) * completion_len, 1.0 if i % 2 else -1.0))
    return out


def _reference_step(model: torch.nn.Module, optimizer: torch.optim.Optimizer, batch: TokenBatch,
                    cap: float, max_norm: float) -> None:
    """The same update written as a bare loop over prebuilt tensors."""
    import torch

    logits = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits
    logits = logits[:, :-1].float()  # (B, L-1, V)
    targets = batch.input_ids[:, 1:]  # (B, L-1)
    lp = logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1) - torch.logsumexp(logits, -1)
    weights = torch.exp(lp.detach() - batch.behaviour_logprobs).clamp(max=cap)
    mask = batch.completion_mask
    loss = (-weights * batch.advantages[:, None] * lp * mask).sum() / mask.sum()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def trainer_bench(
    steps: int = typer.Option(6, min=1, help="Timed update steps per side."),
    batch: int = typer.Option(8, min=1, help="Samples per update."),
    prompt_len: int = typer.Option(96, min=1, help="Prompt tokens per sample."),
    completion_len: int = typer.Option(160, min=1, help="Completion tokens per sample."),
    hidden: int = typer.Option(128, min=16, help="Hidden size of the benchmark model."),
    layers: int = typer.Option(4, min=1, help="Layers of the benchmark model."),
    model: Path = typer.Option(None, exists=True, file_okay=False,
                               help="A local model directory to train instead of the built "
                                    "one (e.g. one from `rewardstream model import`)."),
    lora: bool = typer.Option(False, "--lora", help="Train a LoRA adapter (all linear layers, "
                                                    "rank 8) instead of every weight."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Tokens/s of one update step: the trainer's PolicyUpdater vs a plain PyTorch loop.

    Both sides train identical copies of the same locally built Llama-style model on the same
    batch, alternating blocks of steps so machine load hits both alike; the ratio is
    trainer / reference (goal >= 0.9). Example: rewardstream bench trainer --json"""
    import torch

    from trainer.actor import load_actor
    from trainer.batch import collate
    from trainer.config import TrainConfig
    from trainer.distributed import DistContext
    from trainer.update import PolicyUpdater, make_optimizer

    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as tmp:
        if model is None:
            tokenizer, model_dir = _setup(Path(tmp), hidden, layers)
        else:
            from transformers import AutoTokenizer

            tokenizer = AutoTokenizer.from_pretrained(model, local_files_only=True)
            model_dir = model
        config = TrainConfig(model_dir=model_dir, out_dir=Path(tmp) / "out", lr=1e-5,
                             micro_batch_size=batch, lora=lora)
        ours = load_actor(config, None, "cpu")
        optimizer = make_optimizer(ours.trainable(), config)
        updater = PolicyUpdater(ours, optimizer, config, DistContext())
        reference = load_actor(config, None, "cpu")
        plain = reference.model
        plain_opt = make_optimizer(reference.trainable(), config)
        samples = _samples(batch, prompt_len, completion_len, len(tokenizer))
        prebuilt = collate(samples, ours.pad_id)
        tokens = batch * (prompt_len + completion_len)
        timings = {"trainer": 0.0, "reference": 0.0}
        runs = {"trainer": lambda: updater.step(samples),
                "reference": lambda: _reference_step(plain, plain_opt, prebuilt, config.is_cap,
                                                     config.max_grad_norm)}
        for run in runs.values():  # warm-up
            run()
        for _ in range(steps):
            for name, run in runs.items():
                start = time.perf_counter()
                run()
                timings[name] += time.perf_counter() - start
    params = sum(p.numel() for p in plain.parameters())
    trained = sum(p.numel() for p in reference.trainable())
    trainer_tps = tokens * steps / timings["trainer"]
    reference_tps = tokens * steps / timings["reference"]
    if as_json:
        described: dict[str, Any] = {
            "dir": str(model) if model else None, "lora": lora,
            "hidden": plain.config.hidden_size, "layers": plain.config.num_hidden_layers,
            "params": params, "trainable": trained}
        typer.echo(json.dumps({
            "model": described, "batch": batch, "tokens_per_step": tokens, "steps": steps,
            "trainer_tokens_per_s": trainer_tps, "reference_tokens_per_s": reference_tps,
            "ratio": trainer_tps / reference_tps}))
        return
    typer.echo(f"model {model or 'built locally'}, {params:,} params ({trained:,} trained), "
               f"{batch} samples x "
               f"{prompt_len}+{completion_len} tokens, {steps} steps each")
    typer.echo(f"trainer   {trainer_tps:10.0f} tokens/s")
    typer.echo(f"reference {reference_tps:10.0f} tokens/s")
    typer.echo(f"ratio     {trainer_tps / reference_tps:10.3f}  (goal >= 0.9)")


def register(bench_app: typer.Typer) -> None:
    bench_app.command("trainer")(trainer_bench)
