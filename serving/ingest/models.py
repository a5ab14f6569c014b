"""Response bodies of the ingest API, as documented in its OpenAPI document."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from schemas.events import EventAdapter

__all__ = ["IngestResult", "Problem", "Rejection", "event_schemas"]


class Rejection(BaseModel):
    index: int = Field(description="Position of the event in the request body (0-based)")
    event_id: str | None = Field(description="The event_id the event claimed, if readable")
    kind: str = Field(description="event_too_large, malformed_json, schema_violation, "
                      "type_not_allowed, time_out_of_window or unprocessable")
    field: str | None = Field(description="Dotted path of the offending field, e.g. payload.turns")
    reason: str = Field(description="What is wrong, naming the field")


class IngestResult(BaseModel):
    accepted: list[str] = Field(description="Event ids appended to events.raw and acknowledged")
    duplicates: list[str] = Field(
        description="Event ids already appended within the dedupe window; not appended again")
    rejected: list[Rejection] = Field(description="Events refused, each with its reason")


class Problem(BaseModel):
    detail: str


def event_schemas() -> tuple[dict[str, Any], dict[str, Any]]:
    """The JSON Schema of one event (a oneOf over types) and the component schemas it refers to."""
    schema = EventAdapter.json_schema(ref_template="#/components/schemas/{model}")
    defs = schema.pop("$defs", {})
    return schema, defs
