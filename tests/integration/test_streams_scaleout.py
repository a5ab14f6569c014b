"""Scaling the reward join out by partitions: one worker, then two, then three, on six
partitions, while events keep arriving; the records equal replay, none ever changes."""

from __future__ import annotations

import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from infra.settings import Settings
from infra.topics import create_topics
from schemas.rewards import reward_record_key
from streams.simlog import SimConfig, simulate_log
from streams.spec import load_spec
from tests.support.join_workers import start_worker, stop_workers, wait_for_members
from tests.support.streams_log import in_thirds, produce, replay_topic, wait_for_records

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

SPEC = load_spec()


def test_adding_workers_moves_partitions_and_changes_no_record(
        kafka: Settings, tmp_path: Path) -> None:
    settings = replace(kafka, topic_prefix=f"{kafka.topic_prefix}six.", topic_partitions=6)
    create_topics(settings)
    log = simulate_log(900, seed=31, config=SimConfig(mean_start_gap_s=20.0))
    thirds = in_thirds(log)
    workers: list[subprocess.Popen[bytes]] = []
    logs = [tmp_path / f"worker-{n}.log" for n in range(3)]
    try:
        for n, part in enumerate(thirds):
            # Each worker has its own state directory, as on its own machine; a third of the
            # log arrives once the group has rebalanced onto it.
            workers.append(start_worker(settings, tmp_path / f"state-{n}", logs[n]))
            wait_for_members(settings, n + 1)
            produce(settings, part)
        expected = replay_topic(settings, SPEC)
        # read_records raises if a key ever carries two different records.
        records = wait_for_records(settings, len(expected.records), timeout_s=180,
                                   alive=lambda: all(w.poll() is None for w in workers))
    finally:
        stop_workers(workers)
    assert {reward_record_key(r.org_id, r.trajectory_id, r.spec_version): r
            for r in expected.records} == records
    # Every worker processed partitions of its own (restored from their changelogs), and says
    # how fast when it stops.
    for path in logs:
        text = path.read_text()
        assert "restored in" in text, text[-2000:]
        print(path.name, text[text.rindex("reward join: "):].splitlines()[0])
