"""The archiver: ``events.raw`` into a Parquet dataset, partitioned by event-time date and type.

Layout: ``DIR/date=YYYY-MM-DD/type=T/p{partition}-{first}-{last}.parquet`` with the offsets of
the flush that wrote it, and ``DIR/_flushes/p{partition}-{first}-{last}.done`` once every file
of that flush is in place. Each file is written to a ``.tmp`` name and renamed, so readers never
see half a file. On start, data files of flushes without a ``.done`` mark (a crash mid-flush)
are removed, and reading resumes after the highest completed offset: no gaps, no duplicates.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from schemas.arrow import ARCHIVE_SCHEMA

__all__ = ["Archive", "archive_row", "archive_topic"]

log = logging.getLogger("rewardstream.archive")

_DONE_DIR = "_flushes"
_ENVELOPE = ("event_id", "type", "schema_version", "trajectory_id", "session_id", "org_id", "user",
             "checkpoint_id", "arm", "clock_skew_ms")
_TIMES = ("occurred_at", "sent_at", "received_at", "event_time")


def _time(text: str | None) -> datetime | None:
    return None if text is None else datetime.fromisoformat(text)


def archive_row(partition: int, offset: int, raw: bytes) -> dict[str, Any]:
    """One ``events.raw`` record as a row of :data:`ARCHIVE_SCHEMA`."""
    event = json.loads(raw)
    row: dict[str, Any] = {name: event.get(name) for name in _ENVELOPE}
    row.update({name: _time(event.get(name)) for name in _TIMES})
    row["arm"] = row["arm"] or "default"
    row["schema_version"] = row["schema_version"] or 1
    row["payload"] = json.dumps(event["payload"], separators=(",", ":"), sort_keys=True)
    row["kafka_partition"], row["kafka_offset"] = partition, offset
    row["date"] = (row["event_time"] or row["occurred_at"]).date().isoformat()
    return row


def _range_name(partition: int, first: int, last: int) -> str:
    return f"p{partition}-{first:020d}-{last:020d}"


def _parse_range(name: str) -> tuple[int, int, int]:
    partition, first, last = name.split(".")[0].split("-")
    return int(partition[1:]), int(first), int(last)


@dataclass
class Archive:
    directory: Path

    def completed(self) -> dict[int, int]:
        """Highest archived offset per partition, from the ``.done`` marks."""
        highest: dict[int, int] = {}
        for mark in (self.directory / _DONE_DIR).glob("*.done"):
            partition, _, last = _parse_range(mark.name)
            highest[partition] = max(highest.get(partition, -1), last)
        return highest

    def recover(self) -> dict[int, int]:
        """Drop what an interrupted flush left; returns where each partition resumes."""
        done = {mark.stem for mark in (self.directory / _DONE_DIR).glob("*.done")}
        for path in self.directory.glob("date=*/type=*/*"):
            if path.suffix == ".tmp" or path.name.split(".")[0] not in done:
                path.unlink()
        return {partition: last + 1 for partition, last in self.completed().items()}

    def flush(self, partition: int, rows: list[dict[str, Any]]) -> int:
        """Write one partition's buffered rows (consecutive offsets); returns files written."""
        if not rows:
            return 0
        name = _range_name(partition, rows[0]["kafka_offset"], rows[-1]["kafka_offset"])
        groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for row in rows:
            groups.setdefault((row["date"], row["type"]), []).append(row)
        for (date, event_type), group in sorted(groups.items()):
            target = self.directory / f"date={date}" / f"type={event_type}" / f"{name}.parquet"
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_suffix(".tmp")
            pq.write_table(pa.Table.from_pylist(group, schema=ARCHIVE_SCHEMA), tmp,
                           compression="zstd")
            os.replace(tmp, target)
        mark = self.directory / _DONE_DIR / f"{name}.done"
        mark.parent.mkdir(parents=True, exist_ok=True)
        mark.with_suffix(".tmp").write_text(json.dumps({"rows": len(rows)}))
        os.replace(mark.with_suffix(".tmp"), mark)
        return len(groups)


def _flush_all(archive: Archive, buffers: dict[int, list[dict[str, Any]]]) -> int:
    rows = sum(len(b) for b in buffers.values())
    for partition, buffered in buffers.items():
        archive.flush(partition, buffered)
    buffers.clear()
    return rows


def archive_topic(
    settings: Any, directory: Path, *, flush_interval_s: float = 60.0, max_rows: int = 50_000,
    stop_at_end: bool = False, poll_ms: int = 500,
) -> int:
    """Archive ``events.raw`` until stopped (or, with ``stop_at_end``, until caught up).

    Flushes every ``flush_interval_s`` (wall clock: this bounds how stale the archive is, it
    decides nothing about rewards) or after ``max_rows`` buffered rows. Returns rows archived."""
    from kafka import KafkaConsumer, TopicPartition

    from schemas.topics import topic_name

    archive = Archive(directory)
    resume = archive.recover()
    topic = topic_name(settings.topic_prefix, "events.raw")
    consumer = KafkaConsumer(bootstrap_servers=settings.bootstrap_servers,
                             enable_auto_commit=False, max_partition_fetch_bytes=8 << 20)
    total = 0
    try:
        partitions = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or [])]
        consumer.assign(partitions)
        for tp in partitions:
            if tp.partition in resume:
                consumer.seek(tp, resume[tp.partition])
            else:
                consumer.seek_to_beginning(tp)
        buffers: dict[int, list[dict[str, Any]]] = {}
        last_flush = time.monotonic()
        while True:
            polled = consumer.poll(timeout_ms=poll_ms, max_records=max_rows)
            for tp, messages in polled.items():
                buffers.setdefault(tp.partition, []).extend(_rows(messages))
            buffered = sum(len(b) for b in buffers.values())
            caught_up = stop_at_end and _at_end(consumer, partitions)
            if buffered >= max_rows or time.monotonic() - last_flush >= flush_interval_s \
                    or caught_up:
                total += _flush_all(archive, buffers)
                last_flush = time.monotonic()
                if buffered:
                    log.info("archived %d events (total %d)", buffered, total)
            if caught_up:
                return total
    finally:
        consumer.close()


def _rows(messages: Iterable[Any]) -> Iterable[dict[str, Any]]:
    for message in messages:
        try:
            yield archive_row(message.partition, message.offset, message.value)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            # Ingest validates every event, so this is a producer bypassing it.
            log.warning("events.raw %d/%d is not an event envelope (%r); not archived",
                        message.partition, message.offset, exc)


def _at_end(consumer: Any, partitions: Iterable[Any]) -> bool:
    ends = consumer.end_offsets(list(partitions))
    return all(consumer.position(tp) >= end for tp, end in ends.items())
