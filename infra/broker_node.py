"""One local KRaft node (broker and controller in one java process): its ports, files and process.

A single broker is node 1 on the configured ports with its files directly in the data
directory, as it always was. A local cluster of ``n`` nodes gives node ``k`` (from 1) the ports
``port + 2(k-1)`` and ``controller_port + 2(k-1)`` and the data directory ``node-<k>``
inside the configured one; every node is a controller voter.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

from infra.broker_security import argument_file
from infra.credentials import write_private
from infra.errors import BrokerError, ConfigError
from infra.replication import replication_for
from infra.settings import Settings
from infra.supervisor import pid_alive

__all__ = ["Node", "format_storage", "launch", "node_pid", "nodes", "port_open", "wait_exit",
           "wait_started", "write_config"]

_STARTED_LINE = "Kafka Server started"
_PREVIOUS_LOGS = 4
_SINGLE_TIMING = {"session_timeout_ms": 9000, "heartbeat_ms": 2000}  # Kafka's defaults
_CLUSTER_TIMING = {"session_timeout_ms": 4000, "heartbeat_ms": 1000}


@dataclass(frozen=True)
class Node:
    node_id: int
    port: int
    controller_port: int
    data_dir: Path

    @property
    def pid_file(self) -> Path:
        return self.data_dir / "broker.pid"

    @property
    def log_file(self) -> Path:
        return self.data_dir / "broker.log"

    @property
    def config_file(self) -> Path:
        return self.data_dir / "server.properties"

    @property
    def logs(self) -> Path:
        return self.data_dir / "logs"


def nodes(settings: Settings) -> list[Node]:
    """The local nodes the settings describe; ConfigError when two of them share a port."""
    if settings.kafka_brokers == 1:
        return [Node(1, settings.kafka_port, settings.kafka_controller_port,
                     settings.kafka_data_dir)]
    out = [Node(k + 1, settings.kafka_port + 2 * k, settings.kafka_controller_port + 2 * k,
                settings.kafka_data_dir / f"node-{k + 1}") for k in range(settings.kafka_brokers)]
    ports = [port for node in out for port in (node.port, node.controller_port)]
    if len(set(ports)) != len(ports):
        raise ConfigError(
            f"REWARDSTREAM_KAFKA_PORT={settings.kafka_port} and REWARDSTREAM_KAFKA_CONTROLLER_PORT="
            f"{settings.kafka_controller_port} give {settings.kafka_brokers} nodes overlapping "
            "ports (node k listens on each + 2(k-1)): choose ports at least "
            f"{2 * settings.kafka_brokers} apart, or one odd and one even")
    return out


def port_open(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def node_pid(node: Node) -> int | None:
    """The live process the node's pid file names, if any."""
    try:
        pid = int(node.pid_file.read_text().strip())
    except (OSError, ValueError):
        return None
    return pid if pid_alive(pid) else None


def write_config(node: Node, all_nodes: list[Node], template: str, log4j: str,
                 overlay: str = "") -> None:
    """The node's server.properties from ``template``, then ``overlay`` (a secured start's
    lines, which hold admin's password: the file is private)."""
    replication = replication_for(len(all_nodes))
    voters = ",".join(f"{n.node_id}@127.0.0.1:{n.controller_port}" for n in all_nodes)
    write_private(node.config_file, template.format(
        node_id=node.node_id, voters=voters, port=node.port,
        controller_port=node.controller_port, log_dirs=node.logs,
        replication=replication.factor, min_isr=replication.min_insync,
        **(_CLUSTER_TIMING if len(all_nodes) > 1 else _SINGLE_TIMING),
    ) + overlay)
    (node.data_dir / "log4j.properties").write_text(log4j)


def format_storage(java: str, classpath: str, node: Node, cluster_id: str,
                   scram_args: list[str]) -> None:
    """Format the node's storage for ``cluster_id`` unless it was formatted before;
    ``scram_args`` (admin's credentials of a secured start) go through a private argument file."""
    if (node.logs / "meta.properties").exists():
        return
    args = ["kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(node.config_file),
            "--ignore-formatted", *scram_args]
    with argument_file(node.data_dir, args) as argfile:
        result = subprocess.run([java, "-Xmx256m", "-cp", classpath, f"@{argfile}"],
                                capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise BrokerError(
            f"formatting Kafka storage in {node.logs} failed: {result.stderr.strip()[-300:]}")


def _keep_previous_logs(node: Node) -> None:
    """Shift ``broker.log`` to ``broker.log.1`` (and so on, the oldest dropped): what a node
    said before a crash is what explains the crash, and its next start must not erase it."""
    name = node.log_file.name
    kept = [node.log_file] + [node.log_file.with_name(f"{name}.{k}")
                              for k in range(1, _PREVIOUS_LOGS + 1)]
    for newer, older in reversed(list(pairwise(kept))):
        if newer.exists():
            newer.replace(older)


def launch(java: str, classpath: str, node: Node, heap_mb: int) -> subprocess.Popen[bytes]:
    _keep_previous_logs(node)
    with open(node.log_file, "wb") as log:
        proc = subprocess.Popen(
            [java, f"-Xms{heap_mb // 2}m", f"-Xmx{heap_mb}m",
             "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true",
             f"-Dlog4j.configuration=file:{node.data_dir / 'log4j.properties'}",
             "-cp", classpath, "kafka.Kafka", str(node.config_file)],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True,  # the broker outlives the CLI that started it
        )
    node.pid_file.write_text(f"{proc.pid}\n")
    return proc


def _started(node: Node) -> bool:
    return _STARTED_LINE in node.log_file.read_text(errors="replace") and port_open(node.port)


def wait_started(procs: dict[Node, subprocess.Popen[bytes]], timeout_s: float) -> None:
    """Wait until every node logged its start and listens; BrokerError (and every launched
    process terminated) when one exits or the time runs out."""
    deadline = time.monotonic() + timeout_s
    waiting = dict(procs)
    while waiting and time.monotonic() < deadline:
        for node, proc in list(waiting.items()):
            if proc.poll() is not None:
                _terminate(procs)
                raise BrokerError(
                    f"Kafka node {node.node_id} exited with code {proc.returncode} during "
                    f"start-up; last log lines ({node.log_file}): {_log_tail(node)}")
            if _started(node):
                del waiting[node]
        time.sleep(0.25)
    if waiting:
        _terminate(procs)
        late = "; ".join(f"node {node.node_id} ({node.log_file}): {_log_tail(node)}"
                         for node in waiting)
        raise BrokerError(f"the Kafka broker did not start within {timeout_s:.0f} s; "
                          f"last log lines of {late}")


def _log_tail(node: Node, lines: int = 5) -> str:
    return " | ".join(node.log_file.read_text(errors="replace").strip().splitlines()[-lines:])


def _terminate(procs: dict[Node, subprocess.Popen[bytes]]) -> None:
    for proc in procs.values():
        if proc.poll() is None:
            proc.terminate()


def wait_exit(node: Node, pid: int, deadline: float) -> None:
    """Wait for a signalled node to exit, SIGKILL it at ``deadline`` (monotonic); forget its
    pid."""
    while time.monotonic() < deadline and pid_alive(pid):
        time.sleep(0.2)
    if pid_alive(pid):
        os.kill(pid, signal.SIGKILL)
        time.sleep(0.5)
    node.pid_file.unlink(missing_ok=True)
