"""The brokers tests run against, as fixtures: one of each kind per run.

- ``kafka`` / ``kafka_settings``: the shared broker (`rewardstream kafka start`, started if
  needed) that every test that only needs a broker uses, each test under its own topic prefix.
  Nothing stops it while the suite runs.
- ``outage_broker``: a private single-node broker (free ports, a temporary data directory) for
  the tests that stop and restart it.
- ``cluster`` / ``fault_cluster``: a private three-node cluster for the fault suite and the
  cluster's own test, which kill its nodes.

A private broker is a session fixture, so each pytest-xdist worker that runs such a test starts
one of its own (at most three clusters and three single nodes in a run of three workers) and its
tests use it one after another; tests on different workers never share one. The root conftest
hands these tests out first (``PRIVATE_BROKERS``): they are the suite's longest. When a broker
cannot start the test is skipped locally and fails under ``CI=true``.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import pytest

from infra import broker
from infra.settings import Settings, load_settings
from infra.topics import create_topics
from schemas.errors import RewardstreamError
from tests.support.private_kafka import private_broker_settings
from tests.support.required import unavailable

__all__ = ["PRIVATE_BROKERS", "cluster", "fault_cluster", "kafka", "kafka_settings",
           "outage_broker", "outage_broker_node", "private_broker"]

# The fixtures holding a private broker.
PRIVATE_BROKERS = ("fault_cluster", "outage_broker_node")


def _started(settings: Settings, what: str) -> Settings:
    try:
        broker.start(settings)
    except RewardstreamError as exc:
        broker.stop(settings)
        unavailable(f"{what} could not start: {exc}")
    return settings


def _prefixed(settings: Settings, letter: str) -> Settings:
    """``settings`` under a topic prefix of the test's own, with every platform topic made."""
    prefixed = replace(settings, topic_prefix=f"{letter}{uuid.uuid4().hex[:10]}.")
    create_topics(prefixed)
    return prefixed


@pytest.fixture(scope="session")
def kafka_settings() -> Settings:
    """Settings of the shared broker, running."""
    return _started(load_settings(), "the shared Kafka broker")


@pytest.fixture
def kafka(kafka_settings: Settings) -> Settings:
    """The shared broker under a topic prefix unique to this test, every platform topic made."""
    return _prefixed(kafka_settings, "t")


@contextmanager
def private_broker(data_dir: Path, nodes: int, what: str) -> Iterator[Settings]:
    """A private broker of ``nodes`` nodes of the calling test's own (free ports, data in
    ``data_dir``), started, and stopped after."""
    settings = _started(private_broker_settings(data_dir, nodes), what)
    try:
        yield settings
    finally:
        broker.stop(settings)


@pytest.fixture(scope="session")
def outage_broker_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Settings]:
    with private_broker(tmp_path_factory.mktemp("outage-broker"), 1, "a private broker") as node:
        yield node


@pytest.fixture
def outage_broker(outage_broker_node: Settings) -> Settings:
    """The private single-node broker, running (an earlier test may have left it stopped),
    under a topic prefix of this test's own: the test may stop and start it."""
    broker.start(outage_broker_node)
    return _prefixed(outage_broker_node, "o")


@pytest.fixture(scope="session")
def fault_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Settings]:
    with private_broker(tmp_path_factory.mktemp("fault-cluster"), 3,
                        "the three-node cluster") as nodes:
        yield nodes


@pytest.fixture
def cluster(fault_cluster: Settings) -> Settings:
    """The three-node cluster with every node running (whichever an earlier test left down is
    started), under a topic prefix of this test's own (every topic with three replicas, min
    ISR 2): the test may kill and restart nodes."""
    broker.start(fault_cluster)
    return _prefixed(fault_cluster, "f")
