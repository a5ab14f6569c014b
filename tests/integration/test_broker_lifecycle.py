"""`rewardstream kafka start|stop|status` on a private broker: idempotent, clean, durable.

These tests run their own broker on free ports with a temporary data directory, so the shared
broker the rest of the suite uses is never touched.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import KafkaConsumer, KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic

from infra import broker
from infra.settings import Settings
from tests.support.ports import free_port

pytestmark = pytest.mark.kafka


def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "rewardstream", *args], env=env,
                          capture_output=True, text=True, timeout=180)


@pytest.fixture
def private_env(tmp_path: Path, kafka_settings: Settings) -> Iterator[dict[str, str]]:
    env = {
        **os.environ,
        "REWARDSTREAM_KAFKA_PORT": str(free_port()),
        "REWARDSTREAM_KAFKA_CONTROLLER_PORT": str(free_port()),
        "REWARDSTREAM_KAFKA_DATA_DIR": str(tmp_path / "kafka"),
        "REWARDSTREAM_KAFKA_HEAP_MB": "384",
    }
    env.pop("REWARDSTREAM_BOOTSTRAP_SERVERS", None)
    yield env
    _cli(env, "kafka", "stop")


def _port_open(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


@pytest.mark.slow
def test_concurrent_starts_launch_one_broker_stop_frees_ports_and_data_survives(
        private_env: dict[str, str]) -> None:
    port = int(private_env["REWARDSTREAM_KAFKA_PORT"])
    controller = int(private_env["REWARDSTREAM_KAFKA_CONTROLLER_PORT"])
    # Two starts racing: exactly one launches the broker, the other finds it running.
    racers = [subprocess.Popen([sys.executable, "-m", "rewardstream", "kafka", "start"],
                               env=private_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True) for _ in range(2)]
    outputs = [racer.communicate(timeout=180) for racer in racers]
    assert [racer.returncode for racer in racers] == [0, 0], [err for _, err in outputs]
    assert sorted("already running" in out for out, _ in outputs) == [False, True]
    third = _cli(private_env, "kafka", "start")
    assert third.returncode == 0
    assert "already running" in third.stdout

    bootstrap = f"127.0.0.1:{port}"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic("durable", 1, 1)])
    admin.close()
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    producer.send("durable", b"kept across restarts")
    producer.flush()
    producer.close()

    stopped = _cli(private_env, "kafka", "stop")
    assert stopped.returncode == 0 and "stopped" in stopped.stdout
    assert not _port_open(port) and not _port_open(controller)
    assert _cli(private_env, "kafka", "status").returncode == 3

    assert _cli(private_env, "kafka", "start").returncode == 0
    consumer = KafkaConsumer("durable", bootstrap_servers=bootstrap,
                             auto_offset_reset="earliest", consumer_timeout_ms=15000)
    values = [record.value for record in consumer]
    consumer.close()
    assert values == [b"kept across restarts"]


def test_taken_port_is_a_one_line_error(private_env: dict[str, str]) -> None:
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", int(private_env["REWARDSTREAM_KAFKA_PORT"])))
        squatter.listen()
        result = _cli(private_env, "kafka", "start")
    assert result.returncode == 1
    assert result.stderr.strip().count("\n") == 0
    assert "is already taken" in result.stderr and "REWARDSTREAM_KAFKA_PORT" in result.stderr


def test_missing_java_is_a_one_line_error(private_env: dict[str, str], tmp_path: Path) -> None:
    empty_bin = tmp_path / "bin"
    empty_bin.mkdir()
    result = _cli({**private_env, "PATH": str(empty_bin)}, "kafka", "start")
    assert result.returncode == 1
    assert result.stderr.strip() == (
        "error: Java is not installed: install a JDK 17+ (apt-get install openjdk-17-jre-headless)"
    )


def test_unreachable_jars_are_a_one_line_error(private_env: dict[str, str], tmp_path: Path) -> None:
    # A Maven that cannot reach its repository, and an empty jar cache.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    java = Path(subprocess.check_output(["bash", "-c", "command -v java"], text=True).strip())
    (bin_dir / "java").symlink_to(java)
    fake_mvn = bin_dir / "mvn"
    fake_mvn.write_text("#!/bin/sh\n"
                        "echo '[ERROR] Could not transfer artifact: Network is unreachable'\n"
                        "exit 1\n")
    fake_mvn.chmod(0o755)
    env = {**private_env, "PATH": f"{bin_dir}:/usr/bin:/bin",
           "REWARDSTREAM_CACHE_DIR": str(tmp_path / "cache")}
    result = _cli(env, "kafka", "start")
    assert result.returncode == 1
    assert result.stderr.strip().count("\n") == 0
    assert "could not fetch the Kafka jars from Maven Central" in result.stderr
    assert "Network is unreachable" in result.stderr


def test_status_of_a_stopped_broker(tmp_path: Path) -> None:
    settings = Settings(kafka_port=free_port(), kafka_controller_port=free_port(),
                        kafka_data_dir=tmp_path)
    state = broker.status(settings)
    assert not state.running and state.pid is None
    assert broker.stop(settings) is False
