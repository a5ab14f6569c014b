"""Checkpoints trained outside the platform, registered as candidates with their lineage.

A Hugging Face causal LM directory (``config.json`` and its weights) or a peft LoRA adapter
directory (``adapter_config.json`` naming a local base model, and the adapter's weights)
becomes a ``created`` candidate, exactly like one the trainer wrote, and then meets the same
gate and canary. What trained it must be said: the Kafka offsets it consumed
(``rewards:0=100-2500``) or the manifest of an export (checked to be one), recorded by its path
and content hash, so the registry can later tell which data a deployed model saw.

The gateway serves candidates as LoRA adapters over its base model: a full model can be gated
but serves only where the gateway's backend is that model (``--base-path``).
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from pathlib import Path

from schemas.checkpoints import CheckpointEvent, DataManifest, Registry
from schemas.errors import RegistryError
from schemas.exports import manifest_problem
from schemas.ids import uuid7

__all__ = ["DirectoryKind", "inspect_directory", "parse_offsets", "read_manifest",
           "registration"]

DirectoryKind = tuple[bool, str | None]  # (is a peft adapter, its base model's directory)
_WEIGHTS = ("*.safetensors", "*.bin")


def _has_weights(directory: Path, stem: str) -> bool:
    return any(path.name.startswith(stem) for pattern in _WEIGHTS
               for path in directory.glob(pattern))


def inspect_directory(directory: Path) -> DirectoryKind:
    """Whether ``directory`` is a peft adapter (and its base) or a full model; RegistryError
    naming what is missing otherwise."""
    if not directory.is_dir():
        raise RegistryError(f"{directory}: not a directory; give a Hugging Face model or peft "
                            "adapter directory")
    adapter_config = directory / "adapter_config.json"
    if adapter_config.exists():
        try:
            base = json.loads(adapter_config.read_text()).get("base_model_name_or_path")
        except (OSError, ValueError) as exc:
            raise RegistryError(f"{adapter_config}: not readable JSON ({exc})") from None
        if not base or not Path(base).is_dir():
            raise RegistryError(f"{adapter_config}: base_model_name_or_path {base!r} is not a "
                                "local directory; set it to the base model's directory")
        if not _has_weights(directory, "adapter_model"):
            raise RegistryError(f"{directory}: adapter_config.json but no adapter_model "
                                ".safetensors (or .bin)")
        return True, str(Path(base).resolve())
    if not (directory / "config.json").exists():
        raise RegistryError(f"{directory}: neither adapter_config.json (a peft adapter) nor "
                            "config.json (a Hugging Face model)")
    if not _has_weights(directory, "model") and not _has_weights(directory, "pytorch_model"):
        raise RegistryError(f"{directory}: config.json but no model weights "
                            "(model*.safetensors or pytorch_model*.bin)")
    return False, None


def parse_offsets(items: list[str]) -> dict[str, list[int]]:
    """``topic:partition=first-last`` items into the registry's offsets lineage."""
    offsets: dict[str, list[int]] = {}
    for item in items:
        where, _, span = item.partition("=")
        topic, _, partition = where.partition(":")
        first, _, last = span.partition("-")
        try:
            bounds = [int(first), int(last)]
            ok = bool(topic) and int(partition) >= 0 and 0 <= bounds[0] <= bounds[1]
        except ValueError:
            ok = False
        if not ok:
            raise RegistryError(f"--offsets {item!r}: write topic:partition=first-last, "
                                "e.g. rewards:0=100-2500")
        offsets[where] = bounds
    return offsets


def read_manifest(path: Path) -> DataManifest:
    """The export manifest by content: its path, sha256 and size; RegistryError naming the
    problem when the file is not an export's manifest (``schemas.exports``)."""
    try:
        content = path.read_bytes()
    except OSError as exc:
        raise RegistryError(f"--manifest {path}: cannot be read ({exc.strerror})") from None
    problem = manifest_problem(content)
    if problem is not None:
        raise RegistryError(f"--manifest {path}: {problem}; give the manifest.json an export "
                            "wrote, unchanged")
    return DataManifest(path=str(path.resolve()), sha256=hashlib.sha256(content).hexdigest(),
                        bytes=len(content))


def registration(registry: Registry, directory: Path, model: str, now: datetime, actor: str, *,
                 checkpoint_id: str | None = None, parent_id: str | None = None,
                 offsets: dict[str, list[int]] | None = None,
                 manifest: DataManifest | None = None, orgs: tuple[str, ...] = (),
                 reward_spec_version: str | None = None) -> CheckpointEvent:
    """The ``created`` event of a checkpoint trained elsewhere (see the module docstring)."""
    if not offsets and manifest is None:
        raise RegistryError("lineage: say what data trained it, with --manifest FILE (an "
                            "export's manifest) or --offsets topic:partition=first-last")
    adapter, base_path = inspect_directory(directory)
    checkpoint_id = checkpoint_id or f"{model}-{uuid7()}"
    if checkpoint_id in registry.latest:
        raise RegistryError(f"checkpoint {checkpoint_id!r} is already in the registry")
    if parent_id is not None:
        registry.get(parent_id)  # names the known ids when it is unknown
    return CheckpointEvent(
        event_id=str(uuid7()), sequence=registry.next_sequence, occurred_at=now,
        kind="created", status="candidate", checkpoint_id=checkpoint_id, model=model,
        parent_id=parent_id, path=str(directory.resolve()), adapter=adapter,
        base_path=base_path, reward_spec_version=reward_spec_version, orgs=sorted(orgs),
        offsets=offsets or {}, data_manifest=manifest, actor=actor,
        evidence={"reason": "registered from a directory trained outside the platform"})
