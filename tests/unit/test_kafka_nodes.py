"""The local broker's node layout: one node exactly as before, or a cluster of voters."""

from __future__ import annotations

import signal
import socket
import subprocess
from pathlib import Path

import pytest

from infra import broker
from infra.broker_node import launch, nodes, wait_started, write_config
from infra.errors import BrokerError, ConfigError
from infra.replication import Replication, replication_for
from infra.settings import Settings, load_settings

INFRA = Path(__file__).resolve().parents[2] / "infra"


def _config(node_dir: Path) -> dict[str, str]:
    lines = (node_dir / "server.properties").read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if line and not line.startswith("#"))


def _render(settings: Settings) -> list[dict[str, str]]:
    all_nodes = nodes(settings)
    for node in all_nodes:
        node.data_dir.mkdir(parents=True, exist_ok=True)
        write_config(node, all_nodes, (INFRA / "server.properties").read_text(), "")
    return [_config(node.data_dir) for node in all_nodes]


def test_one_node_keeps_the_single_broker_layout_and_settings(tmp_path: Path) -> None:
    settings = Settings(kafka_port=19092, kafka_controller_port=19093, kafka_data_dir=tmp_path)
    assert settings.bootstrap_servers == "127.0.0.1:19092"
    [node] = nodes(settings)
    assert (node.node_id, node.port, node.controller_port, node.data_dir) == (
        1, 19092, 19093, tmp_path)
    [rendered] = _render(settings)
    assert rendered["node.id"] == "1"
    assert rendered["controller.quorum.voters"] == "1@127.0.0.1:19093"
    assert rendered["listeners"] == "PLAINTEXT://127.0.0.1:19092,CONTROLLER://127.0.0.1:19093"
    for key in ("offsets.topic.replication.factor", "transaction.state.log.replication.factor",
                "transaction.state.log.min.isr", "default.replication.factor",
                "min.insync.replicas"):
        assert rendered[key] == "1", key  # Kafka's defaults: one node behaves as it always did
    assert (rendered["broker.session.timeout.ms"], rendered["broker.heartbeat.interval.ms"]) == (
        "9000", "2000")


def test_three_nodes_are_voters_on_their_own_ports_and_dirs(tmp_path: Path) -> None:
    settings = Settings(kafka_port=29000, kafka_controller_port=29001, kafka_data_dir=tmp_path,
                        kafka_brokers=3)
    assert settings.bootstrap_servers == "127.0.0.1:29000,127.0.0.1:29002,127.0.0.1:29004"
    rendered = _render(settings)
    assert [r["node.id"] for r in rendered] == ["1", "2", "3"]
    assert {r["controller.quorum.voters"] for r in rendered} == {
        "1@127.0.0.1:29001,2@127.0.0.1:29003,3@127.0.0.1:29005"}
    assert [r["advertised.listeners"] for r in rendered] == [
        f"PLAINTEXT://127.0.0.1:{port}" for port in (29000, 29002, 29004)]
    assert [r["log.dirs"] for r in rendered] == [
        str(tmp_path / f"node-{k}" / "logs") for k in (1, 2, 3)]
    for r in rendered:
        assert (r["offsets.topic.replication.factor"], r["default.replication.factor"]) == (
            "3", "3")
        assert (r["transaction.state.log.min.isr"], r["min.insync.replicas"]) == ("2", "2")
        assert r["broker.session.timeout.ms"] == "4000"  # a killed node is fenced sooner


def test_overlapping_node_ports_are_refused_with_the_settings_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="REWARDSTREAM_KAFKA_PORT=29000 and "
                                          "REWARDSTREAM_KAFKA_CONTROLLER_PORT=29002"):
        nodes(Settings(kafka_port=29000, kafka_controller_port=29002, kafka_data_dir=tmp_path,
                       kafka_brokers=3))


def test_replication_follows_the_number_of_brokers() -> None:
    assert [replication_for(n) for n in (1, 2, 3, 5)] == [
        Replication(1, 1), Replication(2, 1), Replication(3, 2), Replication(3, 2)]


def test_the_brokers_setting_is_read_and_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REWARDSTREAM_KAFKA_BROKERS", "3")
    assert load_settings().kafka_brokers == 3
    monkeypatch.setenv("REWARDSTREAM_KAFKA_BROKERS", "0")
    with pytest.raises(ConfigError, match="REWARDSTREAM_KAFKA_BROKERS=0 must be between 1"):
        load_settings()


def test_status_of_a_cluster_that_never_ran(tmp_path: Path) -> None:
    settings = Settings(kafka_port=29100, kafka_controller_port=29101, kafka_data_dir=tmp_path,
                        kafka_brokers=3)
    state = broker.status(settings)
    assert not state.running and [n.node_id for n in state.nodes] == [1, 2, 3]
    assert [n.data_dir for n in state.nodes] == [tmp_path / f"node-{k}" for k in (1, 2, 3)]
    assert "0 of 3 nodes running" in state.describe()
    assert broker.stop(settings) is False


def test_a_node_that_never_starts_is_stopped_and_its_last_log_lines_quoted(
        tmp_path: Path) -> None:
    node = nodes(Settings(kafka_data_dir=tmp_path))[0]
    node.log_file.write_text("[..] INFO Loading logs\n[..] INFO Recovering segment 7 of 9000\n")
    stuck = subprocess.Popen(["sleep", "60"])
    with pytest.raises(BrokerError, match="did not start within 1 s") as raised:
        wait_started({node: stuck}, timeout_s=1.0)
    assert "Recovering segment 7 of 9000" in str(raised.value)
    assert stuck.wait(timeout=5) == -signal.SIGTERM


def test_each_start_keeps_the_logs_of_the_four_before_it(tmp_path: Path) -> None:
    node = nodes(Settings(kafka_data_dir=tmp_path))[0]
    tmp_path.mkdir(exist_ok=True)
    for start in range(6):
        node.log_file.write_text(f"said during start {start}\n")
        launch("true", "", node, heap_mb=64).wait(timeout=10)
    kept = sorted(p.name for p in tmp_path.glob("broker.log*"))
    assert kept == ["broker.log", "broker.log.1", "broker.log.2", "broker.log.3", "broker.log.4"]
    assert [node.log_file.with_name(f"broker.log.{k}").read_text() for k in (1, 4)] == [
        "said during start 5\n", "said during start 2\n"]


def test_stopping_a_broker_that_never_ran_leaves_another_process_on_its_port_alone(
        tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        settings = Settings(kafka_port=taken.getsockname()[1], kafka_data_dir=tmp_path)
        # A demo whose start failed on the taken port stops "its" broker: nothing to stop, and
        # no error to hide the start's own.
        assert broker.stop(settings) is False
