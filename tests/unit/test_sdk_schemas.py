"""The telemetry SDK's copies of the published schemas and its validator for them.

The SDK is installed without the platform, so it ships the newest schema of each event type;
these tests fail when the copies drift from ``schemas/jsonschema`` (fix: ``rewardstream schemas
export``, which refreshes them) or use a keyword the validator does not enforce.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, get_args

import pytest

from rewardstream_telemetry import events as sdk_events
from rewardstream_telemetry.published import EVENT_SCHEMAS, SCHEMA_VERSIONS
from rewardstream_telemetry.validation import unsupported, validate
from schemas.errors import SchemaCompatibilityError
from schemas.events import EVENT_TYPES, SCHEMA_VERSION
from schemas.versions import (
    DEFAULT_DIR,
    SDK_SCHEMA_DIR,
    newest_schema_files,
    sync_sdk_schemas,
)


def test_the_sdk_ships_exactly_the_newest_published_schema_of_each_type() -> None:
    newest = newest_schema_files(DEFAULT_DIR)
    shipped = {path.name: path.read_bytes() for path in SDK_SCHEMA_DIR.glob("*.json")}
    expected = {path.name: path.read_bytes() for path in newest.values()}
    assert sorted(shipped) == sorted(expected), "run `rewardstream schemas export`"
    stale = [name for name in expected if shipped[name] != expected[name]]
    assert not stale, f"{stale} differ from schemas/jsonschema: run `rewardstream schemas export`"
    assert sorted(EVENT_SCHEMAS) == sorted(EVENT_TYPES)
    assert set(SCHEMA_VERSIONS.values()) == {SCHEMA_VERSION}


def test_every_shipped_schema_uses_only_what_the_validator_enforces() -> None:
    for name, schema in EVENT_SCHEMAS.items():
        assert unsupported(schema) == [], name


@pytest.mark.parametrize("alias, event_type, field", [
    ("FinishReason", "completion.served", "finish_reason"),
    ("ToolErrorKind", "tool.called", "error_kind"),
    ("EditDecision", "edit.decided", "decision"),
    ("Sentiment", "followup.sent", "sentiment"),
    ("TrajectoryOutcome", "trajectory.ended", "outcome"),
])
def test_the_constructors_parameter_types_are_the_shipped_schemas_closed_sets(
        alias: str, event_type: str, field: str) -> None:
    schema = EVENT_SCHEMAS[event_type]
    payload = schema["$defs"][schema["properties"]["payload"]["$ref"].rsplit("/", 1)[1]]
    prop: dict[str, Any] = payload["properties"][field]
    enum = next((b["enum"] for b in prop.get("anyOf", []) if "enum" in b), prop.get("enum"))
    assert list(get_args(getattr(sdk_events, alias))) == enum


def _published_copy(tmp_path: Path) -> Path:
    published = tmp_path / "published"
    shutil.copytree(DEFAULT_DIR, published)
    return published


def test_a_new_schema_version_replaces_the_shipped_copy(tmp_path: Path) -> None:
    published, target = _published_copy(tmp_path), tmp_path / "sdk"
    sync_sdk_schemas(published, target)
    current = newest_schema_files(published)["tool.called"]
    following = SCHEMA_VERSION + 1
    schema = json.loads(current.read_text())
    schema["properties"]["tool_note"] = {"type": "string", "maxLength": 10}
    (published / f"tool.called.v{following}.json").write_text(json.dumps(schema))
    changed = sync_sdk_schemas(published, target)
    assert sorted(p.name for p in changed) == sorted([current.name,
                                                      f"tool.called.v{following}.json"])
    assert not (target / current.name).exists()
    assert json.loads((target / f"tool.called.v{following}.json").read_text()) == schema
    assert sync_sdk_schemas(published, target) == []  # nothing left to do


def test_a_schema_the_validator_cannot_enforce_is_not_shipped(tmp_path: Path) -> None:
    published, target = _published_copy(tmp_path), tmp_path / "sdk"
    current = newest_schema_files(published)["edit.decided"]
    schema = json.loads(current.read_text())
    schema["properties"]["edit_id"] = {"type": "string", "not": {"const": ""}}
    (published / f"edit.decided.v{SCHEMA_VERSION + 1}.json").write_text(json.dumps(schema))
    with pytest.raises(SchemaCompatibilityError, match=r"edit\.decided\.v\d+\.json: .*"
                       r"keyword 'not' at edit_id"):
        sync_sdk_schemas(published, target)
    assert not target.exists()


_NUMBERS = {"type": "object", "additionalProperties": False, "required": ["n"],
            "properties": {"n": {"type": "integer", "minimum": 0, "exclusiveMaximum": 10},
                           "x": {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
                           "ok": {"type": "boolean"},
                           "tag": {"anyOf": [{"type": "string", "pattern": "^v[0-9]"},
                                             {"type": "null"}]},
                           "when": {"type": "string", "format": "date-time"},
                           "ids": {"type": "array", "maxItems": 2,
                                   "items": {"type": "string", "format": "uuid"}},
                           "kind": {"enum": [1, "one"]}}}


@pytest.mark.parametrize("value, problem", [
    ({"n": 3}, None),
    ({}, "n: is required"),
    ({"n": True}, "n: must be an integer, got true"),
    ({"n": 2.5}, "n: must be an integer, got 2.5"),
    ({"n": 10}, "n: must be < 10"),
    ({"n": -1}, "n: must be >= 0"),
    ({"n": 1, "x": 0}, "x: must be > 0"),
    ({"n": 1, "x": float("inf")}, "x: must be a finite number, got inf"),
    ({"n": 1, "ok": 1}, "ok: must be a boolean, got 1"),
    ({"n": 1, "tag": None}, None),
    ({"n": 1, "tag": "x1"}, "tag: must match ^v[0-9]"),
    ({"n": 1, "tag": 7}, "tag: must be a string, got 7"),
    ({"n": 1, "when": "2025-02-30T00:00:00Z"}, "when: must be an ISO-8601 date-time with a time "
                                               "zone"),
    ({"n": 1, "when": "2025-01-31T12:00:00"}, "when: must be an ISO-8601 date-time with a time "
                                              "zone"),
    ({"n": 1, "when": "2025-01-31T12:00:00.1234567+05:30"}, None),
    ({"n": 1, "ids": ["not-a-uuid"]}, "ids.0: must be a UUID"),
    ({"n": 1, "ids": [], "kind": True}, "kind: must be one of 1, 'one', got true"),
    ({"n": 1, "extra": 1}, "extra: unknown field"),
])
def test_the_validator_names_the_field_and_the_rule(value: dict, problem: str | None) -> None:
    assert validate(_NUMBERS, value) == problem
