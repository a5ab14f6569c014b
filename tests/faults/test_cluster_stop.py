"""The whole three-node cluster stopped for 30 s while the SDK sends through ingest, clients
ask the gateway for completions and a reward worker folds a log, then started again; nobody
restarts a service by hand.

During the outage ingest answers 503 (with ``Retry-After``) and the SDK keeps what it could not
deliver in its disk queue; afterwards it delivers all of it. The reward worker, running all
along on the same cluster (its own topic prefix, so the log it folds is the simulated one),
carries on by itself: its records equal the offline replay of its log. The gateway answers
from its spool while Kafka is away and delivers every completion it answered once it is back.

Nothing the SDK sent is on the log twice (ingest's dedupe answers a retry of what Kafka took
"duplicate"). The gateway's spool sends again what Kafka did not acknowledge, so a completion
may be there twice, never more often than sends were retried, each copy the same bytes.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from infra import broker
from infra.settings import Settings
from infra.topics import create_topics
from rewardstream_telemetry import Telemetry
from schemas.rewards import reward_record_key
from streams.simlog import SimConfig, simulate_log
from streams.spec import load_spec
from tests.support.fault_ledger import FaultRow, check_log, copies_on_log, event_ids_on_log, report
from tests.support.fault_traffic import Load, requests_by_status, statuses_text
from tests.support.gateway_process import (
    CompletionTraffic,
    GatewayProcess,
    completions_on_log,
    wait_drained,
)
from tests.support.ingest_support import TEST_KEY, ingest_config, running_server
from tests.support.join_workers import start_worker, stop_workers, wait_for_members
from tests.support.metrics import metric
from tests.support.ports import free_port
from tests.support.private_kafka import replication_report
from tests.support.streams_log import produce, replay_topic, wait_for_records

pytestmark = [pytest.mark.faults, pytest.mark.kafka, pytest.mark.slow]

BEFORE_S, DOWN_S, AFTER_S = 3.0, 30.0, 3.0


def test_the_whole_cluster_stopped_for_30_s_loses_nothing_and_needs_no_restart(
        cluster: Settings, tiny_model_dir: Path, tmp_path: Path,
        report_figures: Callable[[str], None]) -> None:
    folded = replace(cluster, topic_prefix=f"{cluster.topic_prefix}join.")
    served = replace(cluster, topic_prefix=f"{cluster.topic_prefix}gateway.")
    for settings in (folded, served):
        create_topics(settings)
    gateway = GatewayProcess(served, tiny_model_dir, tmp_path / "spool",
                             tmp_path / "gateway.log", free_port())
    log = simulate_log(200, seed=59, config=SimConfig(mean_start_gap_s=30.0))
    halves = [log[:len(log) // 2], log[len(log) // 2:]]
    worker = start_worker(folded, tmp_path / "state", tmp_path / "worker.log")
    try:
        gateway.start()
        wait_for_members(folded, 1)  # running, not starting, when the cluster goes
        with running_server(cluster, ingest_config()) as server:
            tel = Telemetry(server.url, TEST_KEY, queue_dir=tmp_path / "queue", linger_s=0.05,
                            batch_size=50, backoff_base_s=0.2, backoff_cap_s=2.0)
            with Load(tel) as load, CompletionTraffic(gateway.url) as traffic:
                produce(folded, halves[0])
                time.sleep(BEFORE_S)
                broker.stop(cluster, sig=signal.SIGKILL)
                time.sleep(DOWN_S)
                began = time.monotonic()
                broker.start(cluster)
                produce(folded, halves[1])
                time.sleep(AFTER_S)
            if not tel.close(timeout_s=120):
                pytest.fail("the SDK's queue did not drain within 120 s of the restart\n"
                            + replication_report(cluster, ["events.raw"]))
            delivered_s = time.monotonic() - began
            statuses = requests_by_status(server.url)
            replaced = metric(server.url, "rewardstream_ingest_producer_replacements_total")
        gateway_drained_s = wait_drained(gateway) + time.monotonic() - began
        resent = gateway.metric("rewardstream_gateway_events_retried_total")
        stats = tel.stats()
        expected = replay_topic(folded, load_spec())
        records = wait_for_records(folded, len(expected.records), timeout_s=180,
                                   alive=lambda: worker.poll() is None)
        assert worker.poll() is None, (tmp_path / "worker.log").read_text()[-3000:]
    finally:
        stop_workers([worker])
        gateway.stop()
    check = check_log(load.ids, event_ids_on_log(cluster))
    completions = check_log(traffic.ids, completions_on_log(served))
    completion_copies = copies_on_log(served)
    report(FaultRow(
        "stop all three brokers (kill -9) for 30 s under SDK → ingest traffic, completion "
        "traffic to the gateway and a running reward worker; start them again",
        "pytest tests/faults/test_cluster_stop.py", len(load.ids), check, delivered_s,
        f"ingest answered {statuses_text(statuses)} and replaced its producer {replaced:g}×; "
        f"SDK retries {stats.retries} ({stats.duplicates} events answered duplicate: taken "
        f"before the 503); worker {len(records)} records = replay "
        f"{len(expected.records)}; the gateway answered {len(traffic.ids)} completions "
        f"({traffic.failed} requests failed), {completions.on_log} on the log, "
        f"{completions.lost} lost, {completions.duplicated} logged twice ({resent:g} sends "
        f"retried), its spool empty {gateway_drained_s:.1f} s after the restart; "
        f"recovery: restart until the SDK's queue was empty"), report_figures)
    # A batch Kafka took but ingest could not confirm in time is answered 503; its retry is
    # answered "duplicate" (dedupe), so the SDK counts it once either way.
    assert "503" in statuses and stats.sent + stats.duplicates == len(load.ids)
    assert (check.lost, check.duplicated, check.unexpected) == (0, 0, 0)
    assert traffic.ids and completions.lost == 0  # every completion answered is on the log
    assert completions.unexpected <= traffic.failed  # logged, its answer lost on the way
    assert completions.duplicated <= resent  # only a send Kafka did not acknowledge repeats
    assert all(len(set(values)) == 1 for values in completion_copies.values())
    assert records == {reward_record_key(r.org_id, r.trajectory_id, r.spec_version): r
                       for r in expected.records}
