"""`rewardstream serve gateway` through a broker outage: nothing it served is lost.

A private broker (free ports, its own data directory) is SIGKILLed while a client keeps asking
a real gateway process for completions, and started again. Every completion the gateway answered
must then be on events.raw as completion.served (counted by completion id); the ones served
while the broker was down waited in the gateway's spool on disk.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from ingest_support import free_port, private_broker

from infra import broker
from infra.settings import Settings
from tests.support.gateway_process import (
    CompletionTraffic,
    GatewayProcess,
    completions_on_log,
    wait_drained,
)

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

# A single broker takes about 20 s to start after a SIGKILL: the outage lasts that long too.
BEFORE_S, OUTAGE_S, AFTER_S = 3.0, 2.0, 2.0


@pytest.fixture
def private(tmp_path: Path) -> Iterator[Settings]:
    with private_broker(tmp_path / "kafka", "spool.") as settings:
        yield settings


@pytest.fixture
def gateway(private: Settings, tiny_model_dir: Path, tmp_path: Path) -> Iterator[GatewayProcess]:
    process = GatewayProcess(private, tiny_model_dir, tmp_path / "spool",
                             tmp_path / "gateway.log", free_port())
    process.start()
    try:
        yield process
    finally:
        process.stop()


def test_completions_served_during_a_broker_outage_all_reach_events_raw(
        private: Settings, gateway: GatewayProcess) -> None:
    peak_depth = 0.0
    with CompletionTraffic(gateway.url) as traffic:
        time.sleep(BEFORE_S)
        broker.stop(private, sig=signal.SIGKILL)
        down_at = time.monotonic()
        restart = threading.Timer(OUTAGE_S, lambda: broker.start(private))
        restart.start()  # a start takes seconds: the outage lasts until it returns
        while restart.is_alive() or not restart.finished.is_set():
            peak_depth = max(peak_depth, gateway.metric("rewardstream_gateway_spool_events"))
            time.sleep(0.25)
        restart.join()
        up_at = time.monotonic()
        assert broker.status(private).running
        time.sleep(AFTER_S)
    drained_s = wait_drained(gateway) + time.monotonic() - up_at

    during = [cid for at, cid in traffic.served if down_at <= at < up_at]
    logged = completions_on_log(private)
    assert traffic.failed == 0 and len(during) > 10
    assert set(logged) == set(traffic.ids)  # every completion served is on the log, no other
    repeated = sum(n - 1 for n in logged.values())
    retried = gateway.metric("rewardstream_gateway_events_retried_total")
    assert repeated <= retried  # only an unacknowledged send can repeat
    assert gateway.metric("rewardstream_gateway_events_lost_total") == 0
    said = gateway.log_file.read_text()
    assert "events wait for Kafka" in said and "the backlog is delivered" in said
    assert gateway.metric("rewardstream_gateway_events_delivered_total") == \
        len(traffic.ids) + repeated
    print(f"\nserved {len(traffic.ids)} completions, {len(during)} during the "
          f"{up_at - down_at:.1f} s outage; spool depth peaked at {peak_depth:g}; {retried:g} "
          f"sends retried; all {len(traffic.ids)} on events.raw ({repeated} repeated) "
          f"{drained_s:.1f} s after the broker was started again; 0 lost")
