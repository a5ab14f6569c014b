"""Model import: a Hugging Face directory becomes a model directory that loads with the same
logits (float32) or in bfloat16; bad sources and destinations get clear errors; the GGUF
tokenizer repairs restore special tokens and digit pre-tokenisation from the file's metadata.
(The GGUF path end to end runs on SmolLM2 in tests/integration/test_real_model_loop.py.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from infra.models import load_policy
from rewardstream.cli import app
from trainer.gguf_tokenizer import GgufInfo, repair_tokenizer
from trainer.model_import import ModelImportError, import_model


def _logits(model_dir: Path, text: str = "def add(a, b):") -> torch.Tensor:
    model, tokenizer = load_policy(model_dir)
    with torch.no_grad():
        return model(tokenizer(text, return_tensors="pt").input_ids).logits


def test_a_huggingface_directory_imports_to_the_same_model(tiny_model_dir: Path,
                                                           tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["model", "import", str(tiny_model_dir),
                                      "--out", str(tmp_path / "m")])
    assert result.exit_code == 0, result.output
    assert "imported huggingface" in result.output and "round-trips: True" in result.output
    assert torch.equal(_logits(tmp_path / "m"), _logits(tiny_model_dir))
    report = json.loads((tmp_path / "m" / "import.json").read_text())
    assert report["source_kind"] == "huggingface" and report["dtype"] == "float32"
    assert report["tokenizer_checks"]["round_trips"] is True
    assert not list(tmp_path.glob(".*importing"))  # the staging directory is gone


def test_bfloat16_import_halves_the_weights(tiny_model_dir: Path, tmp_path: Path) -> None:
    import_model(tiny_model_dir, tmp_path / "bf16", dtype="bfloat16")
    model, _ = load_policy(tmp_path / "bf16", dtype="bfloat16")
    assert {p.dtype for p in model.parameters()} == {torch.bfloat16}
    full = sum(f.stat().st_size for f in tiny_model_dir.glob("*.safetensors"))
    half = sum(f.stat().st_size for f in (tmp_path / "bf16").glob("*.safetensors"))
    assert half < 0.6 * full


def test_bad_sources_and_destinations_are_refused(tiny_model_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(ModelImportError, match="does not exist"):
        import_model(tmp_path / "nothing", tmp_path / "out")
    (tmp_path / "fake.gguf").write_bytes(b"not a gguf file")
    with pytest.raises(ModelImportError, match="fake.gguf is not a GGUF file"):
        import_model(tmp_path / "fake.gguf", tmp_path / "out")
    (tmp_path / "dir").mkdir()
    (tmp_path / "dir" / "model.gguf").write_bytes(b"GGUF")
    with pytest.raises(ModelImportError, match="give the file itself"):
        import_model(tmp_path / "dir", tmp_path / "out")
    with pytest.raises(ModelImportError, match="exists and is not empty"):
        import_model(tiny_model_dir, tmp_path / "dir")
    with pytest.raises(ModelImportError, match="--dtype 'int8'"):
        import_model(tiny_model_dir, tmp_path / "out", dtype="int8")
    assert not (tmp_path / "out").exists()


def test_gguf_metadata_repairs_special_tokens_and_digit_splitting(tiny_model_dir: Path) -> None:
    _, tokenizer = load_policy(tiny_model_dir)
    eos = tokenizer.convert_tokens_to_ids("</s>")
    tokenizer.eos_token = "<s>"  # what transformers' GGUF conversion does to SmolLM2
    info = GgufInfo(architecture="llama", name="t", tokenizer_model="gpt2",
                    pre_tokenizer="smollm", special_ids={"eos": eos, "pad": eos},
                    context_length=256, tensor_types={})
    def pieces(text: str) -> list[str]:
        return [piece for piece, _ in
                tokenizer.backend_tokenizer.pre_tokenizer.pre_tokenize_str(text)]

    assert pieces("n  12") == ["n", "Ġ", "Ġ12"]  # GPT-2 split only: a space sticks to the digits
    changes = repair_tokenizer(tokenizer, info)
    assert len(changes) == 3 and tokenizer.eos_token == tokenizer.pad_token == "</s>"
    assert pieces("n  12") == ["n", "ĠĠ", "1", "2"]  # each digit alone, as llama.cpp splits
    assert tokenizer.decode(tokenizer("x = [\n    12]").input_ids) == "x = [\n    12]"
    assert tokenizer.model_max_length == 256
    assert repair_tokenizer(tokenizer, info) == []  # nothing left to repair
