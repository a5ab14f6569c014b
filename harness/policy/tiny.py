"""Build a tokenizer from a corpus and a tiny Llama-architecture causal LM from a config.

Everything is made locally (no downloads), so any machine can serve and train a real Hugging
Face model; the result is an ordinary model directory that ``infra.models.load_policy``,
the torch engine and vLLM all load the same way.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase, PreTrainedTokenizerFast

__all__ = ["TinyModelConfig", "build_tiny_model", "build_tokenizer"]

SPECIAL_TOKENS = ["<pad>", "<s>", "</s>", "<unk>"]


def build_tokenizer(corpus: Iterable[str], vocab_size: int = 512) -> PreTrainedTokenizerFast:
    """A byte-level BPE tokenizer trained on ``corpus`` (any text encodes; nothing is unknown)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False,
    )
    tokenizer.train_from_iterator(corpus, trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, pad_token="<pad>", bos_token="<s>", eos_token="</s>",
        unk_token="<unk>",
    )


@dataclass(frozen=True)
class TinyModelConfig:
    hidden_size: int = 64
    layers: int = 2
    heads: int = 4
    intermediate_size: int = 128
    max_positions: int = 512
    seed: int = 0
    # Attention to the last N tokens only (Mistral's architecture): the model's output depends
    # on how its prompt ends, however long the prompt. None: full attention (Llama).
    sliding_window: int | None = None


def build_tiny_model(tokenizer: PreTrainedTokenizerBase, out_dir: Path,
                     config: TinyModelConfig = TinyModelConfig()) -> Path:
    """Initialise a Llama-architecture model (Mistral's, with a sliding window) for
    ``tokenizer`` and save both to ``out_dir``."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, MistralConfig, MistralForCausalLM

    torch.manual_seed(config.seed)
    shape = dict(
        vocab_size=len(tokenizer), hidden_size=config.hidden_size,
        intermediate_size=config.intermediate_size, num_hidden_layers=config.layers,
        num_attention_heads=config.heads, num_key_value_heads=config.heads,
        max_position_embeddings=config.max_positions, tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    model: LlamaForCausalLM | MistralForCausalLM
    if config.sliding_window is None:
        model = LlamaForCausalLM(LlamaConfig(**shape))
    else:
        model = MistralForCausalLM(MistralConfig(sliding_window=config.sliding_window, **shape))
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir, safe_serialization=True)
    tokenizer.save_pretrained(out_dir)
    return out_dir
