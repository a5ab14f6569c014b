"""Round trips through the real broker with each client library the platform uses."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from kafka import KafkaConsumer, KafkaProducer

from infra.kafka_io import TopicReader
from infra.settings import Settings
from schemas.topics import topic_name

pytestmark = pytest.mark.kafka


def _read_all(settings: Settings, topic: str, expected: int) -> list[tuple[bytes, bytes]]:
    consumer = KafkaConsumer(topic, bootstrap_servers=settings.bootstrap_servers,
                             auto_offset_reset="earliest", consumer_timeout_ms=15000)
    got = []
    for record in consumer:
        got.append((record.key, record.value))
        if len(got) == expected:
            break
    consumer.close()
    return got


def test_kafka_python_round_trip(kafka: Settings) -> None:
    topic = topic_name(kafka.topic_prefix, "events.raw")
    producer = KafkaProducer(bootstrap_servers=kafka.bootstrap_servers, acks="all")
    sent = [(f"k{i}".encode(), f"v{i}".encode()) for i in range(20)]
    for key, value in sent:
        producer.send(topic, key=key, value=value)
    producer.flush()
    producer.close()
    assert _read_all(kafka, topic, len(sent)) == sent


def test_a_reader_starts_at_the_first_record_appended_at_or_after_a_time(
        kafka: Settings) -> None:
    topic = topic_name(kafka.topic_prefix, "rewards")
    producer = KafkaProducer(bootstrap_servers=kafka.bootstrap_servers, acks="all")
    base_ms = 1_767_225_600_000  # 2026-01-01 UTC
    for minute in range(6):  # across partitions, by key
        producer.send(topic, key=f"k{minute}".encode(), value=str(minute).encode(),
                      timestamp_ms=base_ms + minute * 60_000)
    producer.flush()
    producer.close()
    with TopicReader(kafka, ["rewards"], client_id="test") as reader:
        reader.seek_to_time(base_ms + 3 * 60_000)
        assert sorted(int(r.value) for r in reader.until_end()) == [3, 4, 5]
    with TopicReader(kafka, ["rewards"], client_id="test") as reader:
        reader.seek_to_time(base_ms + 7 * 60_000)  # after every record: at the ends
        assert list(reader.until_end()) == []


def test_aiokafka_round_trip(kafka: Settings) -> None:
    topic = topic_name(kafka.topic_prefix, "rewards")

    async def run() -> list[bytes]:
        producer = AIOKafkaProducer(bootstrap_servers=kafka.bootstrap_servers, acks="all",
                                    enable_idempotence=True)
        await producer.start()
        try:
            for i in range(10):
                await producer.send_and_wait(topic, f"r{i}".encode(), key=b"t")
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, bootstrap_servers=kafka.bootstrap_servers,
                                    auto_offset_reset="earliest")
        await consumer.start()
        got: list[bytes] = []
        try:
            while len(got) < 10:
                batch = await consumer.getmany(timeout_ms=10000)
                if not batch:
                    break
                got.extend(r.value for records in batch.values() for r in records)
        finally:
            await consumer.stop()
        return got

    assert asyncio.run(run()) == [f"r{i}".encode() for i in range(10)]


def test_faust_agent_consumes_and_produces(kafka: Settings, tmp_path) -> None:
    import faust

    source = topic_name(kafka.topic_prefix, "events.raw")
    sink = topic_name(kafka.topic_prefix, "events.late")
    words = [f"word-{i}" for i in range(5)]

    async def run() -> list[bytes]:
        app = faust.App(
            f"faust-smoke-{uuid.uuid4().hex[:8]}", broker=f"kafka://{kafka.bootstrap_servers}",
            store="memory://", topic_partitions=1, web_enabled=False, datadir=str(tmp_path),
            broker_commit_every=1,
        )
        source_topic = app.topic(source, value_serializer="raw", key_serializer="raw")
        sink_topic = app.topic(sink, value_serializer="raw", key_serializer="raw")

        @app.agent(source_topic)
        async def shout(stream):  # type: ignore[no-untyped-def]
            async for value in stream:
                await sink_topic.send(value=value.upper(), key=b"k")

        await app.start()
        producer = AIOKafkaProducer(bootstrap_servers=kafka.bootstrap_servers)
        await producer.start()
        for word in words:
            await producer.send_and_wait(source, word.encode())
        await producer.stop()

        consumer = AIOKafkaConsumer(sink, bootstrap_servers=kafka.bootstrap_servers,
                                    auto_offset_reset="earliest")
        await consumer.start()
        got: list[bytes] = []
        try:
            deadline = asyncio.get_running_loop().time() + 60
            while len(got) < len(words) and asyncio.get_running_loop().time() < deadline:
                batch = await consumer.getmany(timeout_ms=1000)
                got.extend(r.value for records in batch.values() for r in records)
        finally:
            await consumer.stop()
            await app.stop()
        return got

    assert asyncio.run(run()) == [w.upper().encode() for w in words]
