"""The fault suite: real traffic through the platform while its parts fail, on one private
three-node cluster (free ports, a temporary data directory) that the scenarios share.

Each scenario gets its own topic prefix (every topic with three replicas, min ISR 2) and finds
all three nodes running: a scenario that kills a node need not restart it. The shared broker
on 19092 is never touched. Like the ``kafka`` fixture, the cluster skips the suite locally when
it cannot start and fails it under ``CI=true``.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import replace

import pytest

from infra import broker
from infra.settings import Settings
from infra.topics import create_topics
from tests.support.private_kafka import private_broker_settings, started


@pytest.fixture(scope="session")
def fault_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Settings]:
    with started(private_broker_settings(tmp_path_factory.mktemp("fault-cluster"), 3),
                 "the fault suite's three-node cluster") as settings:
        yield settings


@pytest.fixture
def cluster(fault_cluster: Settings) -> Settings:
    """The shared cluster with every node running, under a topic prefix of this scenario's."""
    broker.start(fault_cluster)  # starts whichever node an earlier scenario left down
    settings = replace(fault_cluster, topic_prefix=f"f{uuid.uuid4().hex[:10]}.")
    create_topics(settings)
    return settings
