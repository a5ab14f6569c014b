"""Which organisations a staff member sees (pure).

A console key names its orgs, or ``*``: the fleet view, which sees everything. Whatever the
console shows names its orgs: an alert its ``org`` label, a metric window its ``org_id``, a
checkpoint the ``org_id`` or ``orgs`` of its lineage, a silence its ``org`` matcher. What names
no org, or ``*`` (metrics not split per org, quarantined records, checkpoints trained before
lineage named orgs), is fleet-wide: an aggregate over orgs says something about each of them,
so only fleet staff see it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from serving.ingest.keys import ALL

__all__ = ["FLEET", "Grant", "record_orgs"]


def record_orgs(record: Mapping[str, Any]) -> frozenset[str]:
    """The orgs a JSON view names: ``org_id``, ``orgs``, or the ``org`` of its ``labels`` (an
    alert) or ``matchers`` (a silence); empty when it names none."""
    named: list[Any] = [record.get("org_id")]
    orgs = record.get("orgs")
    if isinstance(orgs, list | tuple | set | frozenset):
        named += list(orgs)
    for nested in ("labels", "matchers"):
        inner = record.get(nested)
        if isinstance(inner, Mapping):
            named.append(inner.get("org"))
    return frozenset(org for org in named if isinstance(org, str) and org)


@dataclass(frozen=True)
class Grant:
    orgs: frozenset[str]

    @property
    def fleet(self) -> bool:
        return ALL in self.orgs

    def sees(self, org: str | None) -> bool:
        return self.fleet or (org is not None and org != ALL and org in self.orgs)

    def sees_all(self, orgs: Iterable[str]) -> bool:
        """True when every org named is granted; what names none is the fleet's."""
        named = frozenset(orgs)
        return self.fleet or (bool(named) and all(self.sees(org) for org in named))

    def sees_record(self, record: Mapping[str, Any]) -> bool:
        return self.sees_all(record_orgs(record))


FLEET = Grant(frozenset({ALL}))
