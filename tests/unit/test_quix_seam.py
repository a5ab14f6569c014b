"""The Quix Streams internals the reward join reaches (``streams/quix_seam.py``), checked against
the installed quixstreams: each attribute and call the seam makes exists with a signature that
accepts it, and the store partition and its transaction behave as the join's store relies on.

A failure here after upgrading quixstreams names what changed; mend ``streams/quix_seam.py``
(and nothing else) before lifting the version pin in ``pyproject.toml``.
"""

from __future__ import annotations

import importlib
import inspect
import typing
from pathlib import Path
from typing import Any

import pytest
import quixstreams
from quixstreams.checkpointing import Checkpoint
from quixstreams.dataframe import StreamingDataFrame
from quixstreams.internal_producer import InternalProducer
from quixstreams.processing import ProcessingContext
from quixstreams.sinks import BaseSink
from quixstreams.state import StateStoreManager
from quixstreams.state.base import PartitionTransaction, Store
from quixstreams.state.rocksdb import RocksDBStorePartition
from quixstreams.state.rocksdb.transaction import RocksDBPartitionTransaction

from streams.join_shell import JoinShell
from streams.quix_seam import BrokerUnavailable, StateDatabase, StateTransaction, TopicNotSeen

_SEAM = "streams/quix_seam.py"


def _changed(what: str, detail: str) -> str:
    return f"quixstreams {quixstreams.__version__}: {what} {detail}; {_SEAM} relies on it"


def _attribute(owner: type, name: str) -> Any:
    assert hasattr(owner, name), _changed(f"{owner.__name__}.{name}", "no longer exists")
    return getattr(owner, name)


# (owner, method, the arguments the seam or the join passes, after self)
CALLS: list[tuple[type, str, tuple[Any, ...], dict[str, Any]]] = [
    (Checkpoint, "get_store_transaction", (), {"stream_id": "s", "partition": 0}),
    (StateStoreManager, "get_store", ("s",), {}),
    (InternalProducer, "produce", (),
     {"topic": "t", "value": b"v", "key": b"k", "headers": [("late", b"final")]}),
    (RocksDBStorePartition, "iter_items", (b"o/", b"o0"), {}),
    (RocksDBStorePartition, "begin", (), {}),
    (RocksDBPartitionTransaction, "get_bytes", (b"k",), {"prefix": b""}),
    (RocksDBPartitionTransaction, "set_bytes", (b"k", b"v"), {"prefix": b""}),
    (RocksDBPartitionTransaction, "delete", (b"k",), {"prefix": b""}),
    (RocksDBPartitionTransaction, "prepare", (), {}),
    (RocksDBPartitionTransaction, "flush", (), {}),
    # Quix calls the sink with these, positionally (JoinShell overrides both).
    (BaseSink, "add", (b"v", b"k", 0, [], "t", 0, 0), {}),
    (BaseSink, "flush", (), {}),
]


@pytest.mark.parametrize(("owner", "name", "args", "kwargs"), CALLS,
                         ids=[f"{owner.__name__}.{name}" for owner, name, _, _ in CALLS])
def test_each_call_the_seam_makes_is_accepted(owner: type, name: str, args: tuple[Any, ...],
                                              kwargs: dict[str, Any]) -> None:
    signature = inspect.signature(_attribute(owner, name))
    try:
        signature.bind(None, *args, **kwargs)
    except TypeError as exc:
        shown = ", ".join([*map(repr, args), *(f"{k}=..." for k in kwargs)])
        pytest.fail(_changed(f"{owner.__name__}.{name}{signature}",
                             f"no longer accepts ({shown}): {exc}"))


# (owner, attribute, what it must be: a property, or the class a dataclass field holds)
ATTRIBUTES: list[tuple[type, str, type | None]] = [
    (StreamingDataFrame, "processing_context", None),
    (StreamingDataFrame, "stream_id", None),
    (ProcessingContext, "checkpoint", None),
    (Store, "partitions", None),
    (ProcessingContext, "producer", InternalProducer),
    (ProcessingContext, "state_manager", StateStoreManager),
]


@pytest.mark.parametrize(("owner", "name", "holds"), ATTRIBUTES,
                         ids=[f"{owner.__name__}.{name}" for owner, name, _ in ATTRIBUTES])
def test_each_attribute_the_seam_reads_is_there(owner: type, name: str,
                                                holds: type | None) -> None:
    if holds is None:
        assert isinstance(_attribute(owner, name), property), \
            _changed(f"{owner.__name__}.{name}", "is no longer a property")
        return
    fields = typing.get_type_hints(owner)
    assert name in fields, _changed(f"{owner.__name__}.{name}", "is no longer a field")
    assert fields[name] is holds, _changed(
        f"{owner.__name__}.{name}", f"now holds {fields[name]!r}, not {holds.__name__}")


def test_the_store_partitions_transactions_are_the_ones_the_join_store_is_given() -> None:
    made = inspect.signature(RocksDBStorePartition.begin).return_annotation
    assert made in (RocksDBPartitionTransaction, "RocksDBPartitionTransaction"), \
        _changed("RocksDBStorePartition.begin()", f"now makes {made!r}")
    assert issubclass(RocksDBPartitionTransaction, PartitionTransaction), \
        _changed("RocksDBPartitionTransaction", "is no longer a PartitionTransaction")


# (the failure the worker tells apart, the Quix module that must still raise it)
RAISED: list[tuple[type[Exception], str]] = [
    (BrokerUnavailable, "quixstreams.kafka.consumer"),
    (TopicNotSeen, "quixstreams.models.topics.manager"),
]


@pytest.mark.parametrize(("failure", "module"), RAISED, ids=[f.__name__ for f, _ in RAISED])
def test_the_failures_the_worker_tells_apart_are_still_raised_by_quix(
        failure: type[Exception], module: str) -> None:
    source = inspect.getsource(importlib.import_module(module))
    assert f"raise {failure.__name__}(" in source, \
        _changed(module, f"no longer raises {failure.__name__}")


def test_the_join_shell_still_implements_every_abstract_method_of_the_sink() -> None:
    missing = sorted(getattr(JoinShell, "__abstractmethods__", frozenset()))
    assert not missing, _changed("BaseSink", f"now requires {missing} of a sink")


def test_a_transaction_reads_its_own_writes_and_commits_them_to_the_partition(
        tmp_path: Path) -> None:
    partition = RocksDBStorePartition(str(tmp_path / "db"))
    try:
        database: StateDatabase = partition
        begun = partition.begin()
        transaction: StateTransaction = begun
        transaction.set_bytes(b"o/a", b"1", prefix=b"")
        transaction.set_bytes(b"o/b", b"2", prefix=b"")
        transaction.set_bytes(b"p/c", b"3", prefix=b"")
        transaction.delete(b"o/b", prefix=b"")
        assert transaction.get_bytes(b"o/a", prefix=b"") == b"1", "reads its own write"
        assert transaction.get_bytes(b"o/b", prefix=b"") is None, "reads its own delete"
        assert list(database.iter_items(b"o/", b"o0")) == [], "nothing committed yet"
        begun.prepare()
        begun.flush()
        assert list(database.iter_items(b"o/", b"o0")) == [(b"o/a", b"1")], \
            _changed("RocksDBStorePartition.iter_items", "no longer reads [lower, upper)")
        assert list(database.iter_items(b"o/")) == [(b"o/a", b"1"), (b"p/c", b"3")], \
            _changed("RocksDBStorePartition.iter_items", "without an upper bound changed")
        assert partition.begin().get_bytes(b"p/c", prefix=b"") == b"3"
    finally:
        partition.close()
