"""Random LoRA adapters over a local base model, for serving tests, benchmarks and the GPU
check: each seed gives a different, visibly non-zero adapter (peft's default init is a no-op)."""

from __future__ import annotations

from pathlib import Path

__all__ = ["build_random_adapter", "teacher_forced_logprobs"]


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


def teacher_forced_logprobs(model, prompt_ids: list[int], completion_ids: list[int],
                            temperature: float = 1.0) -> list[float]:
    """Log-probabilities of ``completion_ids`` after ``prompt_ids`` from ONE full forward pass
    (no KV cache, no sampler code), under the softmax at ``temperature`` without truncation:
    the independent recomputation behaviour logprobs are checked against."""
    import torch

    ids = torch.tensor([prompt_ids + completion_ids], device=model.device)
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0].float()  # (T, V)
    # Position t predicts token t+1: the completion is predicted from len(prompt)-1 on.
    predicting = logits[len(prompt_ids) - 1: -1] / temperature
    logprobs = torch.log_softmax(predicting, dim=-1)
    targets = torch.tensor(completion_ids, device=logits.device)
    return logprobs.gather(-1, targets[:, None])[:, 0].tolist()
