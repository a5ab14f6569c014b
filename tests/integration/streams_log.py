"""Helpers of the stream-processor integration tests: produce a log, wait for reward records."""

from __future__ import annotations

import time
from collections.abc import Callable

from kafka import KafkaProducer

from infra.settings import Settings
from schemas.rewards import RewardRecord
from schemas.topics import topic_name
from streams.replay import ReplayResult, replay_rows
from streams.sources import read_records, read_topic
from streams.spec import RewardSpec


def produce(settings: Settings, log: list[tuple[bytes, bytes]]) -> None:
    producer = KafkaProducer(bootstrap_servers=settings.bootstrap_servers, acks="all",
                             linger_ms=20, batch_size=256 * 1024)
    topic = topic_name(settings.topic_prefix, "events.raw")
    for key, value in log:
        producer.send(topic, key=key, value=value)
    producer.flush()
    producer.close()


def replay_topic(settings: Settings, spec: RewardSpec) -> ReplayResult:
    rows = [(p, o, value) for p, o, _, value in read_topic(settings, "events.raw")]
    return replay_rows(rows, spec)


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
    return [value for _, _, _, value in read_topic(settings, "events.late")]
