"""JSON Schema export and the BACKWARD_TRANSITIVE compatibility check."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from schemas.compat import backward_problems
from schemas.events import EVENT_TYPES, SCHEMA_VERSION
from schemas.versions import (
    ACKNOWLEDGED_FILE,
    DEFAULT_DIR,
    acknowledge_breaks,
    acknowledged_breaks,
    check_compatibility,
    current_schemas,
    published_versions,
    render,
)


def _check(directory: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rewardstream", "schemas", "check", "--directory", str(directory)],
        capture_output=True, text=True,
    )


def _copy_published(directory: Path, acknowledged: object = None) -> None:
    for event_type, versions in published_versions().items():
        for version, schema in versions.items():
            (directory / f"{event_type}.v{version}.json").write_text(render(schema))
    entries = acknowledged_breaks() if acknowledged is None else acknowledged
    (directory / ACKNOWLEDGED_FILE).write_text(render(entries))


def test_committed_current_version_equals_a_fresh_export(tmp_path: Path) -> None:
    subprocess.run([sys.executable, "-m", "rewardstream", "schemas", "export", "--directory",
                    str(tmp_path)], check=True, capture_output=True)
    exported = sorted(p.name for p in tmp_path.glob("*.json"))
    assert exported == sorted(f"{t}.v{SCHEMA_VERSION}.json" for t in EVENT_TYPES)
    for name in exported:
        assert (tmp_path / name).read_bytes() == (DEFAULT_DIR / name).read_bytes(), name
    # Earlier versions stay published beside it: they describe events already on the log.
    assert set(published_versions()["edit.decided"]) == set(range(1, SCHEMA_VERSION + 1))


def test_every_closed_object_forbids_additional_properties() -> None:
    def objects(node: Any) -> list[dict[str, Any]]:
        if isinstance(node, dict):
            found = [node] if node.get("type") == "object" else []
            return found + [o for v in node.values() for o in objects(v)]
        if isinstance(node, list):
            return [o for v in node for o in objects(v)]
        return []

    for name, schema in current_schemas().items():
        for obj in objects(schema):
            if "properties" in obj:
                assert obj.get("additionalProperties") is False, (name, obj.get("title"))


def test_current_models_read_every_published_version_but_the_acknowledged_tightenings() -> None:
    reports = check_compatibility(current_schemas(), published_versions(), acknowledged_breaks())
    assert reports and all(not r.problems for r in reports)
    by_label = {(r.event_type, r.version): r for r in reports}
    latency = by_label[("completion.served", 1)]
    assert "$.payload.latency_ms: maximum tightened to 86400000.0 (was None)" in \
        latency.acknowledged
    assert latency.reasons and "bounds every field" in latency.reasons[0]
    assert not by_label[("completion.served", SCHEMA_VERSION)].acknowledged
    # Without the committed acknowledgements the same tightenings fail the check.
    bare = check_compatibility(current_schemas(), published_versions())
    assert {(r.event_type, r.version) for r in bare if r.problems} == \
        {(t, 1) for t in EVENT_TYPES}


def test_check_command_reports_acknowledged_tightenings_and_passes() -> None:
    result = _check(DEFAULT_DIR)
    assert result.returncode == 0, result.stdout
    assert "TIGHTENED    trajectory.ended v1" in result.stdout
    assert "(acknowledged) $.payload.turns: maximum tightened to 100000 (was None)" in \
        result.stdout


def test_an_unacknowledged_tightening_still_fails(tmp_path: Path) -> None:
    _copy_published(tmp_path)
    # Pretend v2 had shipped a looser bound than the current model's.
    v2 = json.loads((tmp_path / f"trajectory.ended.v{SCHEMA_VERSION}.json").read_text())
    v2["$defs"]["TrajectoryEndedPayload"]["properties"]["turns"]["maximum"] = 200_000
    (tmp_path / f"trajectory.ended.v{SCHEMA_VERSION}.json").write_text(render(v2))
    result = _check(tmp_path)
    assert result.returncode == 1
    assert f"INCOMPATIBLE trajectory.ended v{SCHEMA_VERSION}" in result.stdout
    assert "$.payload.turns: maximum tightened to 100000 (was 200000)" in result.stdout


def test_a_stale_acknowledgement_fails(tmp_path: Path) -> None:
    entries = copy.deepcopy(acknowledged_breaks())
    entries[0]["problems"]["followup.sent v1"].append("$.payload.mood: maxLength tightened")
    _copy_published(tmp_path, entries)
    result = _check(tmp_path)
    assert result.returncode == 1
    assert "no longer found: $.payload.mood: maxLength tightened" in result.stdout


def test_acknowledge_records_exactly_the_open_problems_with_their_reason(tmp_path: Path) -> None:
    _copy_published(tmp_path, [])
    added = acknowledge_breaks("bounded in v2", tmp_path)
    assert set(added) == {f"{t} v1" for t in EVENT_TYPES}
    [entry] = acknowledged_breaks(tmp_path)
    assert entry["introduced_in"] == SCHEMA_VERSION and entry["reason"] == "bounded in v2"
    assert _check(tmp_path).returncode == 0
    assert acknowledge_breaks("again", tmp_path) == {}  # nothing left to acknowledge


class _V1(BaseModel):
    model_config = ConfigDict(extra="forbid")
    edit_id: str
    horizon_s: int
    note: str | None = None


def _schema(model: type[BaseModel]) -> dict[str, Any]:
    return model.model_json_schema()


def test_adding_an_optional_field_and_widening_are_compatible() -> None:
    class V2(BaseModel):
        model_config = ConfigDict(extra="forbid")
        edit_id: str
        horizon_s: float  # int → number widens
        note: str | None = None
        reviewer: str | None = None

    assert backward_problems(_schema(V2), _schema(_V1)) == []


def test_breaking_changes_are_refused_with_their_paths() -> None:
    class NewRequired(BaseModel):
        model_config = ConfigDict(extra="forbid")
        edit_id: str
        horizon_s: int
        note: str | None = None
        reviewer: str

    class Removed(BaseModel):
        model_config = ConfigDict(extra="forbid")
        edit_id: str
        horizon_s: int

    class Narrowed(BaseModel):
        model_config = ConfigDict(extra="forbid")
        edit_id: str
        horizon_s: str
        note: str | None = None

    assert any("$.reviewer: newly required" in p
               for p in backward_problems(_schema(NewRequired), _schema(_V1)))
    assert any("$.note: field removed" in p
               for p in backward_problems(_schema(Removed), _schema(_V1)))
    assert any("$.horizon_s: type" in p
               for p in backward_problems(_schema(Narrowed), _schema(_V1)))


def test_check_command_refuses_a_breaking_change_to_a_published_type(tmp_path: Path) -> None:
    _copy_published(tmp_path)
    # Pretend v1 had shipped an extra optional payload field that the current model dropped.
    old = json.loads((tmp_path / "followup.sent.v1.json").read_text())
    old["$defs"]["FollowupSentPayload"]["properties"]["comment"] = {"type": "string"}
    (tmp_path / "followup.sent.v1.json").write_text(render(old))
    result = _check(tmp_path)
    assert result.returncode == 1
    assert "INCOMPATIBLE followup.sent v1" in result.stdout
    assert "comment: field removed" in result.stdout


def test_enum_values_may_grow_but_not_shrink() -> None:
    old = {"type": "string", "enum": ["a", "b"]}
    assert backward_problems({"type": "string", "enum": ["a", "b", "c"]}, old) == []
    assert backward_problems({"type": "string", "enum": ["a"]}, old)
