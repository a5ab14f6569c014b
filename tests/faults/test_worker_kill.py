"""Reward workers SIGKILLed and frozen (SIGSTOP, woken later: a zombie) while the group
rebalances, with events still arriving; the records on ``rewards`` equal the offline replay of
the log.

Three workers share six partitions of the three-node cluster. After a third of the log, one is
killed and one frozen at once, and the second third is produced while the group has not yet
noticed (each worker leaves the group after ``SESSION_TIMEOUT_S`` of silence). A fresh worker
joins; once the group has settled on it and the survivor, the zombie is woken — its partitions
were taken, so whatever it still flushes may repeat a record, never change one — and the last
third arrives. ``read_records`` fails on any key that ever carries two different records.
"""

from __future__ import annotations

import signal
import subprocess
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from infra.kafka_io import read_topic
from infra.settings import Settings
from infra.topics import create_topics
from schemas.rewards import reward_record_key
from streams.simlog import SimConfig, simulate_log
from streams.spec import load_spec
from streams.worker import EXIT_BATCH_FAILED
from tests.support.fault_ledger import FaultRow, check_log, report
from tests.support.join_workers import start_worker, stop_workers, wait_for_members
from tests.support.streams_log import in_thirds, produce, replay_topic, wait_for_records

pytestmark = [pytest.mark.faults, pytest.mark.kafka, pytest.mark.slow]

SESSION_TIMEOUT_S = 8


def test_workers_killed_and_frozen_during_a_rebalance_change_no_record(
        cluster: Settings, tmp_path: Path, report_figures: Callable[[str], None]) -> None:
    settings = replace(cluster, topic_prefix=f"{cluster.topic_prefix}six.", topic_partitions=6)
    create_topics(settings)
    log = simulate_log(600, seed=47, config=SimConfig(mean_start_gap_s=20.0))
    thirds = in_thirds(log)
    workers: list[subprocess.Popen[bytes]] = []

    def worker(name: str) -> subprocess.Popen[bytes]:
        workers.append(start_worker(settings, tmp_path / f"state-{name}",
                                    tmp_path / f"{name}.log",
                                    "--session-timeout-s", str(SESSION_TIMEOUT_S)))
        return workers[-1]

    try:
        # One at a time: workers started together on a fresh deployment race to create the
        # changelog topic, and the loser exits (Unknown topic or partition).
        for name in ("killed", "zombie", "survivor"):
            worker(name)
            wait_for_members(settings, len(workers))
        killed, zombie, survivor = workers
        produce(settings, thirds[0])
        time.sleep(2.0)  # the workers are folding the first third
        killed.send_signal(signal.SIGKILL)
        zombie.send_signal(signal.SIGSTOP)
        began = time.monotonic()
        produce(settings, thirds[1])
        fresh = worker("fresh")
        # The killed and the frozen worker time out; the survivor and the fresh one share all.
        wait_for_members(settings, 2, timeout_s=120)
        recovery_s = time.monotonic() - began
        zombie.send_signal(signal.SIGCONT)
        produce(settings, thirds[2])
        expected = replay_topic(settings, load_spec())
        # The zombie may stop on waking: its checkpoint in flight cannot complete on partitions
        # it lost, and it exits (70) without committing it. The others must carry on.
        live = [survivor, fresh]
        records = wait_for_records(settings, len(expected.records), timeout_s=180,
                                   alive=lambda: all(w.poll() is None for w in live))
        assert survivor.poll() is None and zombie.poll() in (None, EXIT_BATCH_FAILED)
    finally:
        stop_workers(workers)
    keys = [reward_record_key(r.org_id, r.trajectory_id, r.spec_version)
            for r in expected.records]
    on_log = Counter(m.key for m in read_topic(settings, "rewards"))
    check = check_log([k.decode() for k in keys], Counter({k.decode(): n for k, n
                                                           in on_log.items() if k}))
    report(FaultRow(
        "SIGKILL one reward worker of three and SIGSTOP another (woken after the rebalance) "
        "while events arrive; a fresh worker joins", "pytest tests/faults/test_worker_kill.py",
        len(log), check, recovery_s,
        f"{len(expected.records)} records by replay; duplicated = identical repeats; recovery: "
        f"kill to a stable group of two (session timeout {SESSION_TIMEOUT_S} s)"), report_figures)
    assert {reward_record_key(r.org_id, r.trajectory_id, r.spec_version): r
            for r in expected.records} == records
    assert (check.lost, check.unexpected) == (0, 0)
