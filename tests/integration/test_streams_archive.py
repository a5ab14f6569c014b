"""The archiver on the real broker: exact schema, resumable without gaps or duplicates, and a
replay of the archive equal to a replay of the topic."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from infra.kafka_io import read_topic
from infra.settings import Settings
from schemas.arrow import ARCHIVE_SCHEMA, QUARANTINE_SCHEMA
from streams.archive import CONSUMER_NAME, QUARANTINE_DIR, archive_topic
from streams.replay import replay_rows
from streams.simlog import SimConfig, poison_log, simulate_log
from streams.sources import archive_rows, read_quarantine
from streams.spec import load_spec
from tests.support.streams_log import produce, replay_topic

pytestmark = pytest.mark.kafka


def test_archive_resumes_without_gaps_or_duplicates_and_replays_like_the_topic(
        kafka: Settings, tmp_path: Path) -> None:
    log, poison = poison_log(simulate_log(120, seed=31, config=SimConfig(mean_start_gap_s=60.0)),
                             seed=31)
    half = len(log) // 2
    produce(kafka, log[:half])
    out = tmp_path / "archive"
    assert archive_topic(kafka, out, max_rows=300, stop_at_end=True, poll_ms=200) == half
    # What a crash mid-flush leaves: a renamed file without its .done mark, and a .tmp file.
    some = next(out.glob("org=*/date=*/type=*/*.parquet"))
    orphan = some.with_name("p0-00000000000099999990-00000000000099999999.parquet")
    orphan.write_bytes(some.read_bytes())
    some.with_name("x.tmp").write_bytes(b"partial")
    produce(kafka, log[half:])
    assert archive_topic(kafka, out, max_rows=300, stop_at_end=True, poll_ms=200) == len(log) - half
    assert not orphan.exists() and not list(out.glob("**/*.tmp"))

    files = sorted(out.glob("org=*/date=*/type=*/*.parquet"))
    assert len(files) > 8
    assert all(pq.read_schema(f).remove_metadata() == ARCHIVE_SCHEMA for f in files)
    # Each org's events in its own directory, and only its own.
    orgs = {f.relative_to(out).parts[0].removeprefix("org=") for f in files}
    assert len(orgs) > 1
    for f in files:
        org = f.relative_to(out).parts[0].removeprefix("org=")
        assert set(pq.read_table(f, columns=["org_id"]).column("org_id").to_pylist()) == {org}
    quarantined = sorted((out / QUARANTINE_DIR).glob("*.parquet"))
    assert all(pq.read_schema(f).remove_metadata() == QUARANTINE_SCHEMA for f in quarantined)
    offsets = [(t["kafka_partition"], t["kafka_offset"]) for f in files + quarantined
               for t in pq.read_table(f, columns=["kafka_partition", "kafka_offset"]).to_pylist()]
    topic = [(r.partition, r.offset) for r in read_topic(kafka, "events.raw")]
    assert sorted(offsets) == sorted(topic)  # each offset exactly once
    assert sorted((0, o) for o in poison) == sorted(
        (q.source_partition, q.source_offset) for q in read_quarantine(kafka)
        if q.consumer == CONSUMER_NAME)

    spec = load_spec()
    from_archive = replay_rows(archive_rows(out), spec)
    from_topic = replay_topic(kafka, spec)
    assert from_archive.records == from_topic.records and from_archive.records
    assert from_archive.late == from_topic.late
    assert from_archive.quarantined == from_topic.quarantined
    assert len(from_topic.quarantined) == len(poison)
