"""The local Kafka broker: jars from Maven Central, KRaft storage, one java process per node.

``rewardstream kafka start|stop|status`` and the pytest fixture both call :func:`start`,
:func:`stop` and :func:`status`, so tests run against exactly the broker operators run. One node
by default; ``REWARDSTREAM_KAFKA_BROKERS=3`` (``kafka start --brokers 3``) runs a three-node
cluster on loopback, each node a broker and a controller voter (see ``infra.broker_node``).
"""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import signal
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from infra.broker_node import (
    Node,
    format_storage,
    launch,
    node_pid,
    nodes,
    port_open,
    wait_exit,
    wait_started,
    write_config,
)
from infra.broker_security import security_config
from infra.errors import BrokerError
from infra.file_lock import exclusive
from infra.settings import Settings, cache_dir

__all__ = ["BrokerStatus", "NodeStatus", "ensure_jars", "start", "status", "stop",
           "wait_port_free"]

_START_TIMEOUT_S = 120.0
_STOP_GRACE_S = 45.0
# A node whose controllers stopped before it cannot finish a controlled shutdown (it would wait
# for minutes): when the whole cluster stops, stragglers are killed sooner. Everything they
# acknowledged is written already; their next start recovers the logs.
_CLUSTER_STOP_GRACE_S = 15.0


@dataclass(frozen=True)
class NodeStatus:
    node_id: int
    running: bool
    pid: int | None
    port: int
    controller_port: int
    data_dir: Path
    log_file: Path

    def describe(self) -> str:
        where = f"127.0.0.1:{self.port} (controller {self.controller_port})"
        state = f"running (pid {self.pid})" if self.running else "not running"
        return f"node {self.node_id} {state} on {where}, data in {self.data_dir}"


@dataclass(frozen=True)
class BrokerStatus:
    nodes: tuple[NodeStatus, ...]
    bootstrap_servers: str
    data_dir: Path

    @property
    def running(self) -> bool:
        """Every node runs."""
        return all(node.running for node in self.nodes)

    @property
    def pid(self) -> int | None:
        return self.nodes[0].pid

    @property
    def log_file(self) -> Path:
        return self.nodes[0].log_file

    def describe(self) -> str:
        if len(self.nodes) == 1:
            if self.running:
                return (f"running (pid {self.pid}) on {self.bootstrap_servers}, "
                        f"data in {self.data_dir}")
            return f"not running (data dir {self.data_dir})"
        up = sum(node.running for node in self.nodes)
        lines = [f"{up} of {len(self.nodes)} nodes running on {self.bootstrap_servers}"]
        return "\n".join(lines + [f"  {node.describe()}" for node in self.nodes])


def _infra_file(name: str) -> str:
    return (Path(__file__).parent / name).read_text()


def _jars_dir() -> Path:
    pom_hash = hashlib.sha256(_infra_file("pom.xml").encode()).hexdigest()[:12]
    return cache_dir() / f"kafka-jars-{pom_hash}"


