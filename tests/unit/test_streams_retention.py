"""Markers expire after a retention in event time; the store deletes them; records never change."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from schemas.rewards import reward_record_key
from streams.errors import SpecError
from streams.facts import ms_to_datetime
from streams.join import ORG_IDLE_LAG_MS, PartitionJoin
from streams.replay import replay_rows
from streams.simlog import SimConfig, simulate_log
from tests.support.join_support import SPEC, streamed

# Two minutes between starts: the log spans seven hours, the retention two.
LOG = simulate_log(200, seed=3, config=SimConfig(mean_start_gap_s=120.0))
ROWS = list(enumerate(value for _, value in LOG))
# Two hours (the spec's horizon and grace take 70 minutes of it): the log's persistence checks
# that arrive three hours late find their trajectory's marker gone; events late by a
# transport delay still find it.
RETENTION_MS = 2 * 3600 * 1000


def replay(retention_ms: int) -> Any:
    return replay_rows([(0, offset, raw) for offset, raw in ROWS], SPEC, retention_ms)


def test_expired_markers_turn_late_events_expired_and_change_no_record() -> None:
    kept, short = replay(10**12), replay(RETENTION_MS)
    assert short.records == kept.records
    assert [event_id for _, event_id, _ in short.late] == \
        [event_id for _, event_id, _ in kept.late]
    expired = [event_id for _, event_id, expired in short.late if expired]
    assert expired and len(expired) < len(short.late)
    assert not any(expired for _, _, expired in kept.late)


def test_the_store_deletes_expired_markers_and_streams_equal_to_replay(tmp_path: Path) -> None:
    clean = replay(RETENTION_MS)
    records, late, node = streamed(ROWS, tmp_path / "db", random.Random(5), batch=200,
                                   crashes=3, retention_ms=RETENTION_MS)
    assert records == {reward_record_key(r.org_id, r.trajectory_id, r.spec_version):
                       r.model_dump_json() for r in clean.records}
    assert late == clean.late
    assert node.join.checkpoint().expired_events == sum(e for _, _, e in clean.late)
    kept = list(node.database.iter_items(b"m/", b"m0"))
    assert 0 < len(kept) == node.store.size.markers < len(clean.records) / 2
    assert node.store.size.marker_bytes == sum(len(k) + len(v) for k, v in kept)
    watermark_ms = node.join.watermark_ms
    assert watermark_ms is not None
    index = list(node.database.iter_items(b"x/", b"x0"))
    # An org's watermark may trail the partition's by the idle lag: deleted past both.
    assert index and all(
        int.from_bytes(key[2:10], "big") > watermark_ms - RETENTION_MS - ORG_IDLE_LAG_MS
        for key, _ in index)
    indexed = {key for _, keys in index for key in json.loads(keys)}
    assert {key[2:].decode() for key, _ in kept} <= indexed


def _event(n: int, trajectory: str, at_ms: int, kind: str, payload: dict[str, Any]) -> bytes:
    at = ms_to_datetime(at_ms).isoformat()
    return json.dumps({
        "event_id": f"01900000-0000-7000-8000-{n:012d}", "type": kind,
        "trajectory_id": trajectory, "session_id": "s", "user": "u", "checkpoint_id": "c",
        "org_id": "org-1", "occurred_at": at, "sent_at": at, "event_time": at,
        "payload": payload}).encode()


def test_a_retention_shorter_than_a_trajectory_can_wait_is_refused() -> None:
    with pytest.raises(SpecError, match="retention"):
        PartitionJoin(SPEC, 0, lambda key: None, retention_ms=3600 * 1000)


def test_a_forgotten_trajectory_is_expired_when_old_and_starts_anew_when_recent() -> None:
    hour_ms = 3600 * 1000
    start_ms = 1_750_000_000_000
    join = PartitionJoin(SPEC, 0, lambda key: None, retention_ms=2 * hour_ms)
    ended = {"outcome": "completed", "turns": 1}
    steps = [
        join.step(_event(1, "t1", start_ms, "trajectory.ended", ended), 0),
        # another trajectory moves the watermark three hours on: t1's marker is past retention
        join.step(_event(2, "t2", start_ms + 3 * hour_ms, "followup.sent",
                         {"sentiment": "neutral"}), 1),
        join.step(_event(3, "t1", start_ms + 60_000, "followup.sent",
                         {"sentiment": "neutral"}), 2),
        # timed after t1's deadline (the end + 70 minutes): a trajectory of its own
        join.step(_event(4, "t1", start_ms + 3 * hour_ms, "followup.sent",
                         {"sentiment": "neutral"}), 3),
    ]
    assert [r.trajectory_id for r in steps[0].records] == ["t1"]
    assert [(late.event_id[-1], late.expired) for late in steps[2].late] == [("3", True)]
    assert "org-1|t1" in join.open_states and not steps[3].late
    assert join.checkpoint().expired_events == 1 and join.checkpoint().late_events == 0
