"""The ingest service's Kafka edge: appends with acks=all from an idempotent producer, and the
read-back of recent ``events.raw`` that rebuilds the dedupe window on start."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from datetime import datetime
from uuid import UUID

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from serving.ingest.keys import ApiKey
from serving.ingest.verdicts import Accepted, Rejected

__all__ = ["EventLog", "read_recent_ids"]

_ID_PREFIX = b'{"event_id":"'
# The dead-letter copy of an oversize event keeps its head, so it stays under the broker's
# message size limit while still showing what was sent.
_DEADLETTER_MAX_BYTES = 256 * 1024


class EventLog:
    """Appends accepted envelopes to ``events.raw`` and rejects to ``events.deadletter``.

    Both return the delivery futures: an event counts as accepted only once its future is done
    without error, i.e. the broker acknowledged it to all in-sync replicas.
    """

    def __init__(self, bootstrap_servers: str, raw_topic: str, deadletter_topic: str) -> None:
        self.raw_topic = raw_topic
        self.deadletter_topic = deadletter_topic
        self._bootstrap_servers = bootstrap_servers
        self._producer: AIOKafkaProducer | None = None

    async def start(self) -> None:
        # aiokafka binds to the running loop, so the producer is made here, not in __init__.
        self._producer = AIOKafkaProducer(
            bootstrap_servers=self._bootstrap_servers, client_id="rewardstream-ingest",
            acks="all", enable_idempotence=True,
            max_batch_size=512 * 1024, max_request_size=2 * 1024 * 1024, linger_ms=2,
        )
        await self._producer.start()
        # Fetch both topics' metadata now, so the first request does not pay for it.
        await self._producer.partitions_for(self.raw_topic)
        await self._producer.partitions_for(self.deadletter_topic)

    async def raw_partitions(self) -> set[int]:
        return set(await self.producer.partitions_for(self.raw_topic))

    async def stop(self) -> None:
        if self._producer is not None:
            await self._producer.stop()

    @property
    def producer(self) -> AIOKafkaProducer:
        if self._producer is None:
            raise RuntimeError("EventLog.start() was not called")
        return self._producer

    async def append(self, accepted: Sequence[Accepted], received_ms: int) -> list[asyncio.Future]:
        send = self.producer.send
        return [
            await send(self.raw_topic, event.stored, key=event.trajectory_id.encode(),
                       timestamp_ms=received_ms)
            for event in accepted
        ]

    async def deadletter(
        self, rejected: Sequence[Rejected], key: ApiKey, received_at: datetime,
    ) -> list[asyncio.Future]:
        futures = []
        for event in rejected:
            headers = [
                ("reason", event.reason.encode()), ("kind", event.kind.encode()),
                ("field", (event.field or "").encode()), ("step", b"ingest.validate"),
                ("time", received_at.isoformat().encode()), ("org_id", key.org_id.encode()),
                ("api_key", key.name.encode()),
                ("original_bytes", str(len(event.original)).encode()),
            ]
            futures.append(await self.producer.send(
                self.deadletter_topic, event.original[:_DEADLETTER_MAX_BYTES], headers=headers,
                timestamp_ms=int(received_at.timestamp() * 1000),
            ))
        return futures


def _event_id(value: bytes) -> UUID | None:
    # Stored envelopes start with their event_id (pydantic dumps fields in declaration order);
    # slicing avoids parsing a million JSON documents on start.
    try:
        if value.startswith(_ID_PREFIX):
            return UUID(value[len(_ID_PREFIX):len(_ID_PREFIX) + 36].decode())
        return UUID(json.loads(value)["event_id"])
    except (ValueError, KeyError, TypeError):
        return None


async def read_recent_ids(
    bootstrap_servers: str, topic: str, partitions: set[int], since_ms: int,
) -> list[tuple[UUID, float]]:
    """(event_id, append time in s) of every record appended to ``topic`` since ``since_ms``."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap_servers, enable_auto_commit=False,
                                client_id="rewardstream-ingest-dedupe")
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in sorted(partitions)]
        consumer.assign(tps)
        starts = await consumer.offsets_for_times({tp: since_ms for tp in tps})
        ends = await consumer.end_offsets(tps)
        pending = set()
        for tp in tps:
            if starts[tp] is not None and starts[tp].offset < ends[tp]:
                consumer.seek(tp, starts[tp].offset)
                pending.add(tp)
        seen: list[tuple[UUID, float]] = []
        while pending:
            batches = await consumer.getmany(*pending, timeout_ms=1000, max_records=10_000)
            for tp, records in batches.items():
                for record in records:
                    event_id = _event_id(record.value or b"")
                    if event_id is not None:
                        seen.append((event_id, record.timestamp / 1000))
            for tp in list(pending):
                if await consumer.position(tp) >= ends[tp]:
                    pending.discard(tp)
        return seen
    finally:
        await consumer.stop()
