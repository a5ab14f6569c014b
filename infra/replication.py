"""How many copies of each topic a cluster keeps, from how many brokers it has.

One rule for the broker's own defaults (``server.properties``), the platform's topics
(``infra.topics``) and the stream processors' internal topics: three replicas once there are
three brokers, of which two must hold a write before it is acknowledged (``acks=all``), so one
broker can be lost without losing an acknowledged event or refusing new ones.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Replication", "replication_for"]


@dataclass(frozen=True)
class Replication:
    factor: int
    min_insync: int


def replication_for(brokers: int) -> Replication:
    factor = max(1, min(brokers, 3))
    return Replication(factor, 2 if factor == 3 else 1)
