"""The archive keeps every field of the envelope: a replay of it must see what a replay of the
topic sees (a field left out changes records, e.g. a completion's producer)."""

from __future__ import annotations

from datetime import UTC, datetime

from schemas.arrow import ARCHIVE_SCHEMA
from schemas.events import ToolCalled, ToolCalledPayload
from schemas.ids import uuid7
from streams.archive import archive_row


def test_every_envelope_field_is_a_column_and_archive_rows_fill_them() -> None:
    at = datetime(2026, 1, 1, tzinfo=UTC)
    event = ToolCalled(
        event_id=uuid7(int(at.timestamp() * 1000)), trajectory_id="t", session_id="s", user="u",
        org_id="acme", producer="ingest:ide", checkpoint_id="c0", arm="a", occurred_at=at,
        sent_at=at, received_at=at, event_time=at, clock_skew_ms=0,
        payload=ToolCalledPayload(call_id="k", tool="lint", valid=True))
    row = archive_row(0, 7, event)
    envelope = set(ToolCalled.model_fields) - {"payload"}
    assert envelope <= set(ARCHIVE_SCHEMA.names) and envelope <= set(row)
    assert {name: row[name] for name in envelope} == {
        name: str(value) if name == "event_id" else value
        for name, value in event.model_dump(include=envelope).items()}
