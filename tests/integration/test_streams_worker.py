"""The reward-join worker on the real broker: equal to the replay, record for record."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from streams_log import late_event_ids, produce, replay_topic, wait_for_records

from infra.settings import Settings
from schemas.rewards import reward_record_key
from streams.simlog import SimConfig, simulate_log
from streams.spec import load_spec
from streams.worker import WorkerConfig, build_app

pytestmark = pytest.mark.kafka

SPEC = load_spec()
# 45 s between starts: a short log still spans several horizons, so watermark finalisation,
# unfinished trajectories and late events all happen.
SPREAD = SimConfig(mean_start_gap_s=45.0)


def run_in_process(settings: Settings, tmp_path: Path, expected: int,
                   timeout_s: float) -> dict[bytes, object]:
    async def main() -> dict[bytes, object]:
        config = WorkerConfig(settings=settings, spec=SPEC, datadir=tmp_path / "worker",
                              app_id=f"{settings.topic_prefix}join-{uuid.uuid4().hex[:6]}")
        app, totals = build_app(config)
        await app.start()
        try:
            deadline = time.monotonic() + timeout_s
            while totals.records < expected and time.monotonic() < deadline:
                await asyncio.sleep(0.5)
        finally:
            await app.stop()
        return {}

    asyncio.run(main())
    return wait_for_records(settings, expected, timeout_s=30)


def assert_same_as_replay(settings: Settings, records: dict) -> None:
    replayed = replay_topic(settings, SPEC)
    expected = {reward_record_key(r.trajectory_id, r.spec_version): r for r in replayed.records}
    assert len(expected) > 0
    assert records.keys() == expected.keys()
    for key, record in expected.items():
        assert records[key] == record, key


@pytest.mark.slow
def test_streaming_records_equal_replay_and_late_events_land_in_events_late(
        kafka: Settings, tmp_path: Path) -> None:
    produce(kafka, simulate_log(300, seed=21, config=SPREAD))
    replayed = replay_topic(kafka, SPEC)
    records = run_in_process(kafka, tmp_path, len(replayed.records), timeout_s=120)
    assert_same_as_replay(kafka, records)
    assert {r.finalized_by for r in records.values()} == {"complete", "watermark"}
    late = [json.loads(raw)["event_id"] for raw in late_event_ids(kafka)]
    assert late and sorted(late) == sorted(event_id for _, event_id in replayed.late)


def _start_worker(settings: Settings, datadir: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "REWARDSTREAM_TOPIC_PREFIX": settings.topic_prefix,
           "REWARDSTREAM_TOPIC_PARTITIONS": str(settings.topic_partitions)}
    command = [str(Path(sys.executable).with_name("rewardstream")), "worker", "--datadir",
               str(datadir), "--batch-max", "150", "--loglevel", "warning"]
    return subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL,
                            stderr=open(datadir.parent / "worker.log", "ab"))


@pytest.mark.slow
def test_a_worker_killed_mid_stream_ends_with_the_records_of_a_clean_run(
        kafka: Settings, tmp_path: Path) -> None:
    # The second half of the log is produced only after the kill, so the kill always lands
    # mid-stream however fast the first worker gets through what it was given.
    log = simulate_log(300, seed=22, config=SPREAD)
    produce(kafka, log[:len(log) // 2])
    datadir = tmp_path / "worker"
    datadir.mkdir()
    first = _start_worker(kafka, datadir)
    try:
        partial = wait_for_records(kafka, 1, timeout_s=90, alive=lambda: first.poll() is None)
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=30)
    finally:
        first.kill()
    produce(kafka, log[len(log) // 2:])
    expected = len(replay_topic(kafka, SPEC).records)
    assert 0 < len(partial) < expected
    second = _start_worker(kafka, datadir)
    try:
        # read_records raises if a key ever carries two different records.
        records = wait_for_records(kafka, expected, timeout_s=120,
                                   alive=lambda: second.poll() is None)
    finally:
        second.send_signal(signal.SIGTERM)
        try:
            second.wait(timeout=30)
        except subprocess.TimeoutExpired:
            second.kill()
    assert_same_as_replay(kafka, records)


@pytest.mark.slow
def test_ten_thousand_trajectories_stream_equal_to_replay(kafka: Settings, tmp_path: Path) -> None:
    produce(kafka, simulate_log(10_000, seed=23))
    expected = len(replay_topic(kafka, SPEC).records)
    records = run_in_process(kafka, tmp_path, expected, timeout_s=900)
    assert_same_as_replay(kafka, records)
