"""Ingest's appends against the real broker: one record batch per partition, the same partitions
as a record-by-record send, each trajectory in order, one acknowledged future per event."""

from __future__ import annotations

import asyncio
import json
import uuid
from dataclasses import replace

import pytest
from aiokafka import TopicPartition
from aiokafka.errors import OutOfOrderSequenceNumber

from harness.samples import sample_trajectory
from infra.kafka_auth import python_client_options
from infra.settings import Settings
from infra.topics import create_topics
from schemas.events import EventAdapter
from schemas.topics import ORG_HEADER, topic_name
from serving.ingest.kafka_io import EventLog
from serving.ingest.verdicts import Accepted
from tests.support.ingest_support import read_topic

pytestmark = pytest.mark.kafka

RECEIVED_MS = 1_767_268_800_000


def _accepted(trajectories: int, padding: int = 0) -> list[Accepted]:
    out: list[Accepted] = []
    for t in range(trajectories):
        for event in sample_trajectory(f"traj-{t}-{uuid.uuid4().hex[:6]}"):
            stored = EventAdapter.dump_json(event)[:-1] + b', "pad": "' + b"x" * padding + b'"}'
            out.append(Accepted(len(out), str(event.event_id), event.trajectory_id, stored,
                                "org-a", ("org-a", event.event_id.int)))
    return out


async def _append_then_send_one_per_key(
    settings: Settings, accepted: list[Accepted],
) -> tuple[int, dict[bytes, int]]:
    """Append the events; then send one record per trajectory the plain way (``send``) and
    note the partition it lands in."""
    log = EventLog(python_client_options(settings), topic_name(settings.topic_prefix,
                                                                "events.raw"),
                   topic_name(settings.topic_prefix, "events.deadletter"))
    await log.start()
    try:
        futures = await log.append(accepted, "org-a", RECEIVED_MS)
        assert len(futures) == len(accepted)
        await asyncio.gather(*futures)
        plain: dict[bytes, int] = {}
        for key in {a.trajectory_id.encode() for a in accepted}:
            metadata = await (await log.producer.send(log.raw_topic, b"plain", key=key))
            plain[key] = metadata.partition
        return len(set(map(id, futures))), plain
    finally:
        await log.stop()


def test_appends_go_where_send_would_put_them_in_order_with_org_and_time(
    kafka: Settings,
) -> None:
    settings = replace(kafka, topic_prefix=f"{kafka.topic_prefix}p3.", topic_partitions=3)
    create_topics(settings)
    # ~2.4 MB over 3 partitions: each partition's share fills more than one 512 KiB batch.
    accepted = _accepted(trajectories=300, padding=500)
    batches, plain_partition = asyncio.run(_append_then_send_one_per_key(settings, accepted))
    assert batches > 3  # full batches were sent and new ones started
    records = [r for r in read_topic(settings, "events.raw") if r.value != b"plain"]
    assert sorted(r.value for r in records) == sorted(a.stored for a in accepted)
    assert {r.partition for r in records} == {0, 1, 2}
    for record in records:
        assert record.partition == plain_partition[record.key]
        assert record.timestamp == RECEIVED_MS
        assert dict(record.headers) == {ORG_HEADER: b"org-a"}
    by_trajectory: dict[bytes, list[str]] = {}
    for record in sorted(records, key=lambda r: (r.partition, r.offset)):
        by_trajectory.setdefault(record.key, []).append(json.loads(record.value)["event_id"])
    for a_key, ids in by_trajectory.items():
        assert ids == [str(a.event_id) for a in accepted if a.trajectory_id.encode() == a_key]


async def _refused_then_replaced(settings: Settings, first: list[Accepted],
                                 second: list[Accepted]) -> tuple[list[object], int]:
    """Append ``first``; skip five numbers of the producer's batch numbering, as aiokafka does
    when it fails a numbered batch that waited too long for a leaderless partition; append
    ``second`` (refused), then again once the producer was replaced (the senders' retry).
    What the refused append's futures gave, and how many replacements were counted."""
    replaced: list[int] = []
    log = EventLog(python_client_options(settings),
                   topic_name(settings.topic_prefix, "events.raw"),
                   topic_name(settings.topic_prefix, "events.deadletter"),
                   on_replaced=lambda: replaced.append(1))
    await log.start()
    try:
        await asyncio.gather(*await log.append(first, "org-a", RECEIVED_MS))
        old = log.producer
        old._txn_manager.increment_sequence_number(TopicPartition(log.raw_topic, 0), 5)
        refused = await asyncio.gather(*await log.append(second, "org-a", RECEIVED_MS),
                                       return_exceptions=True)
        for _ in range(200):
            if log.producer is not old:
                break
            await asyncio.sleep(0.05)
        await asyncio.gather(*await log.append(second, "org-a", RECEIVED_MS))
        return refused, len(replaced)
    finally:
        await log.stop()


def test_a_producer_whose_batch_numbering_the_leader_refuses_is_replaced(
        kafka: Settings) -> None:
    settings = replace(kafka, topic_prefix=f"{kafka.topic_prefix}seq{uuid.uuid4().hex[:6]}.",
                       topic_partitions=1)
    create_topics(settings)
    first, second = _accepted(trajectories=2), _accepted(trajectories=2)
    refused, replacements = asyncio.run(_refused_then_replaced(settings, first, second))
    # Left alone, the producer would be refused on this partition for ever.
    assert refused and all(isinstance(r, OutOfOrderSequenceNumber) for r in refused)
    assert replacements == 1
    stored = sorted(r.value for r in read_topic(settings, "events.raw"))
    assert stored == sorted(a.stored for a in first + second)  # the retry landed, each once
