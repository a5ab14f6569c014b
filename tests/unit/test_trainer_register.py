"""Checkpoints from elsewhere: what a directory is, lineage parsing, and the created event."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from schemas.checkpoints import CheckpointEvent, Registry
from schemas.errors import RegistryError
from trainer.register import inspect_directory, parse_offsets, read_manifest, registration

NOW = datetime(2026, 3, 1, tzinfo=UTC)


def _full(path: Path) -> Path:
    path.mkdir()
    (path / "config.json").write_text("{}")
    (path / "model.safetensors").write_bytes(b"")
    return path


def _adapter(path: Path, base: Path) -> Path:
    path.mkdir()
    (path / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": str(base)}))
    (path / "adapter_model.safetensors").write_bytes(b"")
    return path


def test_a_full_model_and_an_adapter_are_told_apart(tmp_path: Path) -> None:
    base = _full(tmp_path / "base")
    assert inspect_directory(base) == (False, None)
    assert inspect_directory(_adapter(tmp_path / "lora", base)) == (True, str(base.resolve()))


@pytest.mark.parametrize(("make", "problem"), [
    (lambda p: p, "not a directory"),
    (lambda p: (p.mkdir(), p)[1], "neither adapter_config.json"),
    (lambda p: (p.mkdir(), (p / "config.json").write_text("{}"), p)[2], "no model weights"),
    (lambda p: (p.mkdir(), (p / "adapter_config.json").write_text(
        '{"base_model_name_or_path": "org/remote-model"}'), p)[2], "not a local directory"),
    (lambda p: (p.mkdir(), (p / "adapter_config.json").write_text("{"), p)[2], "not readable"),
])
def test_a_directory_that_is_neither_names_what_is_missing(tmp_path: Path, make,
                                                           problem: str) -> None:
    with pytest.raises(RegistryError, match=problem):
        inspect_directory(make(tmp_path / "x"))


def test_offsets_and_manifest_lineage(tmp_path: Path) -> None:
    assert parse_offsets(["rewards:0=100-250", "rewards:1=0-9"]) == {
        "rewards:0": [100, 250], "rewards:1": [0, 9]}
    for bad in ("rewards=1-2", "rewards:0=5-2", "rewards:x=1-2", ":0=1-2", "rewards:0=-1-3"):
        with pytest.raises(RegistryError, match="topic:partition=first-last"):
            parse_offsets([bad])
    manifest = tmp_path / "manifest.json"
    manifest.write_text('{"rows": 10}')
    read = read_manifest(manifest)
    assert read.sha256 == hashlib.sha256(b'{"rows": 10}').hexdigest() and read.bytes == 12
    with pytest.raises(RegistryError, match="cannot be read"):
        read_manifest(tmp_path / "missing.json")


def test_the_created_event_carries_lineage_and_refuses_none(tmp_path: Path) -> None:
    base = _full(tmp_path / "base")
    registry = Registry([CheckpointEvent(event_id="e1", sequence=1, occurred_at=NOW,
                                         kind="promoted", status="production",
                                         checkpoint_id="base", model="m", path=str(base))])
    lora = _adapter(tmp_path / "lora", base)
    with pytest.raises(RegistryError, match="lineage"):
        registration(registry, lora, "m", NOW, "register:ana")
    event = registration(registry, lora, "m", NOW, "register:ana", checkpoint_id="trl-1",
                         parent_id="base", offsets={"rewards:0": [0, 99]}, orgs=("acme",))
    assert (event.kind, event.status, event.sequence, event.adapter) == \
        ("created", "candidate", 2, True)
    assert event.base_path == str(base.resolve()) and event.offsets == {"rewards:0": [0, 99]}
    registry.add(event)
    with pytest.raises(RegistryError, match="already in the registry"):
        registration(registry, lora, "m", NOW, "x", checkpoint_id="trl-1",
                     offsets={"rewards:0": [0, 1]})
    with pytest.raises(RegistryError, match="not in the registry"):
        registration(registry, lora, "m", NOW, "x", parent_id="nope",
                     offsets={"rewards:0": [0, 1]})
