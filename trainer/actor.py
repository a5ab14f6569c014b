"""The trainable actor: a local Hugging Face causal LM, fully fine-tuned or with a LoRA adapter.

A full checkpoint directory is a complete model (config, safetensors weights, tokenizer); a LoRA
checkpoint directory is a peft adapter whose ``base_model_name_or_path`` is the absolute base
model directory. Both load with ``infra.models.load_policy`` and with vLLM.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from infra.models import head_adapter_warnings_off
from trainer.config import TrainConfig
from trainer.errors import CheckpointError

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

__all__ = ["Actor", "load_actor"]


class Actor:
    """The model being trained, its tokenizer, and how to score tokens under a reference."""

    def __init__(self, model: Any, tokenizer: PreTrainedTokenizerBase, config: TrainConfig,
                 reference: PreTrainedModel | None) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.config = config
        self._reference = reference

    @property
    def pad_id(self) -> int:
        pad = self.tokenizer.pad_token_id
        return int(pad if pad is not None else self.tokenizer.eos_token_id or 0)

    @property
    def vocab_size(self) -> int:
        """Token ids below this have an embedding."""
        return int(self.model.get_input_embeddings().num_embeddings)

    def trainable(self) -> list[torch.nn.Parameter]:
        return [p for p in self.model.parameters() if p.requires_grad]

    def logits(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """(B, L, V) logits of the actor."""
        return self.model(input_ids=input_ids, attention_mask=attention_mask).logits

    def reference_logits(self, input_ids: torch.Tensor,
                         attention_mask: torch.Tensor) -> torch.Tensor:
        """(B, L, V) logits of the frozen reference: the adapter switched off, or its own copy."""
        with torch.no_grad():
            if self._reference is not None:
                return self._reference(input_ids=input_ids, attention_mask=attention_mask).logits
            with self.model.disable_adapter():
                return self.logits(input_ids, attention_mask)

    def save(self, directory: Path) -> None:
        """Weights (safetensors) and tokenizer; an adapter records the absolute base directory."""
        with head_adapter_warnings_off():
            self.model.save_pretrained(directory, safe_serialization=True)
        self.tokenizer.save_pretrained(directory)


def _from_pretrained(path: Path) -> Any:
    from transformers import AutoModelForCausalLM
    from transformers.utils import logging

    logging.disable_progress_bar()

    try:
        return AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32,
                                                    local_files_only=True)
    except OSError as exc:
        raise CheckpointError(f"{path} is not a loadable causal LM directory: {exc}") from None


def load_actor(config: TrainConfig, start_dir: Path | None, device: str) -> Actor:
    """The actor initialised from ``start_dir`` (a checkpoint of this trainer) or the base model."""
    from transformers import AutoTokenizer

    base_dir = config.model_dir.resolve()
    tokenizer = AutoTokenizer.from_pretrained(base_dir, local_files_only=True)
    reference = None
    if config.lora:
        from peft import LoraConfig, PeftModel, get_peft_model

        model = _from_pretrained(base_dir)
        if start_dir is not None and (start_dir / "adapter_config.json").exists():
            with head_adapter_warnings_off():
                model = PeftModel.from_pretrained(model, start_dir, is_trainable=True)
        else:
            targets = config.lora_targets
            # peft scales by alpha / r as a float; its annotation says int.
            alpha: Any = config.lora_alpha
            lora = LoraConfig(r=config.lora_rank, lora_alpha=alpha, lora_dropout=0.0,
                              target_modules=(targets if targets == "all-linear"
                                              else targets.split(",")),
                              task_type="CAUSAL_LM")
            # adapter init must not shift the training RNG
            with torch.random.fork_rng(), head_adapter_warnings_off():
                torch.manual_seed(config.seed)
                model = get_peft_model(model, lora)
    else:
        model = _from_pretrained(start_dir or base_dir)
        if config.kl_coef > 0:
            reference = _from_pretrained((config.ref_dir or base_dir).resolve()).to(device).eval()
    if config.lora and config.kl_coef > 0 and config.ref_dir is not None:
        reference = _from_pretrained(config.ref_dir.resolve()).to(device).eval()
    model.to(device).train()
    return Actor(model, tokenizer, config, reference)


