"""JSON Schema export and the BACKWARD_TRANSITIVE compatibility check."""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from schemas.compat import backward_problems
from schemas.registry import (
    DEFAULT_DIR,
    check_compatibility,
    current_schemas,
    published_versions,
    render,
)


def test_committed_schema_files_equal_a_fresh_export(tmp_path: Path) -> None:
    subprocess.run([sys.executable, "-m", "infra.cli", "schemas", "export", "--directory",
                    str(tmp_path)], check=True, capture_output=True)
    committed = sorted(p.name for p in DEFAULT_DIR.glob("*.json"))
    exported = sorted(p.name for p in tmp_path.glob("*.json"))
    assert exported == committed
    for name in committed:
        assert (tmp_path / name).read_bytes() == (DEFAULT_DIR / name).read_bytes(), name


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


def test_current_models_read_every_published_version() -> None:
    reports = check_compatibility(current_schemas(), published_versions())
    assert reports and all(not r.problems for r in reports)


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
    published = copy.deepcopy(published_versions())
    # Pretend v1 had shipped an extra optional payload field that the current model dropped.
    old = published["followup.sent"][1]
    old["$defs"]["FollowupSentPayload"]["properties"]["comment"] = {"type": "string"}
    for event_type, versions in published.items():
        for version, schema in versions.items():
            (tmp_path / f"{event_type}.v{version}.json").write_text(render(schema))
    result = subprocess.run(
        [sys.executable, "-m", "infra.cli", "schemas", "check", "--directory", str(tmp_path)],
        capture_output=True, text=True,
    )
    assert result.returncode == 1
    assert "INCOMPATIBLE followup.sent v1" in result.stdout
    assert "comment: field removed" in result.stdout


def test_enum_values_may_grow_but_not_shrink() -> None:
    old = {"type": "string", "enum": ["a", "b"]}
    assert backward_problems({"type": "string", "enum": ["a", "b", "c"]}, old) == []
    assert backward_problems({"type": "string", "enum": ["a"]}, old)
