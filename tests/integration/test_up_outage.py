"""`rewardstream up`, from the quickstart's settings, rides out its broker killed (SIGKILL) for
three minutes while a Python SDK producer keeps sending: every service is still running at the
end (the reward worker may have stopped with exit code 70, which `up` answers by starting it
again: the test says so when it happened), every `/readyz` says not ready during the outage and
ready after it, and nothing is lost: every event the SDK took is on events.raw and every
trajectory has its reward record."""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path
from uuid import UUID

import pytest

from infra import broker
from infra.kafka_io import read_topic
from infra.settings import Settings
from rewardstream_telemetry import Telemetry, Trajectory
from schemas.events import parse_event
from streams.sources import read_records
from tests.support.up_stack import UpStack, start_up
from tests.support.waits import wait_for

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

DOWN_S = 180.0
_POLL_S = 10.0


class _Producer(threading.Thread):
    """Sends a trajectory whose reward is due at once (its end, its edit's decision and both
    persistence checks) every ``gap_s`` until stopped; keeps every event id it was given."""

    def __init__(self, telemetry: Telemetry, gap_s: float = 1.0) -> None:
        super().__init__(daemon=True)
        self.telemetry, self.gap_s = telemetry, gap_s
        self.event_ids: set[UUID] = set()
        self.trajectories: list[str] = []
        self.halt = threading.Event()

    def run(self) -> None:
        tel, n = self.telemetry, 0
        while not self.halt.wait(self.gap_s):
            n += 1
            traj = Trajectory(f"traj-{n}", session_id=f"s{n % 7}", user=f"user-{n % 11}",
                              checkpoint_id="base")
            self.event_ids |= {
                tel.tool_called(traj, call_id="c1", tool="read_file", valid=True, duration_ms=9),
                tel.edit_proposed(traj, edit_id="e1", path="src/app.py", lines_added=1),
                tel.edit_decided(traj, edit_id="e1", decision="accepted"),
                tel.edit_persistence(traj, edit_id="e1", horizon_s=600, surviving_fraction=1.0),
                tel.edit_persistence(traj, edit_id="e1", horizon_s=3600, surviving_fraction=1.0),
                tel.trajectory_ended(traj, outcome="completed", turns=2)}
            self.trajectories.append(traj.trajectory_id)


def _outage(stack: UpStack, outage_broker: Settings) -> dict[str, set[str]]:
    """Kill the broker for DOWN_S; what each service's status and readiness said meanwhile."""
    seen: dict[str, set[str]] = {}
    broker.stop(outage_broker, sig=signal.SIGKILL)
    killed = time.monotonic()
    while time.monotonic() - killed < DOWN_S:
        time.sleep(_POLL_S)
        state = stack.status()
        for row in state["services"]:
            ready = state["ready"][row["name"]]
            seen.setdefault(row["name"], set()).add(
                f"{row['state']}, {'ready' if ready is None else 'not ready'}")
    broker.start(outage_broker)
    return seen


def _unrewarded(settings: Settings, trajectories: set[str]) -> set[str]:
    return trajectories - {record.trajectory_id for record in read_records(settings).values()}


def _wait_for_rewards(settings: Settings, trajectories: set[str], timeout_s: float) -> set[str]:
    deadline, missing = time.monotonic() + timeout_s, set(trajectories)
    while missing and time.monotonic() < deadline:
        missing = _unrewarded(settings, missing)
        time.sleep(2.0)
    return missing


@pytest.mark.timeout(1200)
def test_every_service_rides_out_a_three_minute_broker_outage_and_nothing_is_lost(
        outage_broker: Settings, tmp_path: Path) -> None:
    stack = start_up(tmp_path / "deployment", outage_broker)
    key = (stack.directory / "run" / "keys" / "ingest.key").read_text().strip()
    telemetry = Telemetry(f"http://127.0.0.1:{stack.port('ingest.port')}", key,
                          queue_dir=tmp_path / "sdk-queue")
    producer = _Producer(telemetry)
    try:
        producer.start()
        # Traffic flows through every service before the outage: the first rewards are out.
        wait_for(lambda: len(producer.trajectories) >= 3 and not _unrewarded(
            outage_broker, set(producer.trajectories[:3])), 120, "the first rewards", 1.0)
        seen = _outage(stack, outage_broker)
        back_s = stack.wait_ready(300)
        producer.halt.set()
        producer.join()
        delivered = telemetry.flush(timeout_s=180)
        stats = telemetry.stats()
        missing = _wait_for_rewards(outage_broker, set(producer.trajectories), 240)
        final = stack.status()
    finally:
        producer.halt.set()
        telemetry.close(timeout_s=5)
        stopped = stack.down()
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    rows = {row["name"]: row for row in final["services"]}
    restarted = {name: (row["restarts"], row["last_exit"]) for name, row in rows.items()
                 if row["restarts"]}
    print(f"\n{len(producer.trajectories)} trajectories, {len(producer.event_ids)} events "
          f"sent ({stats.retries} SDK retries); every service ready {back_s:.0f} s after the "
          f"broker restarted; restarted by up: {restarted or 'none'}; seen during the outage: "
          f"{seen}")
    assert all(row["state"] == "running" for row in rows.values()), rows
    assert all(problem is None for problem in final["ready"].values()), final["ready"]
    # Only the reward worker may have stopped (exit 70: two minutes without a broker, or a
    # checkpoint Kafka did not acknowledge); up started it again.
    assert set(restarted) <= {"worker"} and all(code == 70 for _, code in restarted.values()), \
        f"{restarted}\n{stack.logs()}"
    for name, said in seen.items():
        assert any("not ready" in s for s in said), (name, said)
        assert said <= {"running, not ready", "restarting, not ready"} or name == "worker", \
            (name, said)
    assert delivered and stats.queued == 0 and stats.lost == 0, stats
    on_log = {parse_event(record.value).event_id
              for record in read_topic(outage_broker, "events.raw")}
    assert producer.event_ids <= on_log, f"{len(producer.event_ids - on_log)} events lost"
    assert not missing, f"{len(missing)} of {len(producer.trajectories)} trajectories have no " \
        "reward record"
