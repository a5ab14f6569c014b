"""The detector process against the real broker: alerts from windows, replay, auto-protect."""

from __future__ import annotations

import threading
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from infra.kafka_io import make_producer, read_topic, send
from infra.settings import Settings
from schemas.alerts import AlertEvent
from schemas.checkpoints import CheckpointEvent
from schemas.metrics import MetricStat, MetricWindow, metric_key
from streams.monitors.config import MonitorConfig
from streams.monitors.runner import DetectorRunner
from tests.support.monitors_seed import publish_registry, publish_windows, run_detectors
from tests.support.waits import wait_for

pytestmark = pytest.mark.kafka


def _alerts(settings: Settings) -> list[AlertEvent]:
    return [AlertEvent.model_validate_json(r.value) for r in read_topic(settings, "alerts")]


def test_runner_alerts_from_windows_and_a_replay_adds_nothing(kafka: Settings) -> None:
    publish_registry(kafka)
    publish_windows(kafka, "defers_edits")
    first = run_detectors(kafka, MonitorConfig(), min_events=2)
    events = _alerts(kafka)
    fired = {e.alert.detector for e in events if e.kind == "fired" and e.alert}
    assert {"edit_rate_collapse", "clarification_spike"} <= fired
    assert first.published == len(events)
    assert all(e.alert and e.alert.labels["checkpoint"] == "c1" for e in events)
    again = run_detectors(kafka, MonitorConfig(), min_events=len(events))
    assert again.published == 0  # the replay recognised every transition already on the topic
    assert len(_alerts(kafka)) == len(events)
    assert again.alerts.alerts.keys() == first.alerts.alerts.keys()


def test_auto_protect_rolls_back_the_production_checkpoint(kafka: Settings) -> None:
    publish_registry(kafka)
    publish_windows(kafka, "broken_calls")
    runner = run_detectors(kafka, replace(MonitorConfig(), auto_protect=True), min_events=1)
    assert runner.published >= 1
    events = [CheckpointEvent.model_validate_json(r.value)
              for r in read_topic(kafka, "checkpoints")]
    rollbacks = [e for e in events if e.kind == "rolled_back"]
    assert len(rollbacks) == 1
    rollback = rollbacks[0]
    assert (rollback.checkpoint_id, rollback.status, rollback.actor) == ("c1", "rolled_back",
                                                                         "auto-protect")
    assert rollback.sequence == 5 and rollback.parent_id == "c0"
    assert "Broken tool calls" in rollback.evidence["reason"]


def test_a_silent_ingest_stream_is_published_as_empty_windows_and_alerts(kafka: Settings) -> None:
    start = datetime(2026, 2, 1, tzinfo=UTC)
    producer = make_producer(kafka, "test")
    for minute in range(10):
        window = MetricWindow(
            scope="ingest", window_start=start + timedelta(minutes=minute),
            window_end=start + timedelta(minutes=minute + 1), checkpoint_id="*", arm="*",
            stats={"ingest_events": MetricStat(n=100, sum=100, sumsq=100)})
        send(producer, kafka, "metrics", metric_key("*", "*"), window.model_dump_json().encode())
    producer.close()
    # The clock says 10 minutes passed since the last window: the runner fills the silence.
    runner = DetectorRunner(kafka, MonitorConfig(),
                            clock=lambda: start + timedelta(minutes=20))
    stop = threading.Event()
    thread = threading.Thread(target=runner.run, args=(stop,), daemon=True)
    thread.start()
    try:
        fired = wait_for(lambda: [e for e in _alerts(kafka) if e.kind == "fired"], 60,
                         "the volume-drop alert")
    finally:
        stop.set()
        thread.join(timeout=20)
    assert fired[0].alert is not None and fired[0].alert.detector == "ingest_volume_drop"
    empty = [MetricWindow.model_validate_json(r.value) for r in read_topic(kafka, "metrics")][10:]
    assert empty and all(w.stats == {} for w in empty)
    assert empty[0].window_start == start + timedelta(minutes=10)
