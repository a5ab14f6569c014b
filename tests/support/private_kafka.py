"""Private local brokers for tests that stop, kill or restart them: free ports, own data dirs.

The shared broker every other test uses is never touched.
"""

from __future__ import annotations

import os
import random
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from kafka.admin import KafkaAdminClient
from kafka.errors import KafkaConnectionError

from infra import broker
from infra.ports import port_free
from infra.settings import Settings
from schemas.errors import RewardstreamError
from schemas.topics import topic_name

__all__ = ["leader_and_isr", "local_broker_env", "ports_free", "private_broker_settings",
           "replication_report", "started", "wait_in_sync", "wait_led_without"]


def ports_free(ports: list[int]) -> bool:
    """Nothing listens on these ports and a server could bind each now."""
    return all(port_free(port) for port in ports)


def local_broker_env(settings: Settings) -> dict[str, str]:
    """This process's environment for a child that runs against the local broker (every node)
    of ``settings`` and under its topic prefix, as ``rewardstream kafka start`` would find it
    running: the ports, node count, data directory and heap, no external bootstrap list."""
    env = {**os.environ, "REWARDSTREAM_KAFKA_PORT": str(settings.kafka_port),
           "REWARDSTREAM_KAFKA_CONTROLLER_PORT": str(settings.kafka_controller_port),
           "REWARDSTREAM_KAFKA_BROKERS": str(settings.kafka_brokers),
           "REWARDSTREAM_KAFKA_DATA_DIR": str(settings.kafka_data_dir),
           "REWARDSTREAM_KAFKA_HEAP_MB": str(settings.kafka_heap_mb),
           "REWARDSTREAM_TOPIC_PREFIX": settings.topic_prefix}
    env.pop("REWARDSTREAM_BOOTSTRAP_SERVERS", None)
    return env


def private_broker_settings(data_dir: Path, brokers: int, **overrides: object) -> Settings:
    """Settings of a private local broker of ``brokers`` nodes: ``2 * brokers`` consecutive
    free ports (node k on base + 2(k-1), its controller one above), data in ``data_dir``."""
    rng = random.Random()
    for _ in range(200):
        base = rng.randrange(20000, 32000, 2)
        if ports_free(list(range(base, base + 2 * brokers))):
            return Settings(kafka_port=base, kafka_controller_port=base + 1,
                            kafka_data_dir=data_dir, kafka_heap_mb=384, kafka_brokers=brokers,
                            **overrides)  # type: ignore[arg-type]
    raise RuntimeError(f"no {2 * brokers} consecutive free ports found")


@contextmanager
def started(settings: Settings, what: str) -> Iterator[Settings]:
    """The private broker of ``settings`` started, and stopped after; when it cannot start the
    test is skipped, or fails under ``CI=true``."""
    try:
        broker.start(settings)
    except RewardstreamError as exc:
        broker.stop(settings)
        if os.environ.get("CI") == "true":
            pytest.fail(f"{what} is required under CI=true but could not start: {exc}")
        pytest.skip(f"no {what}: {exc}")
    try:
        yield settings
    finally:
        broker.stop(settings)


def leader_and_isr(settings: Settings, name: str,
                   timeout_s: float = 30.0) -> tuple[int, list[int]]:
    """The leader and the in-sync replicas of partition 0 of a platform topic. A node of the
    bootstrap list may be down: the client is made again, its list shuffled, until a node
    answers."""
    deadline = time.monotonic() + timeout_s
    servers = settings.bootstrap_servers.split(",")
    while True:
        random.shuffle(servers)
        try:
            admin = KafkaAdminClient(bootstrap_servers=servers)
            try:
                [described] = admin.describe_topics([topic_name(settings.topic_prefix, name)])
            finally:
                admin.close()
        except KafkaConnectionError:
            assert time.monotonic() < deadline, f"no node answered for {name}"
            time.sleep(0.25)
            continue
        partition = described["partitions"][0]
        return int(partition["leader_id"]), sorted(partition["isr_nodes"])


def wait_led_without(settings: Settings, name: str, node: int,
                     timeout_s: float = 30.0) -> tuple[int, list[int]]:
    """Wait until a node other than ``node`` leads partition 0 of a platform topic and ``node``
    has left its in-sync replicas (a killed node is fenced after its session timeout, later on a
    busy machine); the leader and in-sync replicas then."""
    began = time.monotonic()
    while True:
        leader, in_sync = leader_and_isr(settings, name)
        if leader != node and node not in in_sync:
            return leader, in_sync
        assert time.monotonic() - began < timeout_s, f"node {node} still leads {name}"
        time.sleep(0.25)


def wait_in_sync(settings: Settings, name: str, timeout_s: float = 60.0) -> float:
    """Wait until every node is in sync on partition 0 of a platform topic; the seconds it
    took (AssertionError past ``timeout_s``)."""
    began = time.monotonic()
    everyone = list(range(1, settings.kafka_brokers + 1))
    while leader_and_isr(settings, name)[1] != everyone:
        assert time.monotonic() - began < timeout_s, f"{name} not back in sync"
        time.sleep(0.25)
    return time.monotonic() - began


# What a broker log says about fencing, registrations and in-sync replicas: why a partition
# refuses writes. (Not its ERROR lines: a leader refusing writes logs one per refused batch.)
_REPLICATION_LINE = re.compile(r"[Ff]enc|ISR|[Aa]lter ?[Pp]artition|controlled shutdown|"
                               r"stale broker epoch|new incarnation")


def replication_report(settings: Settings, names: list[str], log_lines: int = 15) -> str:
    """Which nodes run, the leader and in-sync replicas of partition 0 of each platform topic,
    and each node's last log lines about fencing and in-sync replicas: printed when a scenario
    finds the cluster refusing writes, since the next restart shifts those logs away."""
    state = broker.status(settings)
    lines = [state.describe()]
    for name in names:
        try:
            leader, in_sync = leader_and_isr(settings, name, timeout_s=10.0)
            lines.append(f"{name}: leader {leader}, in sync {in_sync}")
        except AssertionError as exc:
            lines.append(f"{name}: {exc}")
    for node in state.nodes:
        said = [line for line in node.log_file.read_text(errors="replace").splitlines()
                if _REPLICATION_LINE.search(line)]
        lines.append(f"node {node.node_id} ({node.log_file}), last {log_lines} of {len(said)} "
                     "lines on fencing and replicas:")
        lines.extend(f"  {line[:300]}" for line in said[-log_lines:])
    return "\n".join(lines)
