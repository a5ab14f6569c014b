"""One of two ingest replicas SIGKILLed under SDK load: the SDK, given both URLs, moves on to
the other and every event it emitted lands on the log.

A batch the killed replica had appended but not yet answered is sent again to the other
replica, whose dedupe window (rebuilt from the log when it started) has not seen it: it may
be on the log twice. The copies carry the same event (only the send and receipt stamps differ),
and the reward join, folding the log downstream, counts each event id once: every trajectory's
record holds each of its calls once.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from infra.settings import Settings
from rewardstream_telemetry import Telemetry
from serving.ingest.keys import hash_key
from serving.ingest.process import ingest_process
from streams.spec import load_spec
from tests.support.fault_ledger import (
    DELIVERY_STAMPS,
    FaultRow,
    as_emitted,
    check_log,
    copies_on_log,
    event_ids_on_log,
    report,
)
from tests.support.fault_traffic import Load, requests_by_status, statuses_text
from tests.support.ingest_support import TEST_KEY
from tests.support.service_keys import PSEUDONYM_SECRET
from tests.support.streams_log import replay_topic
from tests.support.waits import wait_for

pytestmark = [pytest.mark.faults, pytest.mark.kafka, pytest.mark.slow]

BATCH = 50
# Events the replicas took before the kill (it comes under load) and the survivor after it.
BEFORE, AFTER = 3 * BATCH, 3 * BATCH


def test_a_killed_ingest_replica_loses_nothing_the_sdk_sent(
        cluster: Settings, tmp_path: Path, report_figures: Callable[[str], None]) -> None:
    keys = [{"name": "all", "key_sha256": hash_key(TEST_KEY), "org_id": "org-test",
             "event_types": ["*"], "rate_per_s": 1e9, "burst": 1e9}]
    # Replicas of one deployment share the pseudonym secret (the same user, the same pseudonym).
    shared = {"REWARDSTREAM_INGEST_PSEUDONYM_SECRET": PSEUDONYM_SECRET}
    with ingest_process(cluster, keys, shared) as first, \
            ingest_process(cluster, keys, shared) as second:
        tel = Telemetry([first.url, second.url], TEST_KEY, queue_dir=tmp_path / "queue",
                        linger_s=0.05, batch_size=BATCH, backoff_base_s=0.1, backoff_cap_s=1.0)
        with Load(tel) as load:
            wait_for(lambda: tel.stats().sent >= BEFORE, 60, f"{BEFORE} events taken")
            os.kill(first.pid, signal.SIGKILL)
            killed_at = time.monotonic()
            sent_at_kill = tel.stats().sent
            wait_for(lambda: tel.stats().sent >= sent_at_kill + AFTER, 60,
                     f"{AFTER} events taken after the kill")
        load.end_trajectories()
        assert tel.close(timeout_s=60)
        drained_s = time.monotonic() - killed_at
        answered = requests_by_status(second.url)
    stats = tel.stats()
    check = check_log(load.ids, event_ids_on_log(cluster))
    copies = copies_on_log(cluster)
    records = replay_topic(cluster, load_spec()).records
    report(FaultRow(
        "SIGKILL one of two ingest replicas under SDK load (the SDK holds both URLs)",
        "pytest tests/faults/test_ingest_kill.py", len(load.ids), check, drained_s,
        f"SDK failovers {stats.failovers}, retries {stats.retries}; the other replica answered "
        f"{statuses_text(answered)}; {len(copies)} events on the log more than once, each "
        f"copy the same event, each counted once by the reward join's fold of "
        f"{len(records)} trajectories; recovery: the kill until the SDK's queue was empty"),
        report_figures)
    assert stats.failovers >= 1 and stats.sent + stats.duplicates == len(load.ids)
    assert (check.lost, check.unexpected) == (0, 0)
    assert check.duplicated <= BATCH  # at most the batch in flight at the kill
    for event_id, values in copies.items():  # byte for byte, but for the delivery stamps
        assert len({as_emitted(v) for v in values}) == 1, (event_id, DELIVERY_STAMPS, values)
    # Downstream: one record per trajectory, each call in it once, however often it is logged.
    assert {r.trajectory_id: r.signals["tool_calls"] for r in records} == load.tool_calls
    assert sorted(i for r in records for i in r.event_ids) == sorted(load.ids)
