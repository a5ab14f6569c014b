"""The platform's Kafka topics: the contract every producer and consumer names them by.

Names are suffixes; each deployment prepends its own prefix (``REWARDSTREAM_TOPIC_PREFIX``), so
several deployments, or many tests, can share one broker.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["TOPICS", "TopicSpec", "topic_name"]

_DAY_MS = 24 * 3600 * 1000


@dataclass(frozen=True)
class TopicSpec:
    name: str
    key: str
    description: str
    retention_ms: int = -1  # -1 keeps everything: the log is the source of truth
    compacted: bool = False


TOPICS: tuple[TopicSpec, ...] = (
    TopicSpec("events.raw", "trajectory_id", "validated event envelopes, the source of truth"),
    TopicSpec("events.deadletter", "-", "rejected events with a typed reason and the original bytes",
              retention_ms=30 * _DAY_MS),
    TopicSpec("events.late", "trajectory_id", "events that arrived after their trajectory was final"),
    TopicSpec("rewards", "trajectory_id", "one record per final trajectory and reward-spec version"),
    TopicSpec("metrics", "checkpoint/arm", "windowed monitor metrics", retention_ms=90 * _DAY_MS),
    TopicSpec("alerts", "fingerprint", "alert lifecycle events"),
    # Compacted: each registry event carries the checkpoint's whole state, so the newest record
    # per checkpoint id is enough to rebuild the registry.
    TopicSpec("checkpoints", "checkpoint_id", "checkpoint registry events", compacted=True),
)


def topic_name(prefix: str, name: str) -> str:
    """The full topic name for ``name`` (a :data:`TOPICS` name) under a deployment prefix."""
    if name not in {spec.name for spec in TOPICS}:
        raise KeyError(f"unknown topic {name!r}; known: {', '.join(s.name for s in TOPICS)}")
    return f"{prefix}{name}"
