"""Schema versions: every published version of every event type, as JSON Schema.

Published schemas live in ``schemas/jsonschema/<type>.v<version>.json`` and are committed. The
current models must stay BACKWARD_TRANSITIVE compatible with every published version of their
type: a reader on the newest schema can read every event ever written.

A deliberate break (version 2 bounded every field, so some events valid under version 1 are
refused now) is recorded in ``schemas/jsonschema/acknowledged_breaks.json``: each entry names
the version that introduced it, why, and the exact problems the check reports per published
version. The check reports those as acknowledged and still fails on any other problem, and on
an acknowledgement that no longer matches a problem (so the file cannot go stale).

The telemetry SDK (``harness/sdk-py``, installed on its own) validates events against copies of
the newest version of each type, shipped inside it; :func:`sync_sdk_schemas` writes them, and
``rewardstream schemas export`` runs it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rewardstream_telemetry.validation import unsupported
from schemas.compat import backward_problems
from schemas.errors import SchemaCompatibilityError
from schemas.events import EVENT_MODELS, SCHEMA_VERSION

__all__ = [
    "ACKNOWLEDGED_FILE",
    "DEFAULT_DIR",
    "CompatReport",
    "acknowledge_breaks",
    "acknowledged_breaks",
    "check_compatibility",
    "current_schemas",
    "export_schemas",
    "published_versions",
    "SDK_SCHEMA_DIR",
    "render",
    "sync_sdk_schemas",
]

DEFAULT_DIR = Path(__file__).parent / "jsonschema"
ACKNOWLEDGED_FILE = "acknowledged_breaks.json"
SDK_SCHEMA_DIR = (Path(__file__).parents[1] / "harness" / "sdk-py" / "src"
                  / "rewardstream_telemetry" / "jsonschema")
_FILE = re.compile(r"^(?P<type>[a-z_.]+)\.v(?P<version>\d+)\.json$")


def render(schema: Any) -> str:
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
    problems: list[str]  # unacknowledged: any of these fails the check
    acknowledged: list[str] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)  # why the acknowledged ones were accepted


def _label(event_type: str, version: int) -> str:
    return f"{event_type} v{version}"


def acknowledged_breaks(directory: Path = DEFAULT_DIR) -> list[dict[str, Any]]:
    """The committed acknowledgements: ``[{introduced_in, reason, problems: {label: [...]}}]``."""
    path = directory / ACKNOWLEDGED_FILE
    return json.loads(path.read_text()) if path.exists() else []


def check_compatibility(
    current: dict[str, dict[str, Any]], published: dict[str, dict[int, dict[str, Any]]],
    acknowledged: list[dict[str, Any]] | None = None,
) -> list[CompatReport]:
    """Compare each current schema against every published version of its type (transitively);
    problems listed in ``acknowledged`` are reported apart, stale acknowledgements as problems."""
    accepted: dict[str, dict[str, str]] = {}
    for entry in acknowledged or []:
        for label, problems in entry["problems"].items():
            accepted.setdefault(label, {}).update(dict.fromkeys(problems, entry["reason"]))
    reports = []
    for event_type, schema in current.items():
        for version, old in sorted(published.get(event_type, {}).items()):
            known = accepted.get(_label(event_type, version), {})
            found = backward_problems(schema, old)
            stale = [f"acknowledged in {ACKNOWLEDGED_FILE} but no longer found: {p}"
                     for p in known if p not in found]
            reports.append(CompatReport(
                event_type, version, [p for p in found if p not in known] + stale,
                [p for p in found if p in known],
                sorted({known[p] for p in found if p in known})))
    for event_type in published:
        if event_type not in current:
            reports.append(CompatReport(
                event_type, max(published[event_type]),
                [f"event type {event_type!r} was removed, but the log holds events of it"],
            ))
    return reports


def acknowledge_breaks(reason: str, directory: Path = DEFAULT_DIR) -> dict[str, list[str]]:
    """Record every problem the check finds now as a deliberate break of the current version;
    returns what was added (nothing when there is nothing to acknowledge)."""
    entries = acknowledged_breaks(directory)
    reports = check_compatibility(current_schemas(), published_versions(directory), entries)
    added = {_label(r.event_type, r.version): r.problems for r in reports if r.problems}
    if any("no longer found" in p for problems in added.values() for p in problems):
        raise SchemaCompatibilityError(
            f"{ACKNOWLEDGED_FILE} lists problems that no longer occur; remove them first")
    if added:
        entries.append({"introduced_in": SCHEMA_VERSION, "reason": reason, "problems": added})
        (directory / ACKNOWLEDGED_FILE).write_text(render(entries))
    return added


def newest_schema_files(directory: Path = DEFAULT_DIR) -> dict[str, Path]:
    """The file of the newest published version of each event type, by type."""
    newest: dict[str, tuple[int, Path]] = {}
    for path in directory.glob("*.json"):
        match = _FILE.match(path.name)
        if match and int(match["version"]) > newest.get(match["type"], (-1, path))[0]:
            newest[match["type"]] = (int(match["version"]), path)
    return {name: path for name, (_, path) in sorted(newest.items())}


def sync_sdk_schemas(directory: Path = DEFAULT_DIR, target: Path = SDK_SCHEMA_DIR) -> list[Path]:
    """Make ``target`` hold exactly the newest published schema of each type, byte for byte;
    returns the files written or removed. Refuses a schema the SDK's validator cannot enforce."""
    newest = newest_schema_files(directory)
    for path in newest.values():
        problems = unsupported(json.loads(path.read_text()))
        if problems:
            raise SchemaCompatibilityError(f"{path.name}: the telemetry SDK's validator does not "
                                           f"enforce {'; '.join(problems)}")
    target.mkdir(parents=True, exist_ok=True)
    wanted = {path.name: path.read_bytes() for path in newest.values()}
    changed = []
    for stale in sorted(target.glob("*.json")):
        if stale.name not in wanted:
            stale.unlink()
            changed.append(stale)
    for name, data in wanted.items():
        copy = target / name
        if not copy.exists() or copy.read_bytes() != data:
            copy.write_bytes(data)
            changed.append(copy)
    return changed
