"""Create and describe the platform's topics on a broker (kafka-python admin client).

Topics get the replication of the cluster they are created on (``infra.replication``), from the
brokers it reports; creation waits until it reports ``REWARDSTREAM_KAFKA_BROKERS`` of them, so
a cluster still starting cannot give a topic fewer replicas than it will have.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewTopic
from kafka.errors import (
    KafkaError,
    NodeNotReadyError,
    TopicAlreadyExistsError,
    UnknownBrokerIdError,
)

from infra.errors import BrokerError
from infra.kafka_auth import python_client_options
from infra.replication import Replication, replication_for
from infra.settings import Settings
from schemas.topics import TOPICS, TopicSpec, topic_name

__all__ = ["TopicState", "admin_client", "cluster_replication", "create_topics",
           "describe_topics", "settings_replication"]

_BROKERS_WAIT_S = 60.0


@dataclass(frozen=True)
class TopicState:
    name: str
    exists: bool
    partitions: int
    replicas: int
    min_insync: str
    cleanup_policy: str
    retention_ms: str
    description: str


def admin_client(settings: Settings) -> KafkaAdminClient:
    try:
        return KafkaAdminClient(client_id="rewardstream-admin", request_timeout_ms=15000,
                                **python_client_options(settings))
    except KafkaError as exc:
        auth = settings.kafka_auth
        # kafka-python reports refused credentials as a bootstrap timeout, like a missing broker.
        refused = (f", or it refused {auth.sasl_mechanism} user {auth.username!r} (the log "
                   "names SaslAuthenticationFailed then)" if auth.sasl else "")
        raise BrokerError(
            f"no Kafka broker answers at {settings.bootstrap_servers} ({type(exc).__name__})"
            f"{refused}: start one with `rewardstream kafka start`"
        ) from None


def cluster_replication(settings: Settings, admin: KafkaAdminClient,
                        wait_s: float = _BROKERS_WAIT_S) -> Replication:
    """The replication topics get on the cluster ``admin`` talks to, once it reports at least
    ``REWARDSTREAM_KAFKA_BROKERS`` brokers (BrokerError after ``wait_s``)."""
    deadline = time.monotonic() + wait_s
    while True:
        brokers = len(admin.describe_cluster().get("brokers", []))
        if brokers >= settings.kafka_brokers:
            return replication_for(brokers)
        if time.monotonic() >= deadline:
            raise BrokerError(
                f"the cluster at {settings.bootstrap_servers} reports {brokers} of the "
                f"{settings.kafka_brokers} brokers REWARDSTREAM_KAFKA_BROKERS names after "
                f"{wait_s:g} s: start the missing ones (`rewardstream kafka status` lists them)")
        time.sleep(1.0)


def settings_replication(settings: Settings) -> Replication:
    """``cluster_replication`` for processes that create their own internal topics."""
    admin = admin_client(settings)
    try:
        return cluster_replication(settings, admin)
    finally:
        admin.close()


def _topic_configs(spec: TopicSpec, replication: Replication) -> dict[str, str]:
    configs = {"retention.ms": str(spec.retention_ms)}
    if replication.factor > 1:
        configs["min.insync.replicas"] = str(replication.min_insync)
    if spec.compacted:
        configs["cleanup.policy"] = "compact"
    if spec.max_message_bytes is not None:
        configs["max.message.bytes"] = str(spec.max_message_bytes)
    return configs


def create_topics(settings: Settings) -> list[tuple[str, bool]]:
    """Create every topic that is missing; returns (name, created) for each, idempotently.

    A cluster that has just started may name a controller its clients do not know yet: such
    an attempt is made again with a new client, for up to a minute."""
    deadline = time.monotonic() + _BROKERS_WAIT_S
    while True:
        admin = admin_client(settings)
        try:
            return _create_missing(settings, admin)
        except (UnknownBrokerIdError, NodeNotReadyError) as exc:
            if time.monotonic() >= deadline:
                raise BrokerError(f"creating topics failed: {exc!r}") from None
        except KafkaError as exc:
            raise BrokerError(f"creating topics failed: {exc}") from None
        finally:
            admin.close()
        time.sleep(1.0)


def _create_missing(settings: Settings, admin: KafkaAdminClient) -> list[tuple[str, bool]]:
    existing = set(admin.list_topics())
    replication = cluster_replication(settings, admin)
    results: list[tuple[str, bool]] = []
    for spec in TOPICS:
        name = topic_name(settings.topic_prefix, spec.name)
        if name in existing:
            results.append((name, False))
            continue
        topic = NewTopic(name, settings.topic_partitions, replication.factor,
                         topic_configs=_topic_configs(spec, replication))
        try:
            admin.create_topics([topic])
            results.append((name, True))
        except TopicAlreadyExistsError:
            results.append((name, False))
    return results


def describe_topics(settings: Settings) -> list[TopicState]:
    admin = admin_client(settings)
    try:
        names = [topic_name(settings.topic_prefix, spec.name) for spec in TOPICS]
        existing = set(admin.list_topics())
        present = [n for n in names if n in existing]
        described_topics = admin.describe_topics(present) if present else []
        partitions = {d["name"]: len(d["partitions"]) for d in described_topics}
        replicas = {d["name"]: min((len(p["replica_nodes"]) for p in d["partitions"]), default=0)
                    for d in described_topics}
        configs: dict[str, dict[str, str]] = {}
        if present:
            resources = [ConfigResource(ConfigResourceType.TOPIC, n) for n in present]
            described = admin.describe_configs(resources).get("topic", {})
            for res_name, entries in described.items():
                configs[res_name] = {key: entry["value"] for key, entry in entries.items()}
        return [
            TopicState(
                name=name,
                exists=name in existing,
                partitions=partitions.get(name, 0),
                replicas=replicas.get(name, 0),
                min_insync=configs.get(name, {}).get("min.insync.replicas", "-"),
                cleanup_policy=configs.get(name, {}).get("cleanup.policy", "delete"),
                retention_ms=configs.get(name, {}).get("retention.ms", "-"),
                description=spec.description,
            )
            for name, spec in zip(names, TOPICS, strict=True)
        ]
    finally:
        admin.close()
