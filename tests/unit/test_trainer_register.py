"""Checkpoints from elsewhere: what a directory is, lineage parsing (an export's manifest
checked to be one), and the created event."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from schemas.checkpoints import CheckpointEvent, Registry
from schemas.errors import RegistryError
from schemas.exports import manifest_id
from streams.export import ExportRange, write_export
from streams.spec import load_spec
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
    write_export(tmp_path / "export", [], view="binary", file_format="jsonl", org_id="acme",
                 spec=load_spec(), topic="events.raw", span=ExportRange({0: 0}, {0: 9}),
                 counts={"rows": 0})
    manifest = tmp_path / "export" / "manifest.json"
    content = manifest.read_bytes()
    read = read_manifest(manifest)
    assert read.sha256 == hashlib.sha256(content).hexdigest() and read.bytes == len(content)
    assert read.path == str(manifest.resolve())
    with pytest.raises(RegistryError, match="cannot be read"):
        read_manifest(tmp_path / "missing.json")


@pytest.mark.parametrize(("content", "problem"), [
    (b'{"rows": 10', "not JSON"),
    (b"\xff\xfe", "not JSON"),
    (b"[1, 2]", "not a JSON object"),
    (b'{"rows": 10}', "format is None, not 'rewardstream.export/1': not the manifest.json of "
                      "a `rewardstream export`"),
    (b'{"format": "rewardstream.export/2"}', "format is 'rewardstream.export/2'"),
    (b'{"format": "rewardstream.export/1", "org_id": "acme", "export_id": "0"}',
     "its export_id does not match its content: the manifest was edited"),
])
def test_a_manifest_that_is_not_an_exports_is_refused_naming_why(
        tmp_path: Path, content: bytes, problem: str) -> None:
    manifest = tmp_path / "manifest.json"
    manifest.write_bytes(content)
    with pytest.raises(RegistryError) as raised:
        read_manifest(manifest)
    assert str(raised.value).startswith(f"--manifest {manifest}: ")
    assert problem in str(raised.value) and "give the manifest.json an export wrote" in str(
        raised.value)


def test_an_edited_export_manifest_is_refused(tmp_path: Path) -> None:
    written = write_export(tmp_path, [], view="binary", file_format="jsonl", org_id="acme",
                           spec=load_spec(), topic="events.raw", span=ExportRange({}, {}),
                           counts={"rows": 0})
    assert written["export_id"] == manifest_id(written)
    (tmp_path / "manifest.json").write_text(json.dumps({**written, "org_id": "other"}))
    with pytest.raises(RegistryError, match="the manifest was edited"):
        read_manifest(tmp_path / "manifest.json")


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
