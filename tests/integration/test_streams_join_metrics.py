"""`rewardstream worker --metrics-port`: the join's counts and each partition's state on
Prometheus' endpoint, as of the last checkpoint, equal to what it wrote."""

from __future__ import annotations

import json
import time
from datetime import datetime
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from infra.settings import Settings
from streams.simlog import SimConfig, simulate_log
from streams.spec import load_spec
from tests.support.join_workers import start_worker, stop_workers
from tests.support.ports import free_port
from tests.support.streams_log import produce, replay_topic, wait_for_records

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


def _samples(url: str) -> dict[tuple[str, str], float]:
    text = httpx.get(url, timeout=5).text
    return {(s.name, s.labels.get("partition", "")): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_the_worker_serves_its_counts_and_state_sizes(kafka: Settings, tmp_path: Path) -> None:
    log = simulate_log(60, seed=7, config=SimConfig(mean_start_gap_s=45.0))
    produce(kafka, log)
    expected = replay_topic(kafka, load_spec())
    port = free_port()
    worker = start_worker(kafka, tmp_path / "state", tmp_path / "worker.log",
                          "--metrics-port", str(port))
    try:
        records = wait_for_records(kafka, len(expected.records), timeout_s=120,
                                   alive=lambda: worker.poll() is None)
        assert len(records) == len(expected.records)
        url = f"http://127.0.0.1:{port}/metrics"
        deadline = time.monotonic() + 30
        # Until the checkpoint that holds the log's last offset: the state figures are its.
        while (samples := _samples(url)).get(("rewardstream_join_checkpoint_offset", "0")) \
                != len(log) - 1:
            assert time.monotonic() < deadline, samples
            time.sleep(0.5)
    finally:
        stop_workers([worker])
    assert samples[("rewardstream_join_events_total", "")] == len(log)
    assert samples[("rewardstream_join_records_total", "")] == len(expected.records)
    assert samples[("rewardstream_join_late_events_total", "")] == len(expected.late)
    assert samples[("rewardstream_join_open_trajectories", "0")] == expected.open_trajectories
    assert samples[("rewardstream_join_markers", "0")] == len(expected.records)
    assert samples[("rewardstream_join_marker_bytes", "0")] > 0
    last_event_s = max(_event_time_s(value) for _, value in log)
    assert samples[("rewardstream_join_watermark_seconds", "0")] == pytest.approx(last_event_s,
                                                                                  abs=1e-3)


def _event_time_s(value: bytes) -> float:
    return datetime.fromisoformat(json.loads(value)["event_time"]).timestamp()
