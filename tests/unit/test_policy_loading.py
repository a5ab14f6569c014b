"""The tiny policy builds, saves and loads back as an ordinary local Hugging Face model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from infra.models import ModelLoadError, load_policy


def test_tiny_model_round_trips_through_a_directory(tiny_model_dir: Path) -> None:
    model, tokenizer = load_policy(tiny_model_dir)
    ids = tokenizer("def add(a, b):", return_tensors="pt").input_ids
    assert tokenizer.decode(ids[0]) == "def add(a, b):"
    with torch.no_grad():
        logits = model(ids).logits
    assert logits.shape == (1, ids.shape[1], len(tokenizer))
    assert sum(p.numel() for p in model.parameters()) < 5_000_000


def test_adapter_with_a_non_local_base_is_refused_with_the_field(tmp_path: Path) -> None:
    (tmp_path / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": "org/m"}))
    with pytest.raises(ModelLoadError, match="base_model_name_or_path"):
        load_policy(tmp_path)


def test_missing_directory_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ModelLoadError, match="does not exist"):
        load_policy(tmp_path / "nope")
