"""Shared set-up for the monitor integration tests: a registry, metric windows, the runner."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

from infra.kafka_auth import client_env
from infra.kafka_io import make_producer, read_topic, send
from infra.settings import Settings
from schemas.checkpoints import CheckpointEvent
from schemas.metrics import MetricWindow, metric_key
from schemas.topics import topic_name
from streams.monitors.config import MonitorConfig
from streams.monitors.offline import windows_from_rewards
from streams.monitors.runner import DetectorRunner
from streams.monitors.simulate import PROFILES, Segment, simulate
from tests.support.waits import wait_for

__all__ = ["metric_windows", "metrics_worker", "publish_registry", "publish_windows",
           "registry_events", "run_detectors"]


def registry_events() -> list[CheckpointEvent]:
    """c0 in production, then c1 (child of c0) promoted over it."""
    now = datetime.now(UTC) - timedelta(hours=3)
    rows = [(1, "c0", "created", "candidate", None), (2, "c0", "promoted", "production", None),
            (3, "c1", "created", "candidate", "c0"), (4, "c1", "promoted", "production", "c0")]
    return [CheckpointEvent(
        event_id=f"ev-{seq}", sequence=seq, occurred_at=now + timedelta(minutes=seq),
        kind=kind, status=status, checkpoint_id=checkpoint, model="tiny", parent_id=parent,
        path=f"/ckpt/{checkpoint}", evidence={"gate": "passed"} if kind == "promoted" else {})
        for seq, checkpoint, kind, status, parent in rows]


def publish_registry(settings: Settings) -> None:
    """The :func:`registry_events` on ``checkpoints``."""
    producer = make_producer(settings, "test")
    for event in registry_events():
        send(producer, settings, "checkpoints", event.checkpoint_id.encode(),
             event.model_dump_json().encode())
    producer.close()


def metric_windows(second: str = "defers_edits", n: int = 3000) -> list[MetricWindow]:
    """The fleet's windows of a healthy c0 then c1 with the given profile, ending about now
    (each org's windows would raise the same alerts again, once per org)."""
    healthy = PROFILES["healthy"]
    segments = [Segment({"default": ("c0", healthy)}, n),
                Segment({"default": ("c1", PROFILES[second])}, n)]
    start = datetime.now(UTC) - timedelta(seconds=2 * n / 2.0 + 120)
    return [window for _, window in windows_from_rewards(simulate(segments, seed=5, start=start),
                                                         MonitorConfig())
            if window.org_id == "*"]


def publish_windows(settings: Settings, second: str = "defers_edits", n: int = 3000) -> int:
    """The :func:`metric_windows` on ``metrics``; returns how many."""
    producer = make_producer(settings, "test")
    windows = metric_windows(second, n)
    for window in windows:
        send(producer, settings, "metrics", metric_key(window.checkpoint_id, window.arm),
             window.model_dump_json().encode())
    producer.close()
    return len(windows)


def run_detectors(settings: Settings, config: MonitorConfig, min_events: int) -> DetectorRunner:
    """Run the detector process until ``alerts`` holds ``min_events`` events, then stop it."""
    runner = DetectorRunner(settings, config)
    stop = threading.Event()
    thread = threading.Thread(target=runner.run, args=(stop, False), daemon=True)
    thread.start()
    try:
        wait_for(lambda: len(list(read_topic(settings, "alerts"))) >= min_events,
                 60, f"{min_events} alert events on {topic_name(settings.topic_prefix, 'alerts')}")
    finally:
        stop.set()
        thread.join(timeout=20)
    return runner


@contextmanager
def metrics_worker(settings: Settings, cwd: Path) -> Iterator[subprocess.Popen]:
    """`rewardstream monitors metrics` (in-memory tables) on the brokers and topics of
    ``settings``, as its Kafka user, as a process; stopped on exit with SIGTERM, killed if still
    running 30 s later. What it logs is appended to ``cwd/metrics-worker.log``."""
    env = {**os.environ, **client_env(settings)}
    with (cwd / "metrics-worker.log").open("ab") as log:
        worker = subprocess.Popen(
            [sys.executable, "-m", "rewardstream", "monitors", "metrics", "--store", "memory://"],
            env=env, cwd=cwd, stdout=log, stderr=subprocess.STDOUT)
    try:
        yield worker
    finally:
        worker.send_signal(signal.SIGTERM)
        try:
            worker.wait(timeout=30)
        except subprocess.TimeoutExpired:
            worker.kill()
