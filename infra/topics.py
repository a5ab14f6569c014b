"""Create and describe the platform's topics on a broker (kafka-python admin client)."""

from __future__ import annotations

from dataclasses import dataclass

from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewTopic
from kafka.errors import KafkaError, TopicAlreadyExistsError

from infra.errors import BrokerError
from infra.settings import Settings
from schemas.topics import TOPICS, TopicSpec, topic_name

__all__ = ["TopicState", "admin_client", "create_topics", "describe_topics"]


@dataclass(frozen=True)
class TopicState:
    name: str
    exists: bool
    partitions: int
    cleanup_policy: str
    retention_ms: str
    description: str


def admin_client(settings: Settings) -> KafkaAdminClient:
    try:
        return KafkaAdminClient(
            bootstrap_servers=settings.bootstrap_servers,
            client_id="rewardstream-admin",
            request_timeout_ms=15000,
        )
    except KafkaError as exc:
        raise BrokerError(
            f"no Kafka broker answers at {settings.bootstrap_servers} ({type(exc).__name__}): "
            "start one with `rewardstream kafka start`"
        ) from None


def _topic_configs(spec: TopicSpec) -> dict[str, str]:
    configs = {"retention.ms": str(spec.retention_ms)}
    if spec.compacted:
        configs["cleanup.policy"] = "compact"
    return configs


def create_topics(settings: Settings) -> list[tuple[str, bool]]:
    """Create every topic that is missing; returns (name, created) for each, idempotently."""
    admin = admin_client(settings)
    try:
        existing = set(admin.list_topics())
        results: list[tuple[str, bool]] = []
        for spec in TOPICS:
            name = topic_name(settings.topic_prefix, spec.name)
            if name in existing:
                results.append((name, False))
                continue
            topic = NewTopic(name, settings.topic_partitions, 1, topic_configs=_topic_configs(spec))
            try:
                admin.create_topics([topic])
                results.append((name, True))
            except TopicAlreadyExistsError:
                results.append((name, False))
        return results
    except KafkaError as exc:
        raise BrokerError(f"creating topics failed: {exc}") from None
    finally:
        admin.close()


def describe_topics(settings: Settings) -> list[TopicState]:
    admin = admin_client(settings)
    try:
        names = [topic_name(settings.topic_prefix, spec.name) for spec in TOPICS]
        existing = set(admin.list_topics())
        present = [n for n in names if n in existing]
        partitions = {
            d["name"]: len(d["partitions"]) for d in admin.describe_topics(present)
        } if present else {}
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
                cleanup_policy=configs.get(name, {}).get("cleanup.policy", "delete"),
                retention_ms=configs.get(name, {}).get("retention.ms", "-"),
                description=spec.description,
            )
            for name, spec in zip(names, TOPICS)
        ]
    finally:
        admin.close()
