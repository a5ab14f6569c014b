"""Thin kafka-python helpers for the monitor processes that rebuild their state by replay."""

from __future__ import annotations

from collections.abc import Iterator

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.consumer.fetcher import ConsumerRecord

from infra.settings import Settings
from schemas.topics import topic_name

__all__ = ["make_producer", "read_topic", "replay_consumer", "send"]

_SEND_TIMEOUT_S = 30.0


def make_producer(settings: Settings) -> KafkaProducer:
    return KafkaProducer(bootstrap_servers=settings.bootstrap_servers, acks="all",
                         linger_ms=5, client_id="rewardstream-monitors")


def send(producer: KafkaProducer, settings: Settings, name: str, key: bytes, value: bytes) -> None:
    """Publish one record to a platform topic and wait until the broker acknowledged it."""
    producer.send(topic_name(settings.topic_prefix, name), key=key, value=value).get(
        timeout=_SEND_TIMEOUT_S)


def replay_consumer(settings: Settings, names: list[str], group_id: str | None = None,
                    ) -> KafkaConsumer:
    """A consumer assigned to every partition of the named topics, at the start of each."""
    consumer = KafkaConsumer(bootstrap_servers=settings.bootstrap_servers, group_id=group_id,
                             enable_auto_commit=False, auto_offset_reset="earliest",
                             client_id="rewardstream-monitors")
    partitions = []
    for name in names:
        full = topic_name(settings.topic_prefix, name)
        found = consumer.partitions_for_topic(full) or {0}
        partitions.extend(TopicPartition(full, p) for p in sorted(found))
    consumer.assign(partitions)
    consumer.seek_to_beginning(*partitions)
    return consumer


def read_topic(settings: Settings, name: str, idle_ms: int = 2000) -> Iterator[ConsumerRecord]:
    """Every record a topic holds now (until it has been idle ``idle_ms`` at its end)."""
    consumer = replay_consumer(settings, [name])
    try:
        ends = consumer.end_offsets(list(consumer.assignment()))
        while any(consumer.position(tp) < end for tp, end in ends.items()):
            batch = consumer.poll(timeout_ms=idle_ms)
            if not batch:
                break
            for records in batch.values():
                yield from records
    finally:
        consumer.close()
