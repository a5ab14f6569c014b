"""Helpers of the stream-processor integration tests: produce a log, wait for reward records."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kafka import KafkaProducer

from infra.kafka_io import read_topic
from infra.settings import Settings
from schemas.rewards import RewardRecord
from schemas.topics import topic_name
from streams.replay import ReplayResult, replay_rows
from streams.sources import kafka_rows, read_records
from streams.spec import RewardSpec, load_spec
from streams.worker import WorkerConfig, build_app


def produce(settings: Settings, log: list[tuple[bytes, bytes]]) -> None:
    producer = KafkaProducer(bootstrap_servers=settings.bootstrap_servers, acks="all",
                             linger_ms=20, batch_size=256 * 1024)
    topic = topic_name(settings.topic_prefix, "events.raw")
    for key, value in log:
        producer.send(topic, key=key, value=value)
    producer.flush()
    producer.close()


def in_thirds(log: list[tuple[bytes, bytes]]) -> list[list[tuple[bytes, bytes]]]:
    """A log cut in three, in order: for producing while something changes in between."""
    third = len(log) // 3
    return [log[:third], log[third:2 * third], log[2 * third:]]


def replay_topic(settings: Settings, spec: RewardSpec) -> ReplayResult:
    return replay_rows(kafka_rows(settings), spec)


def wait_for_records(settings: Settings, expected: int, timeout_s: float,
                     alive: Callable[[], bool] = lambda: True) -> dict[bytes, RewardRecord]:
    deadline = time.monotonic() + timeout_s
    records: dict[bytes, RewardRecord] = {}
    while time.monotonic() < deadline and alive():
        records = read_records(settings)
        if len(records) >= expected:
            return records
        time.sleep(1.0)
    return records


def late_event_ids(settings: Settings) -> list[bytes]:
    return [r.value for r in read_topic(settings, "events.late")]


def run_in_process(settings: Settings, tmp_path: Path, expected: int, timeout_s: float,
                   spec: RewardSpec | None = None, **options: Any) -> dict[bytes, RewardRecord]:
    """Run the reward-join worker in this process until it wrote ``expected`` records."""
    config = WorkerConfig(settings=settings, spec=spec or load_spec(),
                          datadir=tmp_path / "worker",
                          app_id=f"{settings.topic_prefix}join-{uuid.uuid4().hex[:6]}",
                          commit_interval_s=0.5, **options)
    deadline = time.monotonic() + timeout_s
    app, _ = build_app(config, stop_when=lambda totals: totals.records >= expected
                       or time.monotonic() > deadline)
    app.run(timeout=timeout_s)
    return wait_for_records(settings, expected, timeout_s=30)
