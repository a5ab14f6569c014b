"""Models from local directories, in the one place every package loads them from: a full
Hugging Face causal LM or a LoRA adapter over one, random adapters (for benchmarks and tests:
each seed a different, visibly non-zero adapter; peft's default init is a no-op), and the
teacher-forced recomputation served logprobs are checked against.

Nothing is ever downloaded: every load is ``local_files_only``. An adapter directory (one with
``adapter_config.json``) is loaded over the base model its config names, which must itself be a
local directory.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from schemas.errors import RewardstreamError

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

__all__ = [
    "ModelLoadError",
    "build_random_adapter",
    "decode_text",
    "head_adapter_warnings_off",
    "is_adapter_dir",
    "load_policy",
    "teacher_forced_logprobs",
]

os.environ.setdefault("HF_HUB_OFFLINE", "1")


class ModelLoadError(RewardstreamError):
    """A policy directory is missing, incomplete or names a base model that is not local."""


@contextmanager
def head_adapter_warnings_off() -> Iterator[None]:
    """Silence peft's warnings about an adapter on the output head of a model with tied
    embeddings: the head's LoRA delta is meant for the output side only, and peft saves the
    embedding with the adapter, so the adapter loads exactly as trained."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Model has `tie_word_embeddings=True`")
        warnings.filterwarnings("ignore", message="Setting `save_embedding_layers` to `True`")
        yield


def is_adapter_dir(path: Path) -> bool:
    return (path / "adapter_config.json").exists()


def _adapter_base(path: Path) -> Path:
    config = json.loads((path / "adapter_config.json").read_text())
    base = config.get("base_model_name_or_path")
    if not base or not Path(base).is_dir():
        raise ModelLoadError(
            f"adapter {path} names base model {base!r}, which is not a local directory; "
            "set base_model_name_or_path in adapter_config.json to the base model's directory"
        )
    return Path(base)


def load_policy(
    path: Path | str, dtype: str = "float32", device: str = "cpu"
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """The model (in eval mode) and tokenizer stored at ``path``."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = Path(path)
    if not path.is_dir():
        raise ModelLoadError(f"model directory {path} does not exist")
    torch_dtype = getattr(torch, dtype)
    base = _adapter_base(path) if is_adapter_dir(path) else path
    try:
        model = AutoModelForCausalLM.from_pretrained(
            base, dtype=torch_dtype, local_files_only=True
        )
        tokenizer_dir = path if (path / "tokenizer.json").exists() else base
        tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir, local_files_only=True)
    except OSError as exc:
        raise ModelLoadError(f"{base} is not a loadable Hugging Face causal LM: {exc}") from None
    served: Any = model
    if base != path:
        from peft import PeftModel

        with head_adapter_warnings_off():
            served = PeftModel.from_pretrained(model, str(path), is_trainable=False)
    return served.to(device).eval(), tokenizer


def decode_text(tokenizer: PreTrainedTokenizerBase, token_ids: list[int],
                skip_special_tokens: bool = False) -> str:
    """The text of one sequence of token ids (``decode`` is typed for batches of them too)."""
    text = tokenizer.decode(token_ids, skip_special_tokens=skip_special_tokens)
    assert isinstance(text, str)  # one sequence decodes to one string
    return text


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
    with head_adapter_warnings_off():
        get_peft_model(base, config).save_pretrained(str(out_dir))
    return out_dir


def teacher_forced_logprobs(model: Any, prompt_ids: list[int], completion_ids: list[int],
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
