"""``rewardstream export``: one org's per-completion dataset of a range of the log, as files
``datasets.load_dataset`` reads as they are, with a manifest a checkpoint can cite.

The range is of ``events.raw``, per partition from a first offset up to (not including) a last:
``P:OFFSET,...`` names offsets (partitions not named run from their beginning, or to their end),
an ISO-8601 time with a zone is resolved per partition to the first offset written at or after
it (Kafka's record timestamp: when ingest or the gateway wrote the event), and no bound is the
beginning or the end of the log now. The range's events are replayed through the reward join
under the spec, exactly as ``rewardstream replay`` does, and the org's records become rows
(``schemas.samples``) and then the view (``streams.views``). So an export is the replay's, and
two exports of one range are the same bytes; the manifest names the resolved offsets, the
spec, the counts and each file's SHA-256, and its own id (the SHA-256 of the rest) is what a
checkpoint trained on it cites as lineage. A trajectory is in the export when it is final within
the range; one that began before the range holds only the events in it.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from infra.settings import Settings
from schemas.bounds import org_id_problem
from schemas.exports import MANIFEST_FORMAT, manifest_id
from schemas.samples import SampleRow, sample_rows
from schemas.topics import topic_name
from streams.errors import ExportError
from streams.replay import LogRow, of_org, replay_rows
from streams.reward import components, signals
from streams.spec import RewardSpec
from streams.views import View, arrow_schema, binary_view, preference_view, samples_view

__all__ = ["FORMATS", "MANIFEST_FILE", "Bound", "ExportRange",
           "export_log", "parse_bound", "resolve_range", "run_export", "view_rows",
           "write_export"]

FORMATS = ("jsonl", "parquet")
MANIFEST_FILE = "manifest.json"
# train.<format>: the split name datasets.load_dataset(directory) finds the file by.
_DATA_STEM = "train"
_VIEWS = {"samples": samples_view, "preferences": preference_view, "binary": binary_view}
_OFFSETS = re.compile(r"\d+:\d+(,\d+:\d+)*")

Bound = int | dict[int, int] | None  # a time (Unix ms), offsets per partition, or none


@dataclass(frozen=True)
class ExportRange:
    starts: dict[int, int]  # partition -> first offset
    stops: dict[int, int]  # partition -> the offset after the last


def parse_bound(text: str | None, option: str) -> Bound:
    """``--from`` / ``--to`` as offsets per partition or a time; ExportError names the
    option when it is neither."""
    if text is None or not text.strip():
        return None
    text = text.strip()
    if _OFFSETS.fullmatch(text):
        pairs = [part.split(":") for part in text.split(",")]
        return {int(partition): int(offset) for partition, offset in pairs}
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise ExportError(f"{option} {text!r} is neither offsets (PARTITION:OFFSET,...) nor an "
                          "ISO-8601 time such as 2026-03-01T00:00:00Z") from None
    if moment.tzinfo is None:
        raise ExportError(f"{option} {text!r} has no time zone; add one (Z for UTC)")
    return int(moment.timestamp() * 1000)


def resolve_range(settings: Settings, start: Bound, stop: Bound) -> ExportRange:
    """Offsets per partition of ``events.raw`` for the bounds, as the log is now."""
    from kafka import TopicPartition

    from infra.kafka_io import make_consumer

    topic = topic_name(settings.topic_prefix, "events.raw")
    consumer = make_consumer(settings, "export")
    try:
        found = consumer.partitions_for_topic(topic)
        if not found:
            raise ExportError(f"topic {topic} does not exist at {settings.bootstrap_servers}; "
                              "create the platform's topics with `rewardstream topics create`")
        partitions = [TopicPartition(topic, p) for p in sorted(found)]
        first = {tp.partition: o for tp, o in consumer.beginning_offsets(partitions).items()}
        end = {tp.partition: o for tp, o in consumer.end_offsets(partitions).items()}

        def offsets(bound: Bound, default: dict[int, int]) -> dict[int, int]:
            if bound is None:
                return dict(default)
            if isinstance(bound, dict):
                unknown = sorted(set(bound) - set(default))
                if unknown:
                    raise ExportError(f"{topic} has no partition {unknown[0]} (it has "
                                      f"{sorted(default)})")
                return {p: min(max(bound.get(p, o), first[p]), end[p])
                        for p, o in default.items()}
            found_at = consumer.offsets_for_times({tp: bound for tp in partitions})
            return {tp.partition: found_at[tp].offset if found_at[tp] is not None
                    else end[tp.partition] for tp in partitions}

        starts, stops = offsets(start, first), offsets(stop, end)
    finally:
        consumer.close()
    return ExportRange(starts, {p: max(stops[p], starts[p]) for p in starts})


def view_rows(rows: Sequence[SampleRow], view: str) -> View:
    if view not in _VIEWS:
        raise ExportError(f"--view {view!r} is not one of {', '.join(_VIEWS)}")
    return _VIEWS[view](rows)


def export_log(log: Sequence[LogRow], org_id: str, view: str, spec: RewardSpec,
               retention_ms: int) -> tuple[View, dict[str, int]]:
    """The view of ``org_id``'s records in a replay of ``log``, and the counts for the
    manifest (pure)."""
    replayed = of_org(replay_rows(log, spec, retention_ms), org_id)
    rows = [row for record in replayed.records for row in sample_rows(record)]
    out, skipped = view_rows(rows, view)
    counts = {"events": len(log), "records": len(replayed.records), "completions": len(rows),
              "rows": len(out), "late_events": len(replayed.late),
              "open_trajectories_in_range": replayed.open_trajectories,
              "quarantined_in_range": len(replayed.quarantined),
              **{f"skipped_{reason}": n for reason, n in sorted(skipped.items())}}
    return (out, skipped), counts


def _jsonl(rows: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(row, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
                   + "\n" for row in rows).encode()


def _parquet(rows: list[dict[str, Any]], view: str, spec: RewardSpec) -> bytes:
    import pyarrow as pa
    import pyarrow.parquet as pq

    names = list(components(signals([], spec), "completed", spec))
    table = pa.Table.from_pylist(rows, schema=arrow_schema(view, names))
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="zstd")
    return bytes(sink.getvalue().to_pybytes())


def _write(path: Path, data: bytes) -> None:
    """Write to a temporary file, then rename: a reader never sees half a file."""
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_bytes(data)
    temporary.replace(path)


def write_export(out_dir: Path, rows: list[dict[str, Any]], *, view: str, file_format: str,
                 org_id: str, spec: RewardSpec, topic: str, span: ExportRange,
                 counts: dict[str, int]) -> dict[str, Any]:
    """The data file and the manifest in ``out_dir`` (replacing an earlier export there);
    returns the manifest."""
    if file_format not in FORMATS:
        raise ExportError(f"--format {file_format!r} is not one of {', '.join(FORMATS)}")
    data = _jsonl(rows) if file_format == "jsonl" else _parquet(rows, view, spec)
    out_dir.mkdir(parents=True, exist_ok=True)
    for stale in (out_dir / f"{_DATA_STEM}.{other}" for other in FORMATS):
        stale.unlink(missing_ok=True)  # load_dataset(out_dir) would read both
    name = f"{_DATA_STEM}.{file_format}"
    manifest: dict[str, Any] = {
        "format": MANIFEST_FORMAT, "org_id": org_id, "view": view, "file_format": file_format,
        "spec": {"name": spec.name, "version": spec.version},
        "source": {"topic": topic, "partitions": {
            str(p): {"from": span.starts[p], "to": span.stops[p]} for p in sorted(span.starts)}},
        "counts": counts,
        "files": [{"path": name, "rows": len(rows), "bytes": len(data),
                   "sha256": hashlib.sha256(data).hexdigest()}],
    }
    manifest["export_id"] = manifest_id(manifest)
    _write(out_dir / name, data)
    _write(out_dir / MANIFEST_FILE, json.dumps(manifest, indent=2, sort_keys=True).encode()
           + b"\n")
    return manifest


def run_export(settings: Settings, *, org_id: str, out_dir: Path, start: Bound, stop: Bound,
               spec: RewardSpec, view: str, file_format: str,
               retention_ms: int) -> dict[str, Any]:
    """The whole export: resolve the range, read it, replay it, write the files; returns the
    manifest."""
    from streams.sources import kafka_rows

    if (problem := org_id_problem(org_id)) is not None:
        raise ExportError(f"--org: {problem}")
    if file_format not in FORMATS:
        raise ExportError(f"--format {file_format!r} is not one of {', '.join(FORMATS)}")
    view_rows([], view)  # an unknown view fails before the log is read
    span = resolve_range(settings, start, stop)
    log = kafka_rows(settings, span.starts, span.stops)
    (rows, _), counts = export_log(log, org_id, view, spec, retention_ms)
    return write_export(out_dir, rows, view=view, file_format=file_format, org_id=org_id,
                        spec=spec, topic=topic_name(settings.topic_prefix, "events.raw"),
                        span=span, counts=counts)
