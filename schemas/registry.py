"""The schema version registry: every published version of every event type, as JSON Schema.

Published schemas live in ``schemas/jsonschema/<type>.v<version>.json`` and are committed. The
current models must stay BACKWARD_TRANSITIVE compatible with every published version of their
type: a reader on the newest schema can read every event ever written.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from schemas.compat import backward_problems
from schemas.events import EVENT_MODELS, SCHEMA_VERSION

__all__ = [
    "DEFAULT_DIR",
    "CompatReport",
    "check_compatibility",
    "current_schemas",
    "export_schemas",
    "published_versions",
    "render",
]

DEFAULT_DIR = Path(__file__).parent / "jsonschema"
_FILE = re.compile(r"^(?P<type>[a-z_.]+)\.v(?P<version>\d+)\.json$")


def render(schema: dict[str, Any]) -> str:
    """The canonical text of a schema file (stable key order, so exports compare byte for byte)."""
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"


def current_schemas() -> dict[str, dict[str, Any]]:
    """The JSON Schema of each event type as the models define it now."""
    return {name: model.model_json_schema() for name, model in EVENT_MODELS.items()}


def export_schemas(directory: Path = DEFAULT_DIR) -> list[Path]:
    """Write the current version's schema files; returns the paths written."""
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, schema in current_schemas().items():
        path = directory / f"{name}.v{SCHEMA_VERSION}.json"
        path.write_text(render(schema))
        written.append(path)
    return written


def published_versions(directory: Path = DEFAULT_DIR) -> dict[str, dict[int, dict[str, Any]]]:
    """Every published schema, by event type and version."""
    found: dict[str, dict[int, dict[str, Any]]] = {}
    for path in sorted(directory.glob("*.json")):
        match = _FILE.match(path.name)
        if match is None:
            continue
        found.setdefault(match["type"], {})[int(match["version"])] = json.loads(path.read_text())
    return found


@dataclass(frozen=True)
class CompatReport:
    event_type: str
    version: int
    problems: list[str]


def check_compatibility(
    current: dict[str, dict[str, Any]], published: dict[str, dict[int, dict[str, Any]]]
) -> list[CompatReport]:
    """Compare each current schema against every published version of its type (transitively)."""
    reports = []
    for event_type, schema in current.items():
        for version, old in sorted(published.get(event_type, {}).items()):
            reports.append(CompatReport(event_type, version, backward_problems(schema, old)))
    for event_type in published:
        if event_type not in current:
            reports.append(CompatReport(
                event_type, max(published[event_type]),
                [f"event type {event_type!r} was removed, but the log holds events of it"],
            ))
    return reports
