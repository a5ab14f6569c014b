"""The ingest service's Kafka edge: appends with acks=all from an idempotent producer, and the
read-back of recent ``events.raw`` that rebuilds the dedupe window on start.

An idempotent producer numbers its batches per partition, and the leader accepts only the next
number. aiokafka can skip numbers: a batch that waited longer than its request timeout for a
partition without a leader (a cluster outage) is failed after it was numbered. From then on the
leader refuses every batch of that producer on that partition (``OutOfOrderSequenceNumber``),
for ever. The event log therefore replaces a producer that gets that answer (or
``UnknownProducerId``) with a new one, which starts its own numbering; the events of the refused
batches were answered 503 and come back from their senders.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.errors import OutOfOrderSequenceNumber, UnknownProducerId
from aiokafka.partitioner import DefaultPartitioner
from aiokafka.producer.message_accumulator import BatchBuilder

from schemas.topics import ORG_HEADER, header_org
from serving.ingest.keys import ApiKey
from serving.ingest.verdicts import Accepted, Rejected

__all__ = ["EventLog", "read_recent_ids"]

log = logging.getLogger(__name__)

_ID_PREFIX = b'{"event_id":"'
# Answers after which a producer's numbering is broken for good on a partition.
_NUMBERING_BROKEN = (OutOfOrderSequenceNumber, UnknownProducerId)
_OLD_PRODUCER_STOP_S = 30.0
# The dead-letter copy of an oversize event keeps its head, so it stays under the broker's
# message size limit while still showing what was sent.
_DEADLETTER_MAX_BYTES = 256 * 1024


class EventLog:
    """Appends accepted envelopes to ``events.raw`` and rejects to ``events.deadletter``.

    Both return the delivery futures: an event counts as accepted only once its future is done
    without error, i.e. the broker acknowledged it to all in-sync replicas.
    """

    def __init__(self, connection: dict[str, Any], raw_topic: str, deadletter_topic: str,
                 on_replaced: Callable[[], None] = lambda: None) -> None:
        self.raw_topic = raw_topic
        self.deadletter_topic = deadletter_topic
        self._connection = connection  # infra.kafka_auth.python_client_options
        self._producer: AIOKafkaProducer | None = None
        self._replacing: asyncio.Task[None] | None = None
        self._on_replaced = on_replaced  # counts replacements (a metric)
        # The producer's own partitioner: appends pick partitions exactly as send() would.
        self._partitioner = DefaultPartitioner()

    async def _new_producer(self) -> AIOKafkaProducer:
        producer = AIOKafkaProducer(
            **self._connection, client_id="rewardstream-ingest", partitioner=self._partitioner,
            acks="all", enable_idempotence=True,
            max_batch_size=512 * 1024, max_request_size=2 * 1024 * 1024, linger_ms=2,
        )
        try:
            await producer.start()
        except BaseException:
            await producer.stop()  # its half-made connections
            raise
        return producer

    async def start(self) -> None:
        """Start the producer; it counts as started once both topics' metadata is in (so the
        first request does not pay for it). A failure leaves it not started."""
        # aiokafka binds to the running loop, so the producer is made here, not in __init__.
        producer = await self._new_producer()
        try:
            await producer.partitions_for(self.raw_topic)
            await producer.partitions_for(self.deadletter_topic)
        except BaseException:
            await producer.stop()
            raise
        self._producer = producer

    async def raw_partitions(self) -> set[int]:
        return set(await self.producer.partitions_for(self.raw_topic))

    async def stop(self) -> None:
        if self._replacing is not None:
            await self._replacing
        if self._producer is not None:
            await self._producer.stop()

    @property
    def started(self) -> bool:
        return self._producer is not None

    @property
    def producer(self) -> AIOKafkaProducer:
        if self._producer is None:
            raise RuntimeError("EventLog.start() was not called")
        return self._producer

    def _watch(self, producer: AIOKafkaProducer, future: asyncio.Future) -> None:
        """Replace ``producer`` once a delivery of its says its numbering is broken."""
        def check(done: asyncio.Future) -> None:
            refusal = None if done.cancelled() else done.exception()
            replacing = self._replacing is not None and not self._replacing.done()
            if (isinstance(refusal, _NUMBERING_BROKEN) and producer is self._producer
                    and not replacing):
                self._replacing = asyncio.ensure_future(self._replace(producer, refusal))
        future.add_done_callback(check)

    async def _replace(self, old: AIOKafkaProducer, refusal: BaseException) -> None:
        try:
            self._producer = await self._new_producer()
        except Exception as exc:  # noqa: BLE001 - the old one stays; its next refusal retries
            log.error("ingest could not replace its Kafka producer: %s", exc)
            return
        self._on_replaced()
        log.warning("ingest's Kafka producer was refused with %s: replaced by a new producer; "
                    "the events it could not deliver were answered 503 and are retried by "
                    "their senders", type(refusal).__name__)
        try:  # its undelivered batches fail or wait for ever: give them a bounded time
            await asyncio.wait_for(old.stop(), _OLD_PRODUCER_STOP_S)
        except Exception as exc:  # noqa: BLE001 - only its connections are left to close
            log.warning("the replaced Kafka producer did not stop cleanly: %r", exc)

    async def append(self, accepted: Sequence[Accepted], org_id: str,
                     received_ms: int) -> list[asyncio.Future]:
        """Each event keyed by its trajectory, with its org in a header too (what a restarted
        ingest reads back to rebuild its per-org dedupe window cheaply).

        The events go out as one record batch per partition (more when a batch fills up) rather
        than record by record: the same records, partitions and acknowledgements, for a fraction
        of the producer's work per event. The futures are one per event, in order; the events
        of one batch share its future."""
        producer = self.producer
        partitions = sorted(await producer.partitions_for(self.raw_topic))
        headers = [(ORG_HEADER, org_id.encode())]
        open_batches: dict[int, tuple[BatchBuilder, list[int]]] = {}
        partition_of: dict[bytes, int] = {}  # a request holds many events of each trajectory
        futures: list[asyncio.Future | None] = [None] * len(accepted)
        for index, event in enumerate(accepted):
            key = event.trajectory_id.encode()
            partition = partition_of.get(key)
            if partition is None:
                partition = partition_of[key] = self._partitioner(key, partitions, partitions)
            batch, members = open_batches.get(partition) or (producer.create_batch(), [])
            if batch.append(timestamp=received_ms, key=key, value=event.stored,
                            headers=headers) is None:  # full: send it, start the next
                await self._send_batch(batch, partition, members, futures)
                batch, members = producer.create_batch(), []
                batch.append(timestamp=received_ms, key=key, value=event.stored, headers=headers)
            members.append(index)
            open_batches[partition] = batch, members
        for partition, (batch, members) in open_batches.items():
            await self._send_batch(batch, partition, members, futures)
        return [future for future in futures if future is not None]

    async def _send_batch(self, batch: BatchBuilder, partition: int, members: list[int],
                          futures: list[asyncio.Future | None]) -> None:
        producer = self.producer
        future = await producer.send_batch(batch, self.raw_topic, partition=partition)
        self._watch(producer, future)
        for index in members:
            futures[index] = future

    async def deadletter(
        self, rejected: Sequence[Rejected], key: ApiKey, received_at: datetime,
    ) -> list[asyncio.Future]:
        futures = []
        producer = self.producer
        for event in rejected:
            headers = [
                ("reason", event.reason.encode()), ("kind", event.kind.encode()),
                ("field", (event.field or "").encode()), ("step", b"ingest.validate"),
                ("time", received_at.isoformat().encode()), (ORG_HEADER, key.org_id.encode()),
                ("api_key", key.name.encode()),
                ("original_bytes", str(len(event.original)).encode()),
            ]
            futures.append(await producer.send(
                self.deadletter_topic, event.original[:_DEADLETTER_MAX_BYTES], headers=headers,
                timestamp_ms=int(received_at.timestamp() * 1000),
            ))
            self._watch(producer, futures[-1])
        return futures


def _org_and_event_id(value: bytes,
                      headers: Sequence[tuple[str, bytes]]) -> tuple[str, UUID] | None:
    # Stored envelopes start with their event_id (pydantic dumps fields in declaration order)
    # and ingest writes the org as a header: slicing avoids parsing a million JSON documents.
    org = header_org(headers)
    try:
        if org is not None and value.startswith(_ID_PREFIX):
            return org, UUID(value[len(_ID_PREFIX):len(_ID_PREFIX) + 36].decode())
        event = json.loads(value)
        return str(event["org_id"]), UUID(event["event_id"])
    except (ValueError, KeyError, TypeError, UnicodeDecodeError):
        return None


async def read_recent_ids(
    connection: dict[str, Any], topic: str, partitions: set[int], since_ms: int,
) -> list[tuple[str, UUID, float]]:
    """(org, event_id, append time in s) of every record appended to ``topic`` since
    ``since_ms``."""
    consumer = AIOKafkaConsumer(**connection, enable_auto_commit=False,
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
        seen: list[tuple[str, UUID, float]] = []
        while pending:
            batches = await consumer.getmany(*pending, timeout_ms=1000, max_records=10_000)
            for records in batches.values():
                for record in records:
                    found = _org_and_event_id(record.value or b"", record.headers or ())
                    if found is not None:
                        seen.append((*found, record.timestamp / 1000))
            for tp in list(pending):
                if await consumer.position(tp) >= ends[tp]:
                    pending.discard(tp)
        return seen
    finally:
        await consumer.stop()
