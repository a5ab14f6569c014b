"""Every Quix Streams internal the reward join reaches, typed, in one place.

The join is a Quix sink (``BaseSink``, Quix's documented extension point), but two things it
needs are outside Quix's documented API:

* its state lives in the application's own store partitions and is written through the
  checkpoint's partition transaction, so that state, outputs and consumer offsets commit in one
  checkpoint (``ProcessingContext.checkpoint``, ``Checkpoint.get_store_transaction``; on
  restore the partition itself, ``StateStoreManager.get_store(..).partitions``, is read in key
  ranges with ``RocksDBStorePartition.iter_items``);
* its outputs go through the application's producer (``InternalProducer.produce``), the one the
  checkpoint flushes before it commits the offsets;
* the worker tells two failures apart by exception classes Quix does not export at its top
  level: a broker that does not answer (``KafkaBrokerUnavailableError``) and a topic the node it
  asked has not learnt of yet (``TopicNotFoundError``).

:class:`QuixState` reaches them from a dataframe's ``processing_context``;
:class:`StateTransaction` and :class:`StateDatabase` say what :mod:`streams.join_store` needs
of a transaction and a partition. ``tests/unit/test_quix_seam.py`` checks each of these names
and calls against the installed Quix Streams and exercises them once, so an upgrade that
changes one fails there, naming it; ``pyproject.toml`` pins quixstreams to a minor version
until it passes.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

from quixstreams.dataframe import StreamingDataFrame
from quixstreams.kafka.exceptions import KafkaBrokerUnavailableError
from quixstreams.models import HeadersTuples
from quixstreams.models.topics.exceptions import TopicNotFoundError
from quixstreams.processing import ProcessingContext
from quixstreams.sinks import BaseSink
from quixstreams.state.rocksdb import RocksDBStorePartition

__all__ = ["BrokerUnavailable", "KafkaHeaders", "QuixState", "RecordHeaders", "Sink",
           "StateDatabase", "StateTransaction", "TopicNotSeen"]

Sink = BaseSink  # what Quix hands each processed record (``add``) and each checkpoint (``flush``)
RecordHeaders = HeadersTuples  # a consumed record's headers, as ``Sink.add`` receives them
KafkaHeaders = list[tuple[str, bytes]]  # a produced message's headers
BrokerUnavailable = KafkaBrokerUnavailableError  # the application's start found no broker
TopicNotSeen = TopicNotFoundError  # a topic the node asked does not know (yet)


class StateTransaction(Protocol):
    """What the join uses of a store partition's transaction (Quix's ``PartitionTransaction``):
    bytes under complete keys (``prefix=b""``), read back before they are committed."""

    def get_bytes(self, key: bytes, prefix: bytes) -> bytes | None: ...

    def set_bytes(self, key: bytes, value: bytes, prefix: bytes) -> None: ...

    def delete(self, key: bytes, prefix: bytes) -> None: ...


class StateDatabase(Protocol):
    """What the join reads of a store partition directly (Quix's ``RocksDBStorePartition``):
    the committed keys in ``[lower_bound, upper_bound)``, in key order."""

    def iter_items(self, lower_bound: bytes,
                   upper_bound: bytes | None = None) -> Iterator[tuple[bytes, bytes]]: ...


class QuixState:
    """The application's checkpoint, state store and producer, as the reward join uses them
    from its sink. Valid while the application that made ``processing`` runs."""

    def __init__(self, processing: ProcessingContext, stream_id: str) -> None:
        self._processing = processing
        self._stream_id = stream_id

    @classmethod
    def of(cls, dataframe: StreamingDataFrame) -> QuixState:
        """The state of the default store ``dataframe.register_store()`` registered."""
        return cls(dataframe.processing_context, dataframe.stream_id)

    def checkpoint(self) -> object:
        """The open checkpoint (compared by identity: a new one is a new object)."""
        return self._processing.checkpoint

    def transaction(self, partition: int) -> StateTransaction:
        """The open checkpoint's transaction of ``partition``: the same object until the
        checkpoint commits, and committed with it."""
        return self._processing.checkpoint.get_store_transaction(
            stream_id=self._stream_id, partition=partition)

    def database(self, partition: int) -> StateDatabase:
        """The store partition of ``partition`` (assigned to this process)."""
        store = self._processing.state_manager.get_store(self._stream_id)
        database = store.partitions[partition]
        if not isinstance(database, RocksDBStorePartition):
            raise TypeError(
                f"the reward join keeps its state in RocksDB, but partition {partition} of "
                f"store {store.name!r} is a {type(database).__name__}")
        return database

    def produce(self, topic: str, value: bytes, key: bytes,
                headers: KafkaHeaders | None = None) -> None:
        """Hand a message to the application's producer; the checkpoint flushes it, and
        fails unless Kafka acknowledges it, before committing the offsets."""
        self._processing.producer.produce(topic=topic, value=value, key=key, headers=headers)
