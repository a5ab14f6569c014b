"""Import a pretrained model: a GGUF file or a Hugging Face model directory becomes a model
directory that the trainer, the torch engine, the harness and vLLM all load the same way
(``config.json``, ``model.safetensors``, ``generation_config.json``, the tokenizer with its chat
template) plus ``import.json`` saying where it came from and what was changed.

GGUF weights are dequantised by transformers' GGUF loader (the ``gguf`` package). A model loaded
that way refuses ``save_pretrained``, so its dequantised state dict is loaded into a fresh model
built from the same config (without ``quantization_config``), whose embeddings are then re-tied.
The tokenizer is repaired from the GGUF's metadata (``trainer.gguf_tokenizer``). The result is
written to a staging directory, reloaded and checked (its logits equal the in-memory model's, its
tokenizer round-trips sample code), and only then renamed into place.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from infra.models import ModelLoadError, load_policy
from trainer.gguf_tokenizer import read_gguf_info, repair_tokenizer

__all__ = ["DTYPES", "IMPORT_FILE", "ImportReport", "ModelImportError", "import_model",
           "tokenizer_checks"]

DTYPES = ("float32", "bfloat16", "float16")
IMPORT_FILE = "import.json"
# Code-like text with digits, indentation, unicode and tool-call syntax: what the tokenizer must
# round-trip exactly, and where each digit must be its own token.
SAMPLE_TEXTS = (
    "def total(a, b):\n    return a + b  # 2 + 2 == 4\n",
    "x = [\n    1,\n    22,\n    333]\n",
    "\tprint('héllo → wörld', 0x1F, 3.14)\n",
    '<tool>edit_file {"path": "src/app.py", "fix": 2}</tool>',
)

Progress = Callable[[str], None]


class ModelImportError(ModelLoadError):
    """A model source cannot be imported (missing, not a model, unsupported, or out exists)."""


@dataclass
class ImportReport:
    source: str
    source_kind: str  # "gguf" or "huggingface"
    out_dir: str
    dtype: str
    parameters: int = 0
    architecture: str = ""
    source_sha256: str | None = None
    source_tensor_types: dict[str, int] = field(default_factory=dict)
    tokenizer_changes: list[str] = field(default_factory=list)
    tokenizer_checks: dict[str, Any] = field(default_factory=dict)
    chat_template: bool = False


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _check_source(source: Path) -> str:
    if not source.exists():
        raise ModelImportError(f"{source} does not exist; give a .gguf file or a Hugging Face "
                               "model directory")
    if source.is_file():
        with open(source, "rb") as handle:
            if handle.read(4) != b"GGUF":
                raise ModelImportError(f"{source} is not a GGUF file (no GGUF magic bytes)")
        return "gguf"
    if not (source / "config.json").exists():
        ggufs = sorted(source.glob("*.gguf"))
        hint = f"; to import {ggufs[0].name}, give the file itself" if ggufs else ""
        raise ModelImportError(f"{source} has no config.json, so it is not a Hugging Face "
                               f"model directory{hint}")
    return "huggingface"


def _check_out(out_dir: Path) -> None:
    if out_dir.exists() and (not out_dir.is_dir() or any(out_dir.iterdir())):
        raise ModelImportError(f"--out {out_dir} exists and is not empty; choose a new directory")


def _load_gguf(source: Path, torch_dtype: Any, report: ImportReport,
               progress: Progress) -> tuple[Any, Any]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        info = read_gguf_info(source)
    except ImportError as exc:
        raise ModelImportError(f"reading GGUF needs the gguf package ({exc})") from None
    report.architecture, report.source_tensor_types = info.architecture, info.tensor_types
    progress(f"reading the tokenizer ({info.tokenizer_model}, pre-tokenizer "
             f"{info.pre_tokenizer})")
    try:
        tokenizer = AutoTokenizer.from_pretrained(source.parent, gguf_file=source.name)
        progress(f"dequantising {sum(info.tensor_types.values())} tensors "
                 f"({', '.join(f'{n} {t}' for t, n in sorted(info.tensor_types.items()))})")
        loaded = AutoModelForCausalLM.from_pretrained(source.parent, gguf_file=source.name,
                                                      dtype=torch.float32)
    except (ValueError, KeyError, NotImplementedError) as exc:
        raise ModelImportError(f"transformers cannot load {source.name} "
                               f"(architecture {info.architecture!r}): {exc}") from None
    report.tokenizer_changes = repair_tokenizer(tokenizer, info)
    progress("rebuilding the model without its GGUF quantisation config")
    config = loaded.config
    config.quantization_config = None
    del config.quantization_config
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    result = model.load_state_dict(loaded.state_dict(), strict=False)
    # A tied head's weight is absent from the state dict of some checkpoints: tie_weights fills it.
    missing = [k for k in result.missing_keys if k not in model._tied_weights_keys]
    if missing or result.unexpected_keys:
        raise ModelImportError(f"the dequantised weights do not fit the model: missing "
                               f"{missing[:5]}, unexpected {result.unexpected_keys[:5]}")
    model.tie_weights()
    model.generation_config = loaded.generation_config
    return model.to(torch_dtype), tokenizer


def _load_huggingface(source: Path, torch_dtype: Any, report: ImportReport,
                      progress: Progress) -> tuple[Any, Any]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    progress("loading the model and tokenizer")
    try:
        tokenizer = AutoTokenizer.from_pretrained(source, local_files_only=True)
        model = AutoModelForCausalLM.from_pretrained(source, dtype=torch_dtype,
                                                     local_files_only=True)
    except (OSError, ValueError) as exc:
        raise ModelImportError(f"{source} is not a loadable Hugging Face causal LM: "
                               f"{exc}") from None
    report.architecture = model.config.model_type
    return model, tokenizer


def tokenizer_checks(tokenizer: Any) -> dict[str, Any]:
    """Whether sample code round-trips through encode/decode, and whether digits are split
    one by one (as SmolLM2's own tokenizer does)."""
    round_trips = all(
        tokenizer.decode(tokenizer(text, add_special_tokens=False).input_ids) == text
        for text in SAMPLE_TEXTS)
    digits = tokenizer.convert_ids_to_tokens(
        tokenizer("12345", add_special_tokens=False).input_ids)
    return {"round_trips": round_trips, "digits_split": digits == list("12345"),
            "tokens_of_12345": digits}


def _verify(staging: Path, model: Any, tokenizer: Any, dtype: str) -> dict[str, Any]:
    import torch

    reloaded, reloaded_tokenizer = load_policy(staging, dtype=dtype)
    probe = tokenizer(SAMPLE_TEXTS[0], return_tensors="pt").input_ids
    with torch.no_grad():
        if not torch.equal(model.eval()(probe).logits, reloaded(probe).logits):
            raise ModelImportError("the saved model's logits differ from the imported model's")
    if reloaded_tokenizer(SAMPLE_TEXTS[1]).input_ids != tokenizer(SAMPLE_TEXTS[1]).input_ids:
        raise ModelImportError("the saved tokenizer encodes differently from the imported one")
    return tokenizer_checks(reloaded_tokenizer)


def import_model(source: Path, out_dir: Path, dtype: str = "float32",
                 progress: Progress = lambda _stage: None) -> ImportReport:
    """Import ``source`` into ``out_dir`` (which must not exist or be empty)."""
    import torch
    from transformers.utils import logging

    if dtype not in DTYPES:
        raise ModelImportError(f"--dtype {dtype!r} must be one of {', '.join(DTYPES)}")
    kind = _check_source(source)
    _check_out(out_dir)
    logging.disable_progress_bar()
    report = ImportReport(str(source.resolve()), kind, str(out_dir.resolve()), dtype)
    torch_dtype = getattr(torch, dtype)
    if kind == "gguf":
        progress("hashing the source")
        report.source_sha256 = _sha256(source)
        model, tokenizer = _load_gguf(source, torch_dtype, report, progress)
    else:
        model, tokenizer = _load_huggingface(source, torch_dtype, report, progress)
    report.parameters = sum(p.numel() for p in model.parameters())
    report.chat_template = bool(tokenizer.chat_template)
    staging = out_dir.with_name(f".{out_dir.name}.importing")
    shutil.rmtree(staging, ignore_errors=True)
    try:
        progress(f"saving {report.parameters / 1e6:.1f}M parameters as {dtype} safetensors")
        model.save_pretrained(staging, safe_serialization=True)
        tokenizer.save_pretrained(staging)
        progress("reloading and checking the saved model")
        report.tokenizer_checks = _verify(staging, model, tokenizer, dtype)
        (staging / IMPORT_FILE).write_text(json.dumps(asdict(report), indent=2) + "\n")
        if out_dir.exists():
            out_dir.rmdir()
        staging.rename(out_dir)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return report
