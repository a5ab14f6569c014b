"""`rewardstream kafka stop|start|status --brokers 3`: the private three-node cluster (the one
the fault suite uses: free ports, a temporary data directory) stopped and started by the
command line, then losing a node.

One node is SIGKILLed while a producer writes with acks=all: with two of three replicas in sync
nothing fails, and once the node is back every record is on the topic exactly once.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import replace

import pytest
from kafka.admin import KafkaAdminClient

from infra import broker
from infra.errors import BrokerError
from infra.kafka_io import make_producer, read_topic
from infra.replication import Replication
from infra.settings import Settings
from infra.topics import cluster_replication, create_topics, describe_topics
from schemas.topics import topic_name
from tests.support.ports import ports_free
from tests.support.private_kafka import (
    leader_and_isr,
    replication_report,
    wait_in_sync,
    wait_led_without,
)

pytestmark = pytest.mark.kafka


def _cli(settings: Settings, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "REWARDSTREAM_KAFKA_PORT": str(settings.kafka_port),
           "REWARDSTREAM_KAFKA_CONTROLLER_PORT": str(settings.kafka_controller_port),
           "REWARDSTREAM_KAFKA_DATA_DIR": str(settings.kafka_data_dir),
           "REWARDSTREAM_KAFKA_HEAP_MB": str(settings.kafka_heap_mb)}
    env.pop("REWARDSTREAM_BOOTSTRAP_SERVERS", None)
    env.pop("REWARDSTREAM_KAFKA_BROKERS", None)
    return subprocess.run([sys.executable, "-m", "rewardstream", *args], env=env,
                          capture_output=True, text=True, timeout=300)


def _produce(producer: object, topic: str, values: range) -> float:
    """Send each value (acks=all) and wait for all; the slowest acknowledgement in seconds."""
    slowest = 0.0
    for value in values:
        sent = time.monotonic()
        producer.send(topic, key=str(value % 7).encode(),  # type: ignore[attr-defined]
                      value=str(value).encode()).get(timeout=90)
        slowest = max(slowest, time.monotonic() - sent)
    return slowest


@pytest.mark.slow
def test_three_nodes_lose_one_under_acks_all_and_lose_nothing(cluster: Settings) -> None:
    began = time.monotonic()
    stopped = _cli(cluster, "kafka", "stop", "--brokers", "3")
    stop_s = time.monotonic() - began
    assert stopped.returncode == 0 and "ports are free" in stopped.stdout, stopped.stderr
    assert ports_free([cluster.kafka_port + k for k in range(6)])
    assert _cli(cluster, "kafka", "status", "--brokers", "3").returncode == 3

    began = time.monotonic()
    started = _cli(cluster, "kafka", "start", "--brokers", "3")
    start_s = time.monotonic() - began
    assert started.returncode == 0, started.stderr
    assert "3 of 3 nodes running" in started.stdout
    listed = _cli(cluster, "kafka", "status", "--brokers", "3")
    assert listed.returncode == 0
    assert [f"node {k} running" in listed.stdout for k in (1, 2, 3)] == [True] * 3
    assert cluster.bootstrap_servers.count(",") == 2

    create_topics(cluster)  # the topics made before the stop are there: nothing to do
    raw = next(t for t in describe_topics(cluster)
               if t.name == topic_name(cluster.topic_prefix, "events.raw"))
    assert (raw.replicas, raw.min_insync) == (3, "2")

    topic = topic_name(cluster.topic_prefix, "events.raw")
    producer = make_producer(cluster, "cluster-test")
    _produce(producer, topic, range(0, 100))
    victim, _ = leader_and_isr(cluster, "events.raw")
    broker.stop(cluster, node_id=victim, sig=signal.SIGKILL)
    assert _cli(cluster, "kafka", "status", "--brokers", "3").returncode == 3
    failover_s = _produce(producer, topic, range(100, 250))  # no error: two replicas in sync
    leader, in_sync = wait_led_without(cluster, "events.raw", victim)
    report = replication_report(cluster, ["events.raw"])
    assert "2 of 3 nodes running" in report and f"leader {leader}, in sync {in_sync}" in report
    assert f"Fencing broker {victim} because its session has timed out" in report

    began = time.monotonic()
    _, launched = broker.start(cluster)  # starts only the node that is down
    restart_s = time.monotonic() - began
    assert launched and broker.status(cluster).running
    _produce(producer, topic, range(250, 300))
    producer.close()
    wait_in_sync(cluster, "events.raw")  # the restarted node caught up

    values = sorted(int(r.value) for r in read_topic(cluster, "events.raw"))
    assert values == list(range(300))  # everything, each once
    print(f"\ncluster stop {stop_s:.1f} s, start {start_s:.1f} s (CLI), node {victim} "
          f"SIGKILLed: slowest acks=all send {failover_s:.1f} s, node restart {restart_s:.1f} s")



def test_topics_wait_for_the_brokers_the_setting_names(kafka_settings: Settings) -> None:
    admin = KafkaAdminClient(bootstrap_servers=kafka_settings.bootstrap_servers)
    try:  # the shared single broker, told to expect three
        with pytest.raises(BrokerError, match="reports 1 of the 3 brokers"):
            cluster_replication(replace(kafka_settings, kafka_brokers=3), admin, wait_s=0)
        assert cluster_replication(kafka_settings, admin, wait_s=0) == Replication(1, 1)
    finally:
        admin.close()
