"""Reading logs back: a topic from the broker, reward records, and the Parquet archive."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from infra.settings import Settings
from schemas.rewards import RewardRecord
from schemas.topics import topic_name
from streams.errors import ArchiveError
from streams.facts import fact_from_dict
from streams.replay import LogRow

__all__ = ["archive_rows", "read_records", "read_topic"]


def read_topic(settings: Settings, name: str) -> Iterator[tuple[int, int, bytes | None, bytes]]:
    """Every record of a platform topic up to its current end: (partition, offset, key, value)."""
    from kafka import KafkaConsumer, TopicPartition

    topic = topic_name(settings.topic_prefix, name)
    consumer = KafkaConsumer(bootstrap_servers=settings.bootstrap_servers,
                             enable_auto_commit=False, max_partition_fetch_bytes=8 << 20)
    try:
        partitions = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or [])]
        consumer.assign(partitions)
        consumer.seek_to_beginning(*partitions)
        ends = {tp: end for tp, end in consumer.end_offsets(partitions).items() if end > 0}
        while ends:
            for tp, batch in consumer.poll(timeout_ms=1000, max_records=10000).items():
                for message in batch:
                    if message.offset < ends.get(tp, 0):
                        yield message.partition, message.offset, message.key, message.value
                if tp in ends and consumer.position(tp) >= ends[tp]:
                    del ends[tp]
    finally:
        consumer.close()


def read_records(settings: Settings) -> dict[bytes, RewardRecord]:
    """The ``rewards`` topic as key → record; a repeated key must carry an identical record."""
    records: dict[bytes, RewardRecord] = {}
    for _, offset, key, value in read_topic(settings, "rewards"):
        record = RewardRecord.model_validate_json(value)
        if records.setdefault(key or b"", record) != record:
            raise ArchiveError(f"rewards offset {offset}: key {key!r} carries a different record")
    return records


def archive_rows(directory: Path) -> list[LogRow]:
    """The archived events in (partition, offset) order, each once, read with polars."""
    import polars as pl

    files = sorted(directory.glob("date=*/type=*/*.parquet"))
    if not files:
        raise ArchiveError(f"no archive files under {directory}; run `rewardstream archive --out "
                           f"{directory}` first")
    frame = (pl.scan_parquet([str(f) for f in files], hive_partitioning=False)
             .unique(subset=["kafka_partition", "kafka_offset"], keep="first")
             .sort(["kafka_partition", "kafka_offset"])
             .collect())
    rows: list[LogRow] = []
    for event in frame.iter_rows(named=True):
        envelope: dict[str, Any] = {**event, "payload": json.loads(event["payload"])}
        offset = event["kafka_offset"]
        rows.append((event["kafka_partition"], offset, fact_from_dict(envelope, offset)))
    return rows
