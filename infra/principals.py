"""Who may do what on Kafka: one principal per service, the topics it writes and reads, the
consumer groups it joins and the internal topics it owns.

This table is the one source: ``rewardstream kafka principals create`` makes its ACLs, the
"Kafka principals and ACLs" table of docs/security.md is checked against it, and
docker-compose.yml gives each service the user named here. Anything not granted is refused
(``allow.everyone.if.no.acl.found=false``); ``admin`` is the only super user.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from schemas.topics import TopicName, topic_name

__all__ = ["PRINCIPALS", "AclGrant", "Principal", "acl_grants", "principal"]

Operation = Literal["READ", "WRITE", "DESCRIBE_CONFIGS", "ALL"]
PatternType = Literal["LITERAL", "PREFIXED"]


@dataclass(frozen=True)
class Principal:
    """One Kafka user (``User:<name>``).

    ``writes``/``reads`` name platform topics (:data:`schemas.topics.TOPICS`). ``groups`` and
    ``owns`` are names under the deployment's topic prefix (``{prefix}``); a trailing ``*``
    makes a name a prefix. ``owns`` are the internal topics its stream framework creates
    (changelogs, repartition and assignor topics): every operation on them is allowed.
    """

    name: str
    runs: str
    writes: tuple[TopicName, ...]
    reads: tuple[TopicName, ...]
    groups: tuple[str, ...] = ()
    owns: tuple[str, ...] = ()


# The reward join's consumer group is `<prefix>rewardjoin-<spec version>`; faust names its
# internal topics `<group>-...`, Quix Streams `changelog__<group>--...` and `repartition__...`.
_REWARDJOIN = "{prefix}rewardjoin-*"
_MONITORS = "{prefix}rewardstream-monitors"

PRINCIPALS: tuple[Principal, ...] = (
    # Reads events.raw back (no group) to rebuild its dedupe window on start.
    Principal("ingest", "serve ingest", writes=("events.raw", "events.deadletter"),
              reads=("events.raw",)),
    # completion.served and broken tool calls; follows the registry to hot-load checkpoints.
    Principal("gateway", "serve gateway", writes=("events.raw", "quarantine"),
              reads=("checkpoints",)),
    Principal("reward-worker", "worker", writes=("rewards", "events.late", "quarantine"),
              reads=("events.raw",), groups=(_REWARDJOIN,),
              owns=(_REWARDJOIN, "changelog__" + _REWARDJOIN, "repartition__" + _REWARDJOIN)),
    Principal("archiver", "archive", writes=("quarantine",), reads=("events.raw",)),
    # checkpoints: only the detector's auto-protect rollback (off unless configured).
    Principal("monitors", "monitors metrics, monitors detect, alerts deliver",
              writes=("metrics", "alerts", "quarantine", "checkpoints"),
              reads=("events.raw", "events.deadletter", "rewards", "metrics", "alerts",
                     "checkpoints"),
              groups=(_MONITORS, "rewardstream-alert-delivery"), owns=(_MONITORS + "-*",)),
    # The trainer and its gate; `registry promote|rollback` run as it too.
    Principal("trainer", "train, registry", writes=("checkpoints", "quarantine"),
              reads=("rewards", "checkpoints"), groups=("rewardstream-trainer",)),
    # Staff actions: acknowledge/silence alerts, promote/roll back checkpoints; an alert's
    # sample trajectories are read from events.raw and rewards.
    Principal("console", "serve console", writes=("alerts", "checkpoints", "quarantine"),
              reads=("alerts", "metrics", "checkpoints", "quarantine", "events.raw",
                     "rewards")),
)


@dataclass(frozen=True)
class AclGrant:
    """One ALLOW ACL: ``User:<principal>`` may ``operation`` the resource, from any host."""

    principal: str
    resource: Literal["TOPIC", "GROUP"]
    name: str
    pattern: PatternType
    operation: Operation


def principal(name: str) -> Principal:
    for each in PRINCIPALS:
        if each.name == name:
            return each
    raise KeyError(f"unknown Kafka principal {name!r}; known: "
                   f"{', '.join(p.name for p in PRINCIPALS)}")


def _named(template: str, topic_prefix: str) -> tuple[str, PatternType]:
    name = template.replace("{prefix}", topic_prefix)
    return (name[:-1], "PREFIXED") if name.endswith("*") else (name, "LITERAL")


def acl_grants(each: Principal, topic_prefix: str) -> list[AclGrant]:
    """The ACLs that give ``each`` exactly its table row under a deployment's topic prefix.

    READ and WRITE imply DESCRIBE (metadata, offsets). DESCRIBE_CONFIGS on the same topics is
    for Quix Streams, which inspects the configuration of every topic it uses."""
    grants = [AclGrant(each.name, "TOPIC", topic_name(topic_prefix, name), "LITERAL", "WRITE")
              for name in each.writes]
    grants += [AclGrant(each.name, "TOPIC", topic_name(topic_prefix, name), "LITERAL", "READ")
               for name in each.reads]
    grants += [AclGrant(each.name, "TOPIC", topic_name(topic_prefix, name), "LITERAL",
                        "DESCRIBE_CONFIGS")
               for name in dict.fromkeys(each.writes + each.reads)]
    grants += [AclGrant(each.name, "GROUP", *_named(group, topic_prefix), "READ")
               for group in each.groups]
    grants += [AclGrant(each.name, "TOPIC", *_named(owned, topic_prefix), "ALL")
               for owned in each.owns]
    return grants
