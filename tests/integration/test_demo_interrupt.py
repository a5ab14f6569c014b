"""Ctrl-C (SIGINT) or SIGTERM in the middle of a demo: it stops every service it started and
the broker it started itself, and says so. On a private broker (free ports, its own data
directory), never the shared one."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from infra import broker
from infra.settings import Settings
from tests.support.ports import free_port, ports_free
from tests.support.private_kafka import local_broker_env

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

_CHILD = Path(__file__).parents[1] / "support" / "demo_child.py"



@pytest.mark.timeout(600)
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["sigint", "sigterm"])
def test_an_interrupted_demo_stops_its_services_and_the_broker_it_started(
    sig: signal.Signals, tmp_path: Path, kafka_settings: Settings,
) -> None:
    private = Settings(kafka_port=free_port(), kafka_controller_port=free_port(),
                       kafka_data_dir=tmp_path / "kafka", kafka_heap_mb=384)
    env = local_broker_env(private)
    ports = [free_port() for _ in range(3)]
    child = subprocess.Popen(
        [sys.executable, str(_CHILD), str(tmp_path / "run"), *map(str, ports)], env=env,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    try:
        assert child.stdout is not None
        deadline = time.monotonic() + 400
        for line in child.stdout:  # the services are up once the console is announced
            lines.append(line)
            if line.startswith("console http") or time.monotonic() > deadline:
                break
        assert any(line.startswith("console http") for line in lines), "".join(lines[-30:])
        assert broker.status(private).running
        child.send_signal(sig)
        rest, _ = child.communicate(timeout=180)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        broker.stop(private)  # only if the test failed with it still running
    output = "".join(lines) + rest
    assert child.returncode == 130, output[-3000:]
    assert "interrupted after" in output
    assert "stopped the services: ingest, gateway, worker, monitors-metrics, monitors-detect, " \
           "console" in output
    assert f"broker stopped: the demo had started it on 127.0.0.1:{private.kafka_port}" in output
    assert not broker.status(private).running
    # A server could listen on every port again (connections just closed may linger in
    # TIME_WAIT, which a server's SO_REUSEADDR passes over).
    assert ports_free([*ports, private.kafka_port, private.kafka_controller_port]), \
        output[-2000:]
    assert broker.status(kafka_settings).running  # the shared broker was never touched

