"""The bare producers ``rewardstream bench ingest`` compares the HTTP path with: the same events
sent straight to ``events.raw`` by one producer of each Python Kafka client, with the settings
ingest's own producer uses (acks=all, idempotent, 512 KiB batches, 2 ms linger)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

from aiokafka import AIOKafkaProducer

from infra.kafka_auth import python_client_options
from infra.kafka_io import make_producer
from infra.settings import Settings

__all__ = ["Timed", "aiokafka_producer", "kafka_python_producer"]

# (seconds for all events, CPU seconds this process spent on them, the latency of each record
# (HTTP: of each request) in seconds)
Timed = tuple[float, float, list[float]]
_BATCH_BYTES = 512 * 1024
_LINGER_MS = 2


def kafka_python_producer(settings: Settings, topic: str,
                          events: Sequence[tuple[bytes, bytes]]) -> Timed:
    producer = make_producer(settings, "bench-ingest-kafka-python", enable_idempotence=True,
                             batch_size=_BATCH_BYTES, linger_ms=_LINGER_MS)
    try:
        producer.send(topic, key=b"warm-up", value=b"{}").get(timeout=30)
        latencies_s: list[float] = []
        started_s, cpu_started_s = time.perf_counter(), time.process_time()
        for key, value in events:
            sent_s = time.perf_counter()
            future = producer.send(topic, key=key, value=value)
            future.add_callback(lambda _, s=sent_s: latencies_s.append(time.perf_counter() - s))
        producer.flush()
        return (time.perf_counter() - started_s, time.process_time() - cpu_started_s,
                latencies_s)
    finally:
        producer.close()


async def _aiokafka(settings: Settings, topic: str,
                    events: Sequence[tuple[bytes, bytes]]) -> Timed:
    producer = AIOKafkaProducer(**python_client_options(settings),
                                client_id="bench-ingest-aiokafka", acks="all",
                                enable_idempotence=True, max_batch_size=_BATCH_BYTES,
                                linger_ms=_LINGER_MS)
    await producer.start()
    try:
        await (await producer.send(topic, b"{}", key=b"warm-up"))
        latencies_s: list[float] = []
        futures: list[asyncio.Future[object]] = []
        started_s, cpu_started_s = time.perf_counter(), time.process_time()
        for key, value in events:
            sent_s = time.perf_counter()
            future = await producer.send(topic, value, key=key)
            future.add_done_callback(
                lambda _, s=sent_s: latencies_s.append(time.perf_counter() - s))
            futures.append(future)
        await asyncio.gather(*futures)
        return (time.perf_counter() - started_s, time.process_time() - cpu_started_s,
                latencies_s)
    finally:
        await producer.stop()


def aiokafka_producer(settings: Settings, topic: str,
                      events: Sequence[tuple[bytes, bytes]]) -> Timed:
    return asyncio.run(_aiokafka(settings, topic, events))
