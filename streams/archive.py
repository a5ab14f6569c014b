"""The archiver: ``events.raw`` into a Parquet dataset, partitioned by org, event date and type.

Layout: ``DIR/org=O/date=YYYY-MM-DD/type=T/p{partition}-{first}-{last}.parquet`` with the
offsets of the flush that wrote it (an org's data is one directory: exported, access-controlled
or deleted on its own; org ids need no escaping, see ``schemas.bounds.org_id_problem``), and
``DIR/_flushes/p{partition}-{first}-{last}.done`` once every file of that flush is in place.
Each record is validated as the reward join validates it; a record that is not a valid event is
quarantined (on the ``quarantine`` topic) and kept, with its reason and bytes, in
``DIR/_quarantine/p{partition}-{first}-{last}.parquet`` of the same flush, so a replay of the
archive meets exactly the records a replay of the topic meets. Each file is written to a
``.tmp`` name and renamed, so readers never see half a file. On start, data files of flushes
without a ``.done`` mark (a crash mid-flush) are removed, and reading resumes after the highest
completed offset: no gaps, no duplicates.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from infra.health_http import Figure
from schemas.arrow import ARCHIVE_SCHEMA, QUARANTINE_SCHEMA
from schemas.events import Event
from streams.errors import MalformedEventError
from streams.facts import read_event

__all__ = ["ARCHIVE_FIGURES", "ORG_DIR", "QUARANTINE_DIR", "Archive", "ArchiveTotals",
           "CONSUMER_NAME", "Flush", "archive_row", "archive_topic"]

log = logging.getLogger("rewardstream.archive")

CONSUMER_NAME = "archiver"  # how quarantined records name this consumer
_DONE_DIR = "_flushes"
QUARANTINE_DIR = "_quarantine"
ORG_DIR = "org="  # the prefix of each org's directory
_ENVELOPE = ("type", "schema_version", "trajectory_id", "session_id", "org_id", "producer",
             "user", "checkpoint_id", "arm", "clock_skew_ms", "occurred_at", "sent_at",
             "received_at", "event_time")


def archive_row(partition: int, offset: int, event: Event) -> dict[str, Any]:
    """One validated ``events.raw`` event as a row of :data:`ARCHIVE_SCHEMA`."""
    row: dict[str, Any] = {name: getattr(event, name) for name in _ENVELOPE}
    row["event_id"] = str(event.event_id)
    row["payload"] = event.payload.model_dump_json()
    row["kafka_partition"], row["kafka_offset"] = partition, offset
    row["date"] = (event.event_time or event.occurred_at).date().isoformat()
    return row


@dataclass
class Flush:
    """One partition's consecutive records since the last flush: events and quarantined ones."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    quarantined: list[dict[str, Any]] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.rows) + len(self.quarantined)

    def offsets(self) -> tuple[int, int]:
        found = [r["kafka_offset"] for r in self.rows] + \
            [q["kafka_offset"] for q in self.quarantined]
        return min(found), max(found)


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
        for path in [*self.directory.glob(f"{ORG_DIR}*/date=*/type=*/*"),
                     *(self.directory / QUARANTINE_DIR).glob("*")]:
            if path.suffix == ".tmp" or path.name.split(".")[0] not in done:
                path.unlink()
        return {partition: last + 1 for partition, last in self.completed().items()}

    def flush(self, partition: int, flush: Flush) -> int:
        """Write one partition's buffered records (consecutive offsets); returns files written."""
        if not len(flush):
            return 0
        name = _range_name(partition, *flush.offsets())
        groups: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
        for row in flush.rows:
            groups.setdefault((row["org_id"], row["date"], row["type"]), []).append(row)
        targets = [(self.directory / f"{ORG_DIR}{org}" / f"date={date}" / f"type={event_type}"
                    / f"{name}.parquet", pa.Table.from_pylist(group, schema=ARCHIVE_SCHEMA))
                   for (org, date, event_type), group in sorted(groups.items())]
        if flush.quarantined:
            targets.append((self.directory / QUARANTINE_DIR / f"{name}.parquet",
                            pa.Table.from_pylist(flush.quarantined, schema=QUARANTINE_SCHEMA)))
        for target, table in targets:
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_suffix(".tmp")
            pq.write_table(table, tmp, compression="zstd")
            os.replace(tmp, target)
        mark = self.directory / _DONE_DIR / f"{name}.done"
        mark.parent.mkdir(parents=True, exist_ok=True)
        mark.with_suffix(".tmp").write_text(json.dumps(
            {"rows": len(flush.rows), "quarantined": len(flush.quarantined)}))
        os.replace(mark.with_suffix(".tmp"), mark)
        return len(targets)


