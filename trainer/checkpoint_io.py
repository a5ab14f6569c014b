"""Durable checkpoints: weights and trainer state in safetensors, written to a temporary
directory, synced, then renamed into place, so a reader (or a restarted trainer) never sees half.

Layout of ``<out_dir>/<checkpoint id>/``:

* the model (``model.safetensors`` + config) or the LoRA adapter (``adapter_model.safetensors``),
  plus the tokenizer; every weights file carries the lineage in its safetensors metadata under
  ``rewardstream``;
* ``trainer_state.safetensors``: optimizer moments and RNG state (exact resume);
* ``checkpoint.json``: lineage, Kafka offset ranges consumed, positions to resume from,
  reward-spec versions, hyper-parameters, batch statistics, the EMA baseline, dedupe keys.

``<out_dir>/LATEST`` names the newest durable checkpoint.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from pydantic import BaseModel, ConfigDict, ValidationError
from safetensors.torch import load_file, save_file

from trainer.errors import CheckpointError

__all__ = [
    "META_FILE", "CheckpointMeta", "TrainerState", "latest_checkpoint", "load_trainer_state",
    "read_meta", "write_checkpoint",
]


class TrainerState(BaseModel):
    """What a resumed trainer continues from, besides the weights and optimizer moments."""

    model_config = ConfigDict(extra="forbid")

    global_step: int = 0
    ema: dict[str, Any] = {}  # the advantage baseline (EmaBaseline.to_dict)
    dedupe_keys: list[str] = []  # reward record keys already trained on, newest last


class CheckpointMeta(BaseModel):
    """``checkpoint.json``: a checkpoint's lineage and what the trainer needs to resume."""

    model_config = ConfigDict(extra="forbid")

    checkpoint_id: str
    parent_id: str | None = None
    model: str = ""  # the model family (the registry's ``model``)
    adapter: bool = False  # a LoRA adapter over ``base_path``, or a full model
    base_path: str | None = None
    offsets: dict[str, list[int]] = {}  # {"topic:partition": [first, last]} consumed
    positions: dict[str, int] = {}  # {"topic:partition": next offset} to resume from
    reward_spec_version: str | None = None
    orgs: list[str] = []  # the organisations whose records it was trained on
    hyperparams: dict[str, Any] = {}
    stats: dict[str, Any] = {}  # record counts by reason, per-step statistics
    trainer_state: TrainerState = TrainerState()
    provenance: dict[str, Any] = {}  # how a checkpoint made outside a cycle was made

META_FILE = "checkpoint.json"
STATE_FILE = "trainer_state.safetensors"
LATEST_FILE = "LATEST"
# Fields of checkpoint.json too bulky for every weights file's header.
_HEADER_SKIP = {"trainer_state", "hyperparams", "stats"}


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_json_atomic(path: Path, data: Any) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w") as handle:
        json.dump(data, handle, indent=2, sort_keys=True)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def _stamp_weights(directory: Path, meta: CheckpointMeta) -> None:
    header = json.dumps(meta.model_dump(mode="json", exclude=_HEADER_SKIP), sort_keys=True)
    for path in sorted(directory.glob("*.safetensors")):
        if path.name == STATE_FILE:
            continue
        tensors = load_file(path)
        save_file(tensors, path, metadata={"format": "pt", "rewardstream": header})


def _state_tensors(optimizer: torch.optim.Optimizer) -> tuple[dict[str, torch.Tensor], str]:
    state = optimizer.state_dict()
    tensors: dict[str, torch.Tensor] = {"rng.torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        for i, rng in enumerate(torch.cuda.get_rng_state_all()):
            tensors[f"rng.cuda.{i}"] = rng
    for index, moments in state["state"].items():
        for name, value in moments.items():
            tensor = value if torch.is_tensor(value) else torch.tensor(value)
            tensors[f"opt.{index}.{name}"] = tensor.detach().cpu().contiguous()
    return tensors, json.dumps(state["param_groups"])


def write_checkpoint(out_dir: Path, checkpoint_id: str, save_weights: Callable[[Path], None],
                     optimizer: torch.optim.Optimizer, meta: CheckpointMeta) -> Path:
    """Write everything to ``out_dir/.tmp-<id>``, fsync, rename to ``out_dir/<id>``, move LATEST."""
    out_dir.mkdir(parents=True, exist_ok=True)
    final, tmp = out_dir / checkpoint_id, out_dir / f".tmp-{checkpoint_id}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    save_weights(tmp)
    _stamp_weights(tmp, meta)
    tensors, groups = _state_tensors(optimizer)
    save_file(tensors, tmp / STATE_FILE, metadata={"param_groups": groups})
    (tmp / META_FILE).write_text(meta.model_dump_json(indent=2))
    for path in tmp.iterdir():
        with open(path, "rb") as handle:
            os.fsync(handle.fileno())
    _fsync_dir(tmp)
    if final.exists():  # a crash after rename but before LATEST moved: same id, rewrite it
        shutil.rmtree(final)
    os.rename(tmp, final)
    _fsync_dir(out_dir)
    _write_json_atomic(out_dir / LATEST_FILE, {"checkpoint_id": checkpoint_id})
    return final


def read_meta(directory: Path) -> CheckpointMeta:
    try:
        return CheckpointMeta.model_validate_json((directory / META_FILE).read_bytes())
    except (OSError, ValidationError) as exc:
        raise CheckpointError(f"{directory} is not a trainer checkpoint ({exc})") from None


def latest_checkpoint(out_dir: Path) -> Path | None:
    """The newest durable checkpoint under ``out_dir``, or None before the first one."""
    pointer = out_dir / LATEST_FILE
    if not pointer.exists():
        return None
    directory = out_dir / json.loads(pointer.read_text())["checkpoint_id"]
    if not (directory / META_FILE).exists():
        raise CheckpointError(f"{pointer} names {directory}, which is missing; restore it or "
                              "delete LATEST to start from the registry's production checkpoint")
    return directory


def load_trainer_state(directory: Path, optimizer: torch.optim.Optimizer | None,
                       restore_rng: bool) -> None:
    """Restore optimizer moments (when given) and, on request, the RNG state of ``directory``."""
    path = directory / STATE_FILE
    tensors = load_file(path)
    if optimizer is not None:
        from safetensors import safe_open

        with safe_open(path, "pt") as handle:
            groups = json.loads(handle.metadata()["param_groups"])
        state: dict[int, dict[str, torch.Tensor]] = {}
        for key, tensor in tensors.items():
            if key.startswith("opt."):
                _, index, name = key.split(".", 2)
                state.setdefault(int(index), {})[name] = tensor
        optimizer.load_state_dict({"state": state, "param_groups": groups})
    if restore_rng:
        torch.set_rng_state(tensors["rng.torch"])
        cuda = [tensors[k] for k in sorted(tensors) if k.startswith("rng.cuda.")]
        if cuda and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(cuda)
