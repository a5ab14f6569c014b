"""Loading a policy from a local directory: a full Hugging Face causal LM or a LoRA adapter.

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
from typing import TYPE_CHECKING

from schemas.errors import RewardstreamError

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

__all__ = ["ModelLoadError", "head_adapter_warnings_off", "is_adapter_dir", "load_policy"]

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
    if base != path:
        from peft import PeftModel

        with head_adapter_warnings_off():
            model = PeftModel.from_pretrained(model, path, is_trainable=False)
    return model.to(device).eval(), tokenizer
