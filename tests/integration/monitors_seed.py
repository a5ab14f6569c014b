"""Shared set-up for the monitor integration tests: a registry, metric windows, the runner."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta

from infra.settings import Settings
from schemas.checkpoints import CheckpointEvent
from schemas.metrics import metric_key
from schemas.topics import topic_name
from streams.monitors.config import MonitorConfig
from streams.monitors.kafka_io import make_producer, read_topic, send
from streams.monitors.offline import windows_from_rewards
from streams.monitors.runner import DetectorRunner
from streams.monitors.simulate import PROFILES, Segment, simulate

__all__ = ["publish_registry", "publish_windows", "run_detectors", "wait_for"]


def wait_for(predicate, timeout_s: float = 30.0, what: str = "condition"):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")


def publish_registry(settings: Settings) -> None:
    """c0 in production, then c1 (child of c0) promoted over it."""
    producer = make_producer(settings)
    now = datetime.now(UTC) - timedelta(hours=3)
    rows = [(1, "c0", "created", "candidate", None), (2, "c0", "promoted", "production", None),
            (3, "c1", "created", "candidate", "c0"), (4, "c1", "promoted", "production", "c0")]
    for seq, checkpoint, kind, status, parent in rows:
        event = CheckpointEvent(
            event_id=f"ev-{seq}", sequence=seq, occurred_at=now + timedelta(minutes=seq),
            kind=kind, status=status, checkpoint_id=checkpoint, model="tiny", parent_id=parent,
            path=f"/ckpt/{checkpoint}", evidence={"gate": "passed"} if kind == "promoted" else {})
        send(producer, settings, "checkpoints", checkpoint.encode(),
             event.model_dump_json().encode())
    producer.close()


def publish_windows(settings: Settings, second: str = "defers_edits", n: int = 3000) -> int:
    """Windows of a healthy c0 then c1 with the given profile, ending about now."""
    healthy = PROFILES["healthy"]
    segments = [Segment({"default": ("c0", healthy)}, n),
                Segment({"default": ("c1", PROFILES[second])}, n)]
    start = datetime.now(UTC) - timedelta(seconds=2 * n / 2.0 + 120)
    producer = make_producer(settings)
    count = 0
    for _, window in windows_from_rewards(simulate(segments, seed=5, start=start), MonitorConfig()):
        send(producer, settings, "metrics", metric_key(window.checkpoint_id, window.arm),
             window.model_dump_json().encode())
        count += 1
    producer.close()
    return count


def run_detectors(settings: Settings, config: MonitorConfig, min_events: int) -> DetectorRunner:
    """Run the detector process until ``alerts`` holds ``min_events`` events, then stop it."""
    runner = DetectorRunner(settings, config)
    stop = threading.Event()
    thread = threading.Thread(target=runner.run, args=(stop, False), daemon=True)
    thread.start()
    try:
        wait_for(lambda: len(list(read_topic(settings, "alerts", idle_ms=300))) >= min_events,
                 60, f"{min_events} alert events on {topic_name(settings.topic_prefix, 'alerts')}")
    finally:
        stop.set()
        thread.join(timeout=20)
    return runner
