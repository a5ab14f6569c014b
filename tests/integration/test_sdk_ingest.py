"""The SDK through the real ingest server and broker: every typed event, a SIGKILL'd client,
and a broker that goes away mid-run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from infra import broker
from infra.settings import Settings
from rewardstream_telemetry import Telemetry, Trajectory
from schemas.events import EVENT_TYPES
from tests.support.ingest_support import TEST_KEY, ingest_config, read_topic, running_server
from tests.support.metrics import metric
from tests.support.ports import free_port
from tests.support.waits import wait_for

pytestmark = pytest.mark.kafka

TRAJ = Trajectory("traj-sdk", "session-sdk", "user-7", "ckpt-3", arm="treatment")
_CHILD = str(Path(__file__).parents[1] / "support" / "sdk_child.py")


def _emit_one_of_each(tel: Telemetry) -> list[str]:
    ids = [
        tel.completion_served(TRAJ, completion_id="c0", model="tiny", prompt_token_ids=[1, 2],
                              completion_token_ids=[3], behaviour_logprobs=[-0.1], ttft_ms=5.0,
                              latency_ms=9.0),
        tel.tool_called(TRAJ, call_id="t0", tool="edit_file", valid=False,
                        error_kind="malformed_call"),
        tel.edit_proposed(TRAJ, edit_id="e0", path="a.py", lines_added=2),
        tel.edit_decided(TRAJ, edit_id="e0", decision="accepted"),
        tel.edit_persistence(TRAJ, edit_id="e0", horizon_s=600, surviving_fraction=0.5),
        tel.followup_sent(TRAJ, sentiment="neutral"),
        tel.clarification_asked(TRAJ, request_ambiguity=0.3),
        tel.trajectory_ended(TRAJ, outcome="completed", turns=2),
    ]
    return [str(i) for i in ids]


def _raw_ids(settings: Settings) -> list[str]:
    return [json.loads(r.value)["event_id"] for r in read_topic(settings, "events.raw")]


def test_every_typed_constructor_reaches_the_log(kafka: Settings, tmp_path: Path) -> None:
    with running_server(kafka) as server:
        with Telemetry(server.url, TEST_KEY, queue_dir=tmp_path, linger_s=0.05) as tel:
            ids = _emit_one_of_each(tel)
            assert tel.flush(timeout_s=30)
    records = [json.loads(r.value) for r in read_topic(kafka, "events.raw")]
    assert sorted(r["event_id"] for r in records) == sorted(ids)
    assert {r["type"] for r in records} == set(EVENT_TYPES)
    assert all(r["arm"] == "treatment" and r["clock_skew_ms"] is not None for r in records)


def test_events_of_a_killed_process_are_sent_by_the_next(kafka: Settings, tmp_path: Path) -> None:
    dead_url = f"http://127.0.0.1:{free_port()}"  # nothing listens: the events stay queued
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    child = subprocess.Popen([sys.executable, _CHILD, "emit", dead_url, TEST_KEY, str(tmp_path),
                              "40"], stdout=subprocess.PIPE, text=True, env=env)
    assert child.stdout is not None
    queued = json.loads(child.stdout.readline())
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=10)
    assert len(queued) == 40
    with running_server(kafka) as server:
        result = subprocess.run([sys.executable, _CHILD, "flush", server.url, TEST_KEY,
                                 str(tmp_path), "0"], capture_output=True, text=True, env=env,
                                timeout=90)
    assert json.loads(result.stdout) == {"flushed": True, "sent": 40}, result.stderr
    assert sorted(_raw_ids(kafka)) == sorted(queued)


@pytest.mark.slow
def test_broker_outage_gives_503s_and_every_event_lands_once(
        outage_broker: Settings, tmp_path: Path) -> None:
    config = ingest_config(ack_timeout_s=1.5, unavailable_retry_after_s=1)
    with running_server(outage_broker, config) as server:
        tel = Telemetry(server.url, TEST_KEY, queue_dir=tmp_path / "queue", linger_s=0.05,
                        batch_size=20, backoff_base_s=0.1, backoff_cap_s=2.0)
        ids = [_emit_one_of_each(tel) for _ in range(5)]
        assert tel.flush(timeout_s=30)
        broker.stop(outage_broker)
        ids += [_emit_one_of_each(tel) for _ in range(10)]
        wait_for(lambda: metric(server.url, "rewardstream_ingest_requests_total", status="503"),
                 60, "a 503 while the broker is down", interval_s=0.5)
        broker.start(outage_broker)
        assert tel.close(timeout_s=120)
        assert tel.stats().retries > 0
    sent = sorted(i for group in ids for i in group)
    assert sorted(_raw_ids(outage_broker)) == sent  # each exactly once
