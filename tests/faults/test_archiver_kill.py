"""The archiver SIGKILLed twice while events arrive on the three-node cluster, and started
again on the same directory: every offset of ``events.raw`` is archived exactly once, and a
replay of the archive equals a replay of the topic.

The archiver resumes from its own files (it commits nothing to Kafka): a kill between writing
a file and marking it done leaves an orphan the next start removes, so the kill may land
anywhere.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from infra.kafka_auth import client_env
from infra.kafka_io import read_topic
from infra.settings import Settings
from streams.replay import replay_rows
from streams.simlog import SimConfig, simulate_log
from streams.sources import archive_rows
from streams.spec import load_spec
from tests.support.fault_ledger import FaultRow, LogCheck, report
from tests.support.streams_log import in_thirds, produce, replay_topic
from tests.support.waits import wait_for

pytestmark = [pytest.mark.faults, pytest.mark.kafka, pytest.mark.slow]


def _archiver(settings: Settings, out: Path, *options: str) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "rewardstream", "archive", "--out", str(out),
               "--flush-interval-s", "0.3", "--max-rows", "150", *options]
    return subprocess.Popen(command, env={**os.environ, **client_env(settings)},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _archived_offsets(out: Path) -> Counter[tuple[int, int]]:
    files = sorted(out.glob("org=*/date=*/type=*/*.parquet"))
    return Counter((row["kafka_partition"], row["kafka_offset"]) for f in files
                   for row in pq.read_table(f, columns=["kafka_partition", "kafka_offset"])
                   .to_pylist())


def _archived(out: Path) -> int:
    try:
        return sum(_archived_offsets(out).values())
    except FileNotFoundError:
        return 0  # a file renamed or removed while it was read


def _wait_archived(out: Path, at_least: int, timeout_s: float = 60) -> None:
    wait_for(lambda: _archived(out) >= at_least, timeout_s, f"{at_least} events archived", 0.2)


def test_a_killed_archiver_resumes_with_every_offset_once(
        cluster: Settings, tmp_path: Path, report_figures: Callable[[str], None]) -> None:
    log = simulate_log(300, seed=53, config=SimConfig(mean_start_gap_s=30.0))
    thirds = in_thirds(log)
    out = tmp_path / "archive"
    produced = 0
    for part in thirds[:2]:
        archiver = _archiver(cluster, out)
        try:
            produce(cluster, part)
            produced += len(part)
            _wait_archived(out, produced - len(part) // 2)  # killed while it is busy
        finally:
            archiver.send_signal(signal.SIGKILL)
            archiver.wait()
    produce(cluster, thirds[2])
    began = time.monotonic()
    last = _archiver(cluster, out, "--stop-at-end")
    try:
        assert last.wait(timeout=120) == 0
    finally:
        last.kill()  # a no-op once it has exited
    recovery_s = time.monotonic() - began

    on_topic = [(r.partition, r.offset) for r in read_topic(cluster, "events.raw")]
    archived = _archived_offsets(out)
    check = LogCheck(accepted=len(on_topic), on_log=len(archived),
                     lost=len(set(on_topic) - set(archived)),
                     duplicated=sum(n - 1 for n in archived.values()),
                     unexpected=len(set(archived) - set(on_topic)))
    report(FaultRow("SIGKILL the archiver twice while events arrive, restart it on the same "
                    "directory", "pytest tests/faults/test_archiver_kill.py", len(log), check,
                    recovery_s, "accepted = offsets on events.raw; on the log = offsets "
                    "archived; recovery: the last start until caught up"), report_figures)
    assert (check.lost, check.duplicated, check.unexpected) == (0, 0, 0)
    spec = load_spec()
    assert replay_rows(archive_rows(out), spec).records == replay_topic(cluster, spec).records
