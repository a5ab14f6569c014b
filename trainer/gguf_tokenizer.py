"""What a GGUF file says about its tokenizer, and the repairs transformers' GGUF conversion needs
so the rebuilt tokenizer encodes as the original did.

transformers rebuilds a byte-level BPE tokenizer from the GGUF vocabulary and merges, but
(checked with transformers 5.17 on SmolLM2-135M-Instruct):

* it takes the end-of-sequence token to be the beginning-of-sequence one (``<|im_start|>``
  instead of ``<|im_end|>``), and sets no padding token; the GGUF names both by id;
* it ignores ``tokenizer.ggml.pre``, the pre-tokenizer the model was trained with. For the
  StarCoder family (``smollm`` among them) llama.cpp splits every digit off on its own before the
  GPT-2 split; without that, whitespace before a digit is cut differently (``"\\n    1"`` becomes
  ``"\\n   ", " ", "1"`` instead of ``"\\n    ", "1"``).

Both are put back from the GGUF's own metadata; anything else is left as transformers built it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["GgufInfo", "read_gguf_info", "repair_tokenizer"]

# llama.cpp pre-tokenizer types that isolate each digit ("\p{N}") before the GPT-2 regex split.
_DIGIT_ISOLATING = frozenset({"starcoder", "refact", "command-r", "smollm", "codeshell",
                              "exaone", "minerva"})


@dataclass(frozen=True)
class GgufInfo:
    architecture: str
    name: str
    tokenizer_model: str  # "gpt2" for byte-level BPE
    pre_tokenizer: str | None
    special_ids: dict[str, int]  # bos, eos, pad, unk -> token id, where the file names them
    context_length: int | None
    tensor_types: dict[str, int]  # quantisation type -> tensor count


def _field(reader: Any, key: str) -> Any:
    field = reader.fields.get(key)
    return None if field is None else field.contents()


def read_gguf_info(path: Path) -> GgufInfo:
    """The header fields the importer needs (memory-mapped; reads no weights)."""
    from collections import Counter

    from gguf import GGUFReader

    reader = GGUFReader(path)
    architecture = str(_field(reader, "general.architecture") or "unknown")
    special_ids = {}
    for role, key in (("bos", "bos_token_id"), ("eos", "eos_token_id"),
                      ("pad", "padding_token_id"), ("unk", "unknown_token_id")):
        value = _field(reader, f"tokenizer.ggml.{key}")
        if value is not None:
            special_ids[role] = int(value)
    context = _field(reader, f"{architecture}.context_length")
    return GgufInfo(
        architecture=architecture, name=str(_field(reader, "general.name") or path.stem),
        tokenizer_model=str(_field(reader, "tokenizer.ggml.model") or ""),
        pre_tokenizer=_field(reader, "tokenizer.ggml.pre"), special_ids=special_ids,
        context_length=int(context) if context is not None else None,
        tensor_types=dict(Counter(t.tensor_type.name for t in reader.tensors)),
    )


def _isolates_digits(pre_tokenizer: Any) -> bool:
    return '"Digits"' in (pre_tokenizer.__getstate__().decode() if pre_tokenizer else "")


def repair_tokenizer(tokenizer: Any, info: GgufInfo) -> list[str]:
    """Fix ``tokenizer`` (as transformers rebuilt it from the GGUF) in place; returns one line
    per change made."""
    from tokenizers import pre_tokenizers

    changes = []
    for role in ("bos", "eos", "pad", "unk"):
        token_id = info.special_ids.get(role)
        if token_id is None or getattr(tokenizer, f"{role}_token_id") == token_id:
            continue
        token = tokenizer.convert_ids_to_tokens(token_id)
        before = getattr(tokenizer, f"{role}_token")
        setattr(tokenizer, f"{role}_token", token)
        changes.append(f"{role} token {before!r} -> {token!r} (GGUF tokenizer.ggml id {token_id})")
    backend = tokenizer.backend_tokenizer
    if info.tokenizer_model == "gpt2" and info.pre_tokenizer in _DIGIT_ISOLATING and \
            not _isolates_digits(backend.pre_tokenizer):
        backend.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True),
        ])
        changes.append(f"pre-tokenizer: each digit split off before the byte-level split, as "
                       f"the GGUF's {info.pre_tokenizer!r} pre-tokenizer does")
    if info.context_length and tokenizer.model_max_length > info.context_length:
        tokenizer.model_max_length = info.context_length
    return changes
