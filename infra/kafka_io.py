"""The platform's Kafka clients, made in one place, and the one way to read a topic.

:class:`TopicReader` is assigned to every partition of the named topics, from their beginning
(or from given positions). :meth:`TopicReader.until_end` stops at the end offsets the
partitions had when it was called: a replay of what the topic holds now, however fast others
write. :meth:`TopicReader.poll` follows the topics after that. :func:`read_topic` is the first
as one call. A topic that does not exist is an error naming the command that creates it, not
an empty topic.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from infra.errors import BrokerError
from infra.kafka_auth import librdkafka_options, python_client_options
from infra.settings import Settings
from schemas.topics import TopicName, topic_name

__all__ = ["TopicReader", "confluent_options", "make_consumer", "make_producer", "read_topic",
           "send"]

_SEND_TIMEOUT_S = 30.0


def make_producer(settings: Settings, client_id: str, **overrides: Any) -> Any:
    """A producer that waits for every in-sync replica (acks=all)."""
    from kafka import KafkaProducer

    options: dict[str, Any] = {"acks": "all", "linger_ms": 5, **overrides}
    return KafkaProducer(client_id=f"rewardstream-{client_id}",
                         **python_client_options(settings), **options)


def confluent_options(settings: Settings, client_id: str) -> dict[str, Any]:
    """Connection options of a confluent-kafka (librdkafka) client: the reward join's clients
    (Quix Streams) take every broker option, security included, from this one call."""
    return {**librdkafka_options(settings), "client.id": f"rewardstream-{client_id}"}


def make_consumer(settings: Settings, client_id: str, group_id: str | None = None,
                  **overrides: Any) -> Any:
    """A consumer that commits only when told to (``enable_auto_commit`` off)."""
    from kafka import KafkaConsumer

    options: dict[str, Any] = {"enable_auto_commit": False, "auto_offset_reset": "earliest",
                               "max_partition_fetch_bytes": 8 << 20, **overrides}
    return KafkaConsumer(group_id=group_id, client_id=f"rewardstream-{client_id}",
                         **python_client_options(settings), **options)


def send(producer: Any, settings: Settings, name: TopicName, key: bytes | None, value: bytes,
         headers: Sequence[tuple[str, bytes]] | None = None) -> None:
    """Publish one record to a platform topic and wait until the broker acknowledged it."""
    producer.send(topic_name(settings.topic_prefix, name), key=key, value=value,
                  headers=list(headers or [])).get(timeout=_SEND_TIMEOUT_S)


def _or_unauthorized(settings: Settings) -> str:
    # A secured broker leaves a topic the user may not describe out of the metadata.
    auth = settings.kafka_auth
    if not auth.sasl:
        return ""
    return (f", or Kafka user {auth.username!r} may not read it (docs/security.md: Kafka "
            "principals and ACLs)")


class TopicReader:
    """Every partition of the named platform topics, from the start or from ``positions``
    (``{"topic:partition": next offset}``); see the module docstring."""

    def __init__(self, settings: Settings, names: Sequence[TopicName], *, client_id: str,
                 group_id: str | None = None, positions: Mapping[str, int] | None = None,
                 **overrides: Any) -> None:
        from kafka import TopicPartition

        self.consumer = make_consumer(settings, client_id, group_id, **overrides)
        partitions = []
        for name in names:
            topic = topic_name(settings.topic_prefix, name)
            found = self.consumer.partitions_for_topic(topic)
            if not found:
                self.consumer.close()
                raise BrokerError(f"topic {topic} does not exist at {settings.bootstrap_servers}"
                                  f"{_or_unauthorized(settings)}; create the platform's topics "
                                  "with `rewardstream topics create`")
            partitions += [TopicPartition(topic, p) for p in sorted(found)]
        self.consumer.assign(partitions)
        self.consumer.seek_to_beginning(*partitions)
        for tp in partitions:
            position = (positions or {}).get(f"{tp.topic}:{tp.partition}")
            if position is not None:
                self.consumer.seek(tp, position)
        self.partitions = partitions
        self._ahead: list[Any] = []  # polled past the end by until_end: the next poll's

    def until_end(self, idle_timeout_s: float = 30.0,
                  stops: Mapping[str, int] | None = None) -> Iterator[Any]:
        """Records up to the end offsets the partitions have now (or up to ``stops``,
        ``{"topic:partition": offset}``, where that is earlier); BrokerError when nothing
        arrives for ``idle_timeout_s`` while records are still due (the broker went away)."""
        stops = stops or {}
        ends = {tp: min(end, stops.get(f"{tp.topic}:{tp.partition}", end))
                for tp, end in self.consumer.end_offsets(self.partitions).items()}
        ends = {tp: end for tp, end in ends.items() if self.consumer.position(tp) < end}
        last_progress = time.monotonic()
        while ends:
            polled = self.consumer.poll(timeout_ms=500, max_records=10_000)
            if polled:
                last_progress = time.monotonic()
            elif time.monotonic() - last_progress > idle_timeout_s:
                raise BrokerError(f"reading {sorted({tp.topic for tp in ends})} made no progress "
                                  f"for {idle_timeout_s:g} s")
            for tp, records in polled.items():
                for record in records:
                    if record.offset < ends.get(tp, 0):
                        yield record
                    else:
                        self._ahead.append(record)
            for tp in list(ends):
                if self.consumer.position(tp) >= ends[tp]:
                    del ends[tp]

    def poll(self, timeout_ms: int = 500) -> list[Any]:
        """The next records of every partition (following the topics)."""
        ahead, self._ahead = self._ahead, []
        return ahead + [r for records in self.consumer.poll(timeout_ms=timeout_ms).values()
                        for r in records]

    def positions(self) -> dict[str, int]:
        """The next offset to handle per ``topic:partition`` (``positions`` of a later
        reader that should go on where this one stopped)."""
        out = {f"{tp.topic}:{tp.partition}": self.consumer.position(tp) for tp in self.partitions}
        for record in self._ahead:
            name = f"{record.topic}:{record.partition}"
            out[name] = min(out[name], record.offset)
        return out

    def seek_to_time(self, time_ms: int) -> None:
        """Each partition from its first record appended (Kafka's record timestamp) at or after
        ``time_ms``; from its end when it has none."""
        found = self.consumer.offsets_for_times({tp: max(0, time_ms) for tp in self.partitions})
        ends = self.consumer.end_offsets(self.partitions)
        for tp in self.partitions:
            at = found.get(tp)
            self.consumer.seek(tp, at.offset if at is not None else ends[tp])

    def close(self) -> None:
        self.consumer.close()

    def __enter__(self) -> TopicReader:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def read_topic(settings: Settings, name: TopicName) -> Iterator[Any]:
    """Every record a platform topic holds now (up to the end offsets when reading starts)."""
    with TopicReader(settings, [name], client_id="reader") as reader:
        yield from reader.until_end()
