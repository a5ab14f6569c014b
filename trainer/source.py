"""Sources of reward records: the ``rewards`` topic (kafka-python), or a JSONL file offline
(read through ``trainer.consumer``, never directly).

A source hands out batches that close at ``count`` records or, when ``timeout_s`` is set,
``timeout_s`` after the batch's first record arrived. Positions are the next offset to read per
``topic:partition``; the trainer stores them in each checkpoint and seeks to them on resume.
Offsets are committed to the consumer group only once a checkpoint holding them is durable.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from infra.settings import Settings
from schemas.events import GATEWAY_PRODUCER
from schemas.quarantine import UnusableRecord, decode_record
from schemas.rewards import RewardRecord, reward_record_key
from schemas.topics import topic_name

__all__ = ["CONSUMER_NAME", "ConsumedRecord", "FileSource", "KafkaSource", "parse_record",
           "refusal"]

CONSUMER_NAME = "trainer"  # how quarantined records name this consumer


@dataclass(frozen=True)
class ConsumedRecord:
    key: str  # the Kafka record key: trajectory id and spec version
    record: RewardRecord | None  # None when the value was not a valid RewardRecord, or refused
    topic: str | None = None
    partition: int | None = None
    offset: int | None = None
    refused: str | None = None  # why a valid record must not be trained on


def refusal(record: RewardRecord) -> str | None:
    """Why the trainer must not learn from ``record``: a completion the gateway did not serve.
    Behaviour logprobs are the importance ratio's denominator; only the gateway, which sampled
    the completion, can say what they were (a client could write any)."""
    for index, sample in enumerate(record.samples):
        if sample.producer != GATEWAY_PRODUCER:
            return (f"samples.{index}.producer: completion {sample.completion_id!r} was written "
                    f"by {sample.producer or 'an unnamed producer'}, not the gateway; its "
                    "behaviour logprobs cannot be trusted")
    return None


def parse_record(key: bytes | None, value: bytes | None, topic: str, partition: int,
                 offset: int,
                 quarantine: Callable[[str, int, int, bytes | None, str], object] | None = None,
                 ) -> ConsumedRecord:
    """A consumed record; a value that is not a RewardRecord, or one the trainer must refuse (a
    completion the gateway did not serve), keeps its place with record None (and is
    quarantined, when a quarantine is given)."""
    try:
        record = decode_record(RewardRecord, value)
    except UnusableRecord as exc:
        if quarantine is not None:
            quarantine(topic, partition, offset, value, str(exc))
        return ConsumedRecord((key or b"").decode(errors="replace"), None, topic, partition,
                              offset)
    name = (key.decode(errors="replace") if key
            else reward_record_key(record.org_id, record.trajectory_id,
                                   record.spec_version).decode())
    problem = refusal(record)
    if problem is not None:
        if quarantine is not None:
            quarantine(topic, partition, offset, value, problem)
        return ConsumedRecord(name, None, topic, partition, offset, refused=problem)
    return ConsumedRecord(name, record, topic, partition, offset)


class KafkaSource:
    def __init__(self, settings: Settings, group_id: str, positions: dict[str, int]) -> None:
        from kafka import TopicPartition

        from infra.kafka_io import make_consumer
        from infra.quarantine import QuarantineSink

        self.topic = topic = topic_name(settings.topic_prefix, "rewards")
        self._quarantine = QuarantineSink(settings, CONSUMER_NAME)
        self._consumer = make_consumer(settings, CONSUMER_NAME, group_id)
        self._partitions = [TopicPartition(topic, p)
                            for p in sorted(self._consumer.partitions_for_topic(topic) or ())]
        self._consumer.assign(self._partitions)
        for tp in self._partitions:
            position = positions.get(f"{tp.topic}:{tp.partition}")
            if position is not None:  # the checkpoint is the truth, not the committed offset
                self._consumer.seek(tp, position)

    def next_batch(self, count: int, timeout_s: float | None,
                   stop: Callable[[], bool]) -> list[ConsumedRecord]:
        batch: list[ConsumedRecord] = []
        first_at: float | None = None
        while len(batch) < count and not stop():
            waited_s = time.monotonic() - first_at if first_at is not None else 0.0
            if timeout_s is not None and first_at is not None and waited_s >= timeout_s:
                break
            polled = self._consumer.poll(timeout_ms=200, max_records=count - len(batch))
            for tp in sorted(polled, key=lambda t: t.partition):
                batch.extend(parse_record(r.key, r.value, r.topic, r.partition, r.offset,
                                          self._quarantine.put) for r in polled[tp])
            if batch and first_at is None:
                first_at = time.monotonic()
        return batch

    def commit(self, positions: dict[str, int]) -> None:
        from kafka import TopicPartition
        from kafka.structs import OffsetAndMetadata

        offsets = {}
        for name, offset in positions.items():
            topic, partition = name.rsplit(":", 1)
            offsets[TopicPartition(topic, int(partition))] = OffsetAndMetadata(offset, "", -1)
        self._consumer.commit(offsets)

    def close(self) -> None:
        self._consumer.close()
        self._quarantine.close()


class FileSource:
    """Reward records from a JSONL file (one RewardRecord a line); the line number is the offset."""

    def __init__(self, path: Path, positions: dict[str, int]) -> None:
        self.topic = f"file:{path.name}"
        self._lines = path.read_text().splitlines()
        self._next = positions.get(f"{self.topic}:0", 0)

    def next_batch(self, count: int, timeout_s: float | None,
                   stop: Callable[[], bool]) -> list[ConsumedRecord]:
        end = min(self._next + count, len(self._lines))
        batch = [parse_record(None, self._lines[i].encode(), self.topic, 0, i)
                 for i in range(self._next, end)]
        self._next = end
        return batch

    def exhausted(self) -> bool:
        return self._next >= len(self._lines)

    def commit(self, positions: dict[str, int]) -> None:
        """Positions of a file live in the checkpoints only."""

    def close(self) -> None:
        """Nothing to release."""
