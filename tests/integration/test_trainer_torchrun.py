"""A 2-process torchrun (gloo) update equals the 1-process update on the same global batch."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoTokenizer

from trainer.checkpoint_io import latest_checkpoint, read_meta
from trainer.synthetic import synthetic_records

pytestmark = pytest.mark.slow


def _train(launcher: list[str], model_dir: Path, records: Path, out: Path) -> None:
    command = [*launcher, "-m", "rewardstream", "train", "--model-dir", str(model_dir),
               "--out-dir", str(out / "ckpt"), "--registry-file", str(out / "registry.jsonl"),
               "--records", str(records), "--steps-per-cycle", "3", "--batch-records", "5",
               "--lr", "1e-3", "--deterministic"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]


def test_two_gloo_ranks_match_one_process(tiny_model_dir: Path, tmp_path: Path) -> None:
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    records = tmp_path / "records.jsonl"
    # 5 records per step split 3/2 across ranks, with different lengths: the shards differ.
    records.write_text("".join(r.model_dump_json() + "\n"
                               for r in synthetic_records(tokenizer, 15, seed=2)))
    _train([sys.executable], tiny_model_dir, records, tmp_path / "one")
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone",
                "--nproc_per_node", "2"]
    _train(torchrun, tiny_model_dir, records, tmp_path / "two")

    one = latest_checkpoint(tmp_path / "one" / "ckpt")
    two = latest_checkpoint(tmp_path / "two" / "ckpt")
    assert read_meta(one).trainer_state.global_step == 3
    base = load_file(tiny_model_dir / "model.safetensors")
    single, parallel = load_file(one / "model.safetensors"), load_file(two / "model.safetensors")
    assert any(not torch.equal(single[k], base[k]) for k in base)  # it did train
    for name in single:
        torch.testing.assert_close(parallel[name], single[name], rtol=1e-4, atol=1e-6)
    steps_one = read_meta(one).stats["steps"]
    steps_two = read_meta(two).stats["steps"]
    assert [s["tokens"] for s in steps_one] == [s["tokens"] for s in steps_two]
    assert [s["loss"] for s in steps_two] == pytest.approx([s["loss"] for s in steps_one], rel=1e-4)
