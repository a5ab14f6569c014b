"""The published JSON Schema of each event type, shipped inside the package (the newest version
of each type in the platform's ``schemas/jsonschema``), and the check every event passes before
it is queued: the schema, then the rules across fields that the ingest's models add and JSON
Schema cannot say.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from importlib import resources
from typing import Any

from rewardstream_telemetry.errors import InvalidEventError
from rewardstream_telemetry.validation import (
    control_character_problem,
    validate,
    with_defaults,
)

__all__ = ["EVENT_SCHEMAS", "EVENT_TYPES", "SCHEMA_FILE", "SCHEMA_VERSIONS", "checked_event"]

SCHEMA_FILE = re.compile(r"^(?P<type>[a-z_]+\.[a-z_]+)\.v(?P<version>\d+)\.json$")


def _load() -> tuple[dict[str, dict[str, Any]], dict[str, int]]:
    schemas: dict[str, dict[str, Any]] = {}
    versions: dict[str, int] = {}
    for entry in resources.files("rewardstream_telemetry").joinpath("jsonschema").iterdir():
        match = SCHEMA_FILE.match(entry.name)
        if match is None or versions.get(match["type"], -1) > int(match["version"]):
            continue
        schemas[match["type"]] = json.loads(entry.read_text(encoding="utf-8"))
        versions[match["type"]] = int(match["version"])
    return dict(sorted(schemas.items())), dict(sorted(versions.items()))


EVENT_SCHEMAS, SCHEMA_VERSIONS = _load()
EVENT_TYPES: tuple[str, ...] = tuple(EVENT_SCHEMAS)


_ENVELOPE_IDS = ("trajectory_id", "session_id", "user", "checkpoint_id", "arm")


def _control_character_problem(event: Mapping[str, Any]) -> str | None:
    named = [(name, event[name]) for name in _ENVELOPE_IDS]
    named += [(f"payload.{name}", value) for name, value in event["payload"].items()]
    for name, value in named:
        if isinstance(value, str) and (problem := control_character_problem(value)):
            return f"{name}: {problem}"
    return None


def _cross_field_problem(event: Mapping[str, Any]) -> str | None:
    """The ingest's rules JSON Schema cannot state; None when the event keeps them."""
    event_id, payload = str(event["event_id"]), event["payload"]
    if event_id[14] != "7" or event_id[19] not in "89abAB":
        return f"event_id: must be a UUIDv7 (the ingest's idempotency key), got {event_id}"
    if (unprintable := _control_character_problem(event)) is not None:
        return unprintable
    if event["type"] == "completion.served":
        logprobs, tokens = payload["behaviour_logprobs"], payload["completion_token_ids"]
        if len(logprobs) != len(tokens):
            return (f"payload.behaviour_logprobs: has {len(logprobs)} entries but "
                    f"completion_token_ids has {len(tokens)}; they must match")
    if event["type"] == "tool.called" and not payload["valid"] and payload["error_kind"] is None:
        return "payload.error_kind: an invalid tool call (valid=False) needs an error_kind"
    return None


def checked_event(event: Mapping[str, Any]) -> dict[str, Any]:
    """``event`` with its schema's defaults filled in; raises :class:`InvalidEventError` naming
    the first field (``tool.called payload.call_id: ...``) that breaks its type's schema."""
    if not isinstance(event, Mapping):
        raise InvalidEventError(f"(event): must be a mapping of fields, got "
                                f"{type(event).__name__}")
    kind = event.get("type")
    if not isinstance(kind, str) or kind not in EVENT_SCHEMAS:
        raise InvalidEventError(f"type: must be one of {', '.join(EVENT_TYPES)}, got {kind!r}")
    schema = EVENT_SCHEMAS[kind]
    complete = with_defaults(schema, event)
    problem = validate(schema, complete) or _cross_field_problem(complete)
    if problem is not None:
        raise InvalidEventError(f"{kind} {problem}")
    return complete
