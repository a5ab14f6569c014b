"""Checkpoints made outside a training cycle: a LoRA adapter of the trainer's model fitted by
the caller (supervised fine-tuning, a deliberately flawed variant for a demo, ...), saved in the
trainer's checkpoint layout so it serves, resumes and promotes like any other."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from trainer.actor import load_actor
from trainer.checkpoint_io import CheckpointMeta, write_checkpoint
from trainer.config import TrainConfig
from trainer.update import make_optimizer

__all__ = ["CheckpointMeta", "fit_adapter_checkpoint"]


def fit_adapter_checkpoint(config: TrainConfig, out_dir: Path, checkpoint_id: str,
                           fit: Callable[[Any, Any, int], None], meta: CheckpointMeta) -> Path:
    """``config``'s model with a fresh adapter, ``fit(model, tokenizer, pad_id)``, saved as
    ``out_dir/checkpoint_id`` with ``meta``; returns the checkpoint's directory."""
    actor = load_actor(config, None, "cpu")
    fit(actor.model, actor.tokenizer, actor.pad_id)
    optimizer = make_optimizer(actor.trainable(), config)
    return write_checkpoint(out_dir, checkpoint_id, actor.save, optimizer, meta)
