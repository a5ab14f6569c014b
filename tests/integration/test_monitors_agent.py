"""The faust metrics worker against the real broker: rewards and ingest folded into windows."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from datetime import UTC, datetime

import pytest
from monitors_seed import wait_for

from infra.settings import Settings
from schemas.metrics import MetricWindow
from schemas.topics import topic_name
from streams.monitors.config import MonitorConfig
from streams.monitors.kafka_io import make_producer, read_topic, send
from streams.monitors.offline import windows_from_rewards
from streams.monitors.simulate import PROFILES, Segment, simulate

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


def _summary(window: MetricWindow) -> tuple[str, str, str, int, float]:
    return (window.checkpoint_id, window.arm, window.window_start.isoformat(),
            window.trajectories, round(window.stats["edit_rate"].sum, 6))


def _windows(settings: Settings) -> list[MetricWindow]:
    return [MetricWindow.model_validate_json(r.value)
            for r in read_topic(settings, "metrics", idle_ms=500)]


def test_metrics_worker_emits_reward_and_ingest_windows(kafka: Settings, tmp_path) -> None:
    start = datetime(2026, 3, 1, tzinfo=UTC)
    producer = make_producer(kafka)
    records = list(simulate([Segment({"a": ("c0", PROFILES["healthy"]),
                                      "b": ("c1", PROFILES["healthy"])}, 600)], seed=3,
                            start=start))
    for record in records:
        send(producer, kafka, "rewards", record.trajectory_id.encode(),
             record.model_dump_json().encode())
    # Ingest windows go by arrival (the Kafka timestamp): 200 accepted events over ~7 minutes,
    # every tenth second one rejected.
    start_ms = int(start.timestamp() * 1000)
    event = json.dumps({"checkpoint_id": "c0", "arm": "a"}).encode()
    for second in range(0, 400, 2):
        producer.send(topic_name(kafka.topic_prefix, "events.raw"), key=b"t", value=event,
                      timestamp_ms=start_ms + second * 1000)
        if second % 10 == 0:
            producer.send(topic_name(kafka.topic_prefix, "events.deadletter"), value=b"{bad",
                          timestamp_ms=start_ms + second * 1000)
    producer.flush()
    producer.close()

    env = {**os.environ, "REWARDSTREAM_TOPIC_PREFIX": kafka.topic_prefix}
    worker = subprocess.Popen(
        [sys.executable, "-m", "infra.cli", "monitors", "metrics", "--store", "memory://"],
        env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        expected = {_summary(w) for _, w in windows_from_rewards(records, MonitorConfig(),
                                                                  flush=False)}

        def complete() -> list[MetricWindow] | None:
            found = _windows(kafka)
            done = {_summary(w) for w in found if w.scope == "rewards"} == expected
            return found if done else None

        windows = wait_for(complete, 120, "the reward windows the pure fold closes")
    finally:
        worker.send_signal(signal.SIGTERM)
        try:
            worker.wait(timeout=30)
        except subprocess.TimeoutExpired:
            worker.kill()
    rewards = [w for w in windows if w.scope == "rewards"]
    assert {(w.checkpoint_id, w.arm) for w in rewards} == {("c0", "a"), ("c1", "b")}
    assert sum(w.trajectories for w in rewards) > 500  # all but the still-open windows
    assert all("latency_p95_ms" in w.values for w in rewards)
    ingest = [w for w in windows if w.scope == "ingest" and w.checkpoint_id == "*"]
    # Windows [0, 60) … [300, 360) closed (watermark 398 − 30 s) with 30 accepted events each.
    # Rejected events do not move the watermark and may be read before or after the accepted
    # ones (two topics), so where they land is not fixed here; windows.fold_in's unit test
    # pins the policy.
    assert [w.values["ingest_events"] for w in ingest] == [30.0] * 6
    assert sum(w.stats["dead_letter_rate"].sum for w in ingest) <= 40
    assert {w.checkpoint_id for w in windows if w.scope == "ingest"} == {"*", "c0"}
