"""The reward-join worker on the real broker: equal to the replay, record for record."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from kafka.admin import ConfigResource, ConfigResourceType

from infra.settings import Settings
from infra.topics import admin_client
from schemas.rewards import reward_record_key
from schemas.topics import REWARD_RECORD_MAX_BYTES, topic_name
from streams.replay import ReplayResult, replay_rows
from streams.simlog import SimConfig, poison_log, simulate_log
from streams.sources import read_quarantine
from streams.spec import load_spec
from streams.worker import CONSUMER_NAME, EXIT_BATCH_FAILED
from tests.support.join_support import unplaced_all
from tests.support.streams_log import (
    late_event_ids,
    produce,
    replay_topic,
    run_in_process,
    wait_for_records,
)

pytestmark = pytest.mark.kafka

SPEC = load_spec()
# 45 s between starts: a short log still spans several horizons, so watermark finalisation,
# unfinished trajectories and late events all happen.
SPREAD = SimConfig(mean_start_gap_s=45.0)


def assert_same_as_replay(settings: Settings, records: dict,
                          replayed: ReplayResult | None = None) -> None:
    replayed = replayed or replay_topic(settings, SPEC)
    expected = {reward_record_key(r.org_id, r.trajectory_id, r.spec_version): r
                for r in replayed.records}
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
    assert_same_as_replay(kafka, records, replayed)
    assert {r.finalized_by for r in records.values()} == {"complete", "watermark"}
    late = [json.loads(raw)["event_id"] for raw in late_event_ids(kafka)]
    assert late and sorted(late) == sorted(event_id for _, event_id, _ in replayed.late)


SHUTDOWN_TIMEOUT_S = 10


def _start_worker(settings: Settings, datadir: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "REWARDSTREAM_TOPIC_PREFIX": settings.topic_prefix,
           "REWARDSTREAM_TOPIC_PARTITIONS": str(settings.topic_partitions)}
    command = [str(Path(sys.executable).with_name("rewardstream")), "worker", "--datadir",
               str(datadir), "--batch-max", "150", "--commit-interval-s", "0.5",
               "--loglevel", "warning", "--shutdown-timeout-s", str(SHUTDOWN_TIMEOUT_S)]
    return subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL,
                            stderr=open(datadir.parent / "worker.log", "ab"))


def assert_quarantined_as_replay(settings: Settings, poison: int) -> None:
    """The worker quarantined exactly the records replay quarantines, each once, with the
    same reason."""
    replayed = {(p, o): reason for p, o, reason in replay_topic(settings, SPEC).quarantined}
    streamed: dict[tuple[int, int], str] = {}
    for record in read_quarantine(settings):
        assert record.consumer == CONSUMER_NAME
        assert record.source_topic == topic_name(settings.topic_prefix, "events.raw")
        position = (record.source_partition, record.source_offset)
        assert streamed.setdefault(position, record.reason) == record.reason
    assert len(replayed) == poison
    assert streamed == replayed


@pytest.mark.slow
def test_a_worker_killed_mid_stream_ends_with_the_records_of_a_clean_run(
        kafka: Settings, tmp_path: Path) -> None:
    # The second half of the log is produced only after the kill, so the kill always lands
    # mid-stream however fast the first worker gets through what it was given. Poison records
    # sit in both halves: each is quarantined, and no trajectory's record changes.
    clean = simulate_log(300, seed=22, config=SPREAD)
    log, poison = poison_log(clean, seed=22)
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
    assert_quarantined_as_replay(kafka, len(poison))
    clean_records = replay_rows([(0, o, value) for o, (_, value) in enumerate(clean)], SPEC)
    # Equal but for where their events sat: the poison records shift the clean log's offsets.
    assert unplaced_all(sorted(records.values(), key=lambda r: r.trajectory_id)) == \
        unplaced_all(sorted(clean_records.records, key=lambda r: r.trajectory_id))


@pytest.mark.slow
@pytest.mark.timeout(900)  # ~110,000 events through the worker and the replay
def test_ten_thousand_trajectories_stream_equal_to_replay(kafka: Settings, tmp_path: Path) -> None:
    produce(kafka, simulate_log(10_000, seed=23))
    replayed = replay_topic(kafka, SPEC)
    records = run_in_process(kafka, tmp_path, len(replayed.records), timeout_s=900)
    assert_same_as_replay(kafka, records, replayed)


def _set_rewards_max_bytes(settings: Settings, max_bytes: int) -> None:
    admin = admin_client(settings)
    try:
        admin.alter_configs([ConfigResource(
            ConfigResourceType.TOPIC, topic_name(settings.topic_prefix, "rewards"),
            configs={"max.message.bytes": str(max_bytes)})])
    finally:
        admin.close()


@pytest.mark.slow
def test_a_batch_kafka_refuses_stops_the_worker_without_committing_past_it(
        kafka: Settings, tmp_path: Path) -> None:
    log = simulate_log(200, seed=24, config=SPREAD)
    produce(kafka, log[:len(log) // 2])
    datadir = tmp_path / "worker"
    datadir.mkdir()
    worker = _start_worker(kafka, datadir)
    try:
        wait_for_records(kafka, 1, timeout_s=90, alive=lambda: worker.poll() is None)
        # The broker now refuses every reward record: the next batch with one cannot complete.
        _set_rewards_max_bytes(kafka, 200)
        produce(kafka, log[len(log) // 2:])
        code = worker.wait(timeout=90)
    finally:
        worker.kill()
    assert code == EXIT_BATCH_FAILED
    assert "could not be completed" in (tmp_path / "worker.log").read_text()
    _set_rewards_max_bytes(kafka, REWARD_RECORD_MAX_BYTES)
    expected = len(replay_topic(kafka, SPEC).records)
    again = _start_worker(kafka, datadir)
    try:
        records = wait_for_records(kafka, expected, timeout_s=120,
                                   alive=lambda: again.poll() is None)
        again.send_signal(signal.SIGTERM)
        stopping = time.monotonic()
        again.wait(timeout=SHUTDOWN_TIMEOUT_S + 15)
        assert time.monotonic() - stopping < SHUTDOWN_TIMEOUT_S + 5
    finally:
        again.kill()
    assert_same_as_replay(kafka, records)
