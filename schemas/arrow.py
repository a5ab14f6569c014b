"""The Arrow schema of the Parquet archive of ``events.raw``.

Envelope fields become typed columns; the payload stays as its JSON text, so one schema holds
every event type and a new optional payload field never rewrites the archive. ``date`` is the
event-time day, the archive's partition key together with ``type``.
"""

from __future__ import annotations

import pyarrow as pa

__all__ = ["ARCHIVE_SCHEMA", "QUARANTINE_SCHEMA"]

_TS = pa.timestamp("us", tz="UTC")

ARCHIVE_SCHEMA = pa.schema([
    pa.field("event_id", pa.string(), nullable=False),
    pa.field("type", pa.string(), nullable=False),
    pa.field("schema_version", pa.int16(), nullable=False),
    pa.field("trajectory_id", pa.string(), nullable=False),
    pa.field("session_id", pa.string(), nullable=False),
    pa.field("org_id", pa.string()),
    pa.field("producer", pa.string()),
    pa.field("user", pa.string(), nullable=False),
    pa.field("checkpoint_id", pa.string(), nullable=False),
    pa.field("arm", pa.string(), nullable=False),
    pa.field("occurred_at", _TS, nullable=False),
    pa.field("sent_at", _TS, nullable=False),
    pa.field("received_at", _TS),
    pa.field("event_time", _TS),
    pa.field("clock_skew_ms", pa.int64()),
    pa.field("payload", pa.string(), nullable=False),
    pa.field("kafka_partition", pa.int32(), nullable=False),
    pa.field("kafka_offset", pa.int64(), nullable=False),
    pa.field("date", pa.string(), nullable=False),
])

# Records of ``events.raw`` the archiver could not read as events: kept whole, with the reason,
# so a replay of the archive meets them where a replay of the topic does.
QUARANTINE_SCHEMA = pa.schema([
    pa.field("kafka_partition", pa.int32(), nullable=False),
    pa.field("kafka_offset", pa.int64(), nullable=False),
    pa.field("reason", pa.string(), nullable=False),
    pa.field("raw", pa.binary(), nullable=False),
])
