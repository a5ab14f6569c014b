"""The platform's Kafka topics: the contract every producer and consumer names them by.

Names are suffixes; each deployment prepends its own prefix (``REWARDSTREAM_TOPIC_PREFIX``), so
several deployments, or many tests, can share one broker.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal, get_args

__all__ = ["ORG_HEADER", "REWARD_RECORD_MAX_BYTES", "TOPICS", "TopicName", "TopicSpec",
           "header_org", "topic_name"]

# Every platform topic, by the name code refers to it with (the type checker holds callers to it).
TopicName = Literal["events.raw", "events.deadletter", "events.late", "quarantine", "rewards",
                    "metrics", "alerts", "checkpoints"]

_DAY_MS = 24 * 3600 * 1000
# The header naming the org of the key a record came with, on every record ingest writes to
# events.raw and events.deadletter: readers that need only the org need not parse the value,
# and a dead letter (which may not parse at all) still says whose it was.
ORG_HEADER = "org_id"
# A reward record carries every sample of its trajectory (prompt and completion token ids, one
# logprob per token), so a long trajectory's record outgrows Kafka's 1 MiB default.
REWARD_RECORD_MAX_BYTES = 16 << 20


@dataclass(frozen=True)
class TopicSpec:
    name: TopicName
    key: str
    description: str
    retention_ms: int = -1  # -1 keeps everything: the log is the source of truth
    compacted: bool = False
    max_message_bytes: int | None = None  # None: the broker's default (1 MiB)


TOPICS: tuple[TopicSpec, ...] = (
    TopicSpec("events.raw", "trajectory_id", "validated event envelopes, the source of truth"),
    TopicSpec("events.deadletter", "-",
              "rejected events with a typed reason and the original bytes",
              retention_ms=30 * _DAY_MS),
    TopicSpec("events.late", "trajectory_id",
              "events that arrived after their trajectory was final"),
    TopicSpec("quarantine", "consumer|topic|partition|offset",
              "records a consumer found on a topic and could not use, with the reason",
              retention_ms=30 * _DAY_MS),
    TopicSpec("rewards", "trajectory_id", "one record per final trajectory and reward-spec version",
              max_message_bytes=REWARD_RECORD_MAX_BYTES),
    TopicSpec("metrics", "checkpoint/arm", "windowed monitor metrics", retention_ms=90 * _DAY_MS),
    TopicSpec("alerts", "fingerprint", "alert lifecycle events"),
    # Compacted: each registry event carries the checkpoint's whole state, so the newest record
    # per checkpoint id is enough to rebuild the registry.
    TopicSpec("checkpoints", "checkpoint_id", "checkpoint registry events", compacted=True),
)


def topic_name(prefix: str, name: TopicName) -> str:
    """The full topic name for ``name`` under a deployment prefix."""
    if name not in get_args(TopicName):  # a name from configuration or the command line
        raise KeyError(f"unknown topic {name!r}; known: {', '.join(get_args(TopicName))}")
    return f"{prefix}{name}"


assert {spec.name for spec in TOPICS} == set(get_args(TopicName)), "a topic without its spec"


def header_org(headers: Iterable[tuple[str, bytes]] | Mapping[str, bytes] | None) -> str | None:
    """The org a record's :data:`ORG_HEADER` names, if it names one (as UTF-8)."""
    pairs = headers.items() if isinstance(headers, Mapping) else headers or ()
    for name, raw in pairs:
        if name == ORG_HEADER and raw:
            try:
                return bytes(raw).decode()
            except UnicodeDecodeError:
                return None
    return None