@dataclass
class ArchiveTotals:
    """Since the process started; read by its /metrics."""

    records: int = 0  # events archived
    quarantined: int = 0
    flushes: int = 0
    buffered: int = 0  # read, not yet flushed
    last_flush_s: float = 0.0  # Unix time of the last flush that wrote records


ARCHIVE_FIGURES = (
    Figure("rewardstream_archive_records", "records", "counter",
           "Events archived to Parquet since start"),
    Figure("rewardstream_archive_quarantined", "quarantined", "counter",
           "Records of events.raw that were not events, quarantined since start"),
    Figure("rewardstream_archive_flushes", "flushes", "counter",
           "Flushes that wrote records since start"),
    Figure("rewardstream_archive_buffered_records", "buffered", "gauge",
           "Records read and not yet flushed"),
    Figure("rewardstream_archive_last_flush_timestamp_seconds", "last_flush_s", "gauge",
           "When the last flush that wrote records finished (Unix seconds; 0: none yet)"),
)


def _flush_all(archive: Archive, buffers: dict[int, Flush], totals: ArchiveTotals) -> int:
    records = sum(len(b) for b in buffers.values())
    for partition, buffered in buffers.items():
        archive.flush(partition, buffered)
        totals.records += len(buffered.rows)
        totals.quarantined += len(buffered.quarantined)
    buffers.clear()
    if records:
        totals.flushes += 1
        totals.last_flush_s = time.time()
    return records


def archive_topic(
    settings: Any, directory: Path, *, flush_interval_s: float = 60.0, max_rows: int = 50_000,
    stop_at_end: bool = False, poll_ms: int = 500, stop: threading.Event | None = None,
    totals: ArchiveTotals | None = None,
) -> int:
    """Archive ``events.raw`` until ``stop`` is set (or, with ``stop_at_end``, until caught
    up), flushing what it read before it returns.

    Flushes every ``flush_interval_s`` (wall clock: this bounds how stale the archive is, it
    decides nothing about rewards) or after ``max_rows`` buffered records. Returns the records
    taken (archived or quarantined); ``totals`` counts them as it goes."""
    from infra.kafka_io import TopicReader
    from infra.quarantine import QuarantineSink
    from schemas.topics import topic_name

    stop, totals = stop or threading.Event(), totals or ArchiveTotals()
    archive = Archive(directory)
    topic = topic_name(settings.topic_prefix, "events.raw")
    resume = {f"{topic}:{p}": offset for p, offset in archive.recover().items()}
    reader = TopicReader(settings, ["events.raw"], client_id=CONSUMER_NAME, positions=resume)
    consumer, partitions = reader.consumer, reader.partitions
    sink = QuarantineSink(settings, CONSUMER_NAME)
    total = 0
    try:
        buffers: dict[int, Flush] = {}
        last_flush = time.monotonic()
        while True:
            polled = consumer.poll(timeout_ms=poll_ms, max_records=max_rows)
            for tp, messages in polled.items():
                buffer = buffers.setdefault(tp.partition, Flush())
                for message in messages:
                    _take(buffer, message, sink)
            buffered = totals.buffered = sum(len(b) for b in buffers.values())
            caught_up = stop_at_end and _at_end(consumer, partitions)
            if buffered >= max_rows or time.monotonic() - last_flush >= flush_interval_s \
                    or caught_up or stop.is_set():
                total += _flush_all(archive, buffers, totals)
                totals.buffered = 0
                last_flush = time.monotonic()
                if buffered:
                    log.info("archived %d records (total %d)", buffered, total)
            if caught_up or stop.is_set():
                return total
    finally:
        totals.buffered = 0  # a failure drops the buffer: the next run reads it again
        reader.close()
        sink.close()


def _take(buffer: Flush, message: Any, sink: Any) -> None:
    """Buffer one record: as an archive row, or quarantined with its reason."""
    try:
        buffer.rows.append(archive_row(message.partition, message.offset,
                                       read_event(message.value)))
    except MalformedEventError as exc:
        sink.put(message.topic, message.partition, message.offset, message.value, str(exc))
        buffer.quarantined.append({"kafka_partition": message.partition,
                                   "kafka_offset": message.offset, "reason": str(exc),
                                   "raw": message.value or b""})


def _at_end(consumer: Any, partitions: Any) -> bool:
    ends = consumer.end_offsets(list(partitions))
    return all(consumer.position(tp) >= end for tp, end in ends.items())
