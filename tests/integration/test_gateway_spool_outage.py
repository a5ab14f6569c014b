"""`rewardstream serve gateway` through a broker outage: nothing it served is lost.

A private broker (free ports, its own data directory) is SIGKILLed while a client keeps asking
a real gateway process for completions, and started again once its spool holds enough events
to say so in its log (``SPOOLED``). Every completion the gateway answered must then be on
events.raw as completion.served (counted by completion id); the ones served while the broker
was down waited in the gateway's spool on disk.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from infra import broker
from infra.settings import Settings
from tests.support.gateway_process import (
    CompletionTraffic,
    GatewayProcess,
    completions_on_log,
    wait_drained,
)
from tests.support.ports import free_port
from tests.support.waits import wait_for

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

BEFORE, AFTER = 5, 3  # completions served before the kill and after the restart
SPOOLED = 50  # events in the spool when it first logs that they wait (serving/gateway/spool.py)


@pytest.fixture
def gateway(outage_broker: Settings, tiny_model_dir: Path,
            tmp_path: Path) -> Iterator[GatewayProcess]:
    process = GatewayProcess(outage_broker, tiny_model_dir, tmp_path / "spool",
                             tmp_path / "gateway.log", free_port())
    process.start()
    try:
        yield process
    finally:
        process.stop()


def test_completions_served_during_a_broker_outage_all_reach_events_raw(
        outage_broker: Settings, gateway: GatewayProcess) -> None:
    with CompletionTraffic(gateway.url) as traffic:
        wait_for(lambda: len(traffic.ids) >= BEFORE, 120, "completions before the kill")
        broker.stop(outage_broker, sig=signal.SIGKILL)
        down_at = time.monotonic()
        spooled = wait_for(lambda: _at_least(gateway.metric("rewardstream_gateway_spool_events")),
                           240, f"{SPOOLED} events in the spool while the broker is down", 0.25)
        broker.start(outage_broker)  # seconds: the outage lasts until it returns
        up_at = time.monotonic()
        assert broker.status(outage_broker).running
        served_at_up = len(traffic.ids)
        wait_for(lambda: len(traffic.ids) >= served_at_up + AFTER, 120,
                 "completions after the restart")
    drained_s = wait_drained(gateway) + time.monotonic() - up_at

    during = [cid for at, cid in traffic.served if down_at <= at < up_at]
    logged = completions_on_log(outage_broker)
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
          f"{up_at - down_at:.1f} s outage; {spooled:g} events spooled at the restart; {retried:g} "
          f"sends retried; all {len(traffic.ids)} on events.raw ({repeated} repeated) "
          f"{drained_s:.1f} s after the broker was started again; 0 lost")


def _at_least(spooled: float) -> float:
    """``spooled`` once it reaches SPOOLED, else 0 (wait on)."""
    return spooled if spooled >= SPOOLED else 0.0
