"""Random LoRA adapters over a local base model, for serving tests, benchmarks and the GPU
check: each seed gives a different, visibly non-zero adapter (peft's default init is a no-op)."""

from __future__ import annotations

from pathlib import Path

__all__ = ["build_random_adapter"]


def build_random_adapter(base_dir: Path, out_dir: Path, seed: int, rank: int = 8,
                         target_modules: tuple[str, ...] = ("q_proj", "v_proj")) -> Path:
    """Save an adapter whose ``base_model_name_or_path`` is ``base_dir`` to ``out_dir``."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    base = AutoModelForCausalLM.from_pretrained(base_dir, local_files_only=True)
    config = LoraConfig(r=rank, lora_alpha=2 * rank, target_modules=list(target_modules),
                        init_lora_weights=False)
    model = get_peft_model(base, config)
    model.save_pretrained(out_dir)
    return out_dir
