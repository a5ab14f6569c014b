"""Reading logs back: quarantined records, reward records, and the Parquet archive."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

from infra.kafka_io import read_topic
from infra.settings import Settings
from schemas.quarantine import Quarantined, read_quarantined
from schemas.rewards import RewardRecord
from schemas.topics import topic_name
from streams.archive import ORG_DIR, QUARANTINE_DIR
from streams.errors import ArchiveError
from streams.replay import LogRow

__all__ = ["archive_rows", "kafka_rows", "read_quarantine", "read_records"]


def read_quarantine(settings: Settings) -> list[Quarantined]:
    """Every quarantined record, as the ``quarantine`` topic holds them now."""
    return [read_quarantined(message.headers or [], message.value)
            for message in read_topic(settings, "quarantine")]


def read_records(settings: Settings) -> dict[bytes, RewardRecord]:
    """The ``rewards`` topic as key → record; a repeated key must carry an identical record."""
    records: dict[bytes, RewardRecord] = {}
    for message in read_topic(settings, "rewards"):
        record = RewardRecord.model_validate_json(message.value)
        if records.setdefault(message.key or b"", record) != record:
            raise ArchiveError(f"rewards offset {message.offset}: key {message.key!r} carries "
                               "a different record")
    return records


def kafka_rows(settings: Settings, starts: dict[int, int] | None = None,
               stops: dict[int, int] | None = None) -> list[LogRow]:
    """``events.raw`` as it is now, or each partition from ``starts`` (its first offset) up to
    ``stops`` (the offset after its last), as replay rows."""
    from infra.kafka_io import TopicReader

    topic = topic_name(settings.topic_prefix, "events.raw")
    named = {f"{topic}:{partition}": offset for partition, offset in (starts or {}).items()}
    until = {f"{topic}:{partition}": offset for partition, offset in (stops or {}).items()}
    with TopicReader(settings, ["events.raw"], client_id="replay", positions=named) as reader:
        return [(r.partition, r.offset, r.value or b"") for r in reader.until_end(stops=until)]


def archive_rows(directory: Path) -> list[LogRow]:
    """The archived records in (partition, offset) order, each once, read with polars: each
    event as its JSON, each quarantined record as the bytes it had on the topic."""
    import polars as pl

    files = sorted(directory.glob(f"{ORG_DIR}*/date=*/type=*/*.parquet"))
    if not files:
        raise ArchiveError(f"no archive files under {directory}; run `rewardstream archive --out "
                           f"{directory}` first")
    frame = (pl.scan_parquet([str(f) for f in files], hive_partitioning=False)
             .unique(subset=["kafka_partition", "kafka_offset"], keep="first")
             .collect())
    rows: dict[tuple[int, int], bytes] = {}
    for event in frame.iter_rows(named=True):
        position = (event.pop("kafka_partition"), event.pop("kafka_offset"))
        del event["date"]
        envelope = {**event, "payload": json.loads(event["payload"])}
        rows[position] = json.dumps(envelope, default=_iso).encode()
    for path in sorted((directory / QUARANTINE_DIR).glob("*.parquet")):
        for record in pl.read_parquet(path).iter_rows(named=True):
            rows.setdefault((record["kafka_partition"], record["kafka_offset"]), record["raw"])
    return [(partition, offset, raw) for (partition, offset), raw in sorted(rows.items())]


def _iso(value: Any) -> str:
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(f"cannot write {type(value).__name__} as JSON")