def ensure_jars() -> Path:
    """The directory of broker jars, resolved with Maven the first time (cached by pom hash)."""
    jars = _jars_dir()
    if (jars / ".complete").exists():
        return jars
    mvn = shutil.which("mvn")
    if mvn is None:
        raise BrokerError(
            "Maven (mvn) is not installed: install it (apt-get install maven) so the Kafka jars "
            "can be fetched from Maven Central"
        )
    staging = jars.with_name(jars.name + f".tmp-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    (staging / "pom.xml").write_text(_infra_file("pom.xml"))
    result = subprocess.run(
        [mvn, "-q", "-B", "-f", str(staging / "pom.xml"), "dependency:copy-dependencies",
         f"-DoutputDirectory={staging}", "-DincludeScope=runtime"],
        capture_output=True, text=True, check=False,
    )
    if result.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        last = (result.stdout + result.stderr).strip().splitlines()[-1:] or ["(no output)"]
        raise BrokerError(
            f"could not fetch the Kafka jars from Maven Central (mvn exit {result.returncode}: "
            f"{last[0]}); check network access to Maven Central and retry"
        )
    (staging / ".complete").write_text("ok\n")
    shutil.rmtree(jars, ignore_errors=True)
    staging.rename(jars)
    return jars


def _java() -> str:
    java = shutil.which("java")
    if java is None:
        raise BrokerError("Java is not installed: install a JDK 17+ "
                          "(apt-get install openjdk-17-jre-headless)")
    return java


def _node_status(node: Node) -> NodeStatus:
    pid = node_pid(node)
    running = pid is not None and port_open(node.port)
    return NodeStatus(node.node_id, running, pid, node.port, node.controller_port,
                      node.data_dir, node.log_file)


def status(settings: Settings) -> BrokerStatus:
    return BrokerStatus(tuple(_node_status(node) for node in nodes(settings)),
                        settings.bootstrap_servers, settings.kafka_data_dir)


def _new_cluster_id() -> str:
    # Kafka's Uuid format: 16 random bytes, URL-safe base64 without padding, never a leading '-'.
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not cid.startswith("-"):
            return cid


def _cluster_id(settings: Settings) -> str:
    """A single broker gets a new id when it is formatted; a cluster's nodes share one, kept
    beside them so that a node whose storage is formatted later joins the same cluster."""
    if settings.kafka_brokers == 1:
        return _new_cluster_id()
    path = settings.kafka_data_dir / "cluster.id"
    if not path.exists():
        path.write_text(_new_cluster_id() + "\n")
    return path.read_text().strip()


def _check_ports_free(node: Node) -> None:
    for port in (node.port, node.controller_port):
        if port_open(port):
            raise BrokerError(
                f"port {port} is already taken by another process: stop it, or choose other ports "
                "with REWARDSTREAM_KAFKA_PORT / REWARDSTREAM_KAFKA_CONTROLLER_PORT"
            )


def start(settings: Settings, secure: bool = False) -> tuple[BrokerStatus, bool]:
    """Start every node that does not run; returns the status and whether this call started any.

    Concurrent callers (two demos, a test fixture and the CLI) serialise on a lock file, so only
    one of them launches nodes and the others find them running. ``secure`` (or a data
    directory formatted secured) starts them with SASL/SCRAM and ACLs
    (``infra.broker_security``).
    """
    with exclusive(settings.kafka_data_dir / "broker.lock"):
        all_nodes = nodes(settings)
        stopped = [node for node in all_nodes if not _node_status(node).running]
        if not stopped:
            return status(settings), False
        _launch(settings, all_nodes, stopped, secure)
        return status(settings), True


def _launch(settings: Settings, all_nodes: list[Node], stopped: list[Node],
            secure: bool) -> None:
    java = _java()
    for node in stopped:
        _check_ports_free(node)
    classpath = f"{ensure_jars()}/*"
    cluster_id = _cluster_id(settings)
    formatted = any((node.logs / "meta.properties").exists() for node in all_nodes)
    overlay, scram_args = security_config(settings, secure, formatted)
    procs = {}
    for node in stopped:
        node.data_dir.mkdir(parents=True, exist_ok=True)
        write_config(node, all_nodes, _infra_file("server.properties"),
                     _infra_file("log4j.properties"), overlay)
        format_storage(java, classpath, node, cluster_id, scram_args)
    for node in stopped:  # all at once: a cluster's nodes wait for each other's quorum
        procs[node] = launch(java, classpath, node, settings.kafka_heap_mb)
    wait_started(procs, _START_TIMEOUT_S)


def wait_port_free(port: int, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not port_open(port):
            return True
        time.sleep(0.2)
    return not port_open(port)


def stop(settings: Settings, node_id: int | None = None, sig: int = signal.SIGTERM) -> bool:
    """Stop every node (or only ``node_id``) with ``sig`` and wait until their ports are free;
    False if none ran. SIGTERM shuts down cleanly, SIGKILL is a crash."""
    targets = [node for node in nodes(settings) if node_id in (None, node.node_id)]
    if not targets:
        raise BrokerError(f"there is no node {node_id}: the nodes are 1 to "
                          f"{settings.kafka_brokers}")
    pids = {node: pid for node in targets if (pid := node_pid(node)) is not None}
    for node in targets:
        if node not in pids:
            node.pid_file.unlink(missing_ok=True)
    for pid in pids.values():  # signal all first: their shutdowns go on side by side
        os.kill(pid, sig)
    whole_cluster = settings.kafka_brokers > 1 and len(targets) == settings.kafka_brokers
    deadline = time.monotonic() + (_CLUSTER_STOP_GRACE_S if whole_cluster else _STOP_GRACE_S)
    for node, pid in pids.items():
        wait_exit(node, pid, deadline)
    for node in pids:  # a port of a node that was not running may be another process's
        for port in (node.port, node.controller_port):
            if not wait_port_free(port, 10.0):
                raise BrokerError(f"node {node.node_id} stopped but port {port} is still in use")
    return bool(pids)
