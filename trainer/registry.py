"""The checkpoint registry as a pure fold over ``checkpoints`` events, and the events commands make.

Each event carries its checkpoint's whole state, so the newest event per checkpoint (all that a
compacted topic keeps) is enough. Aliases:

* ``production`` — of the checkpoints whose newest status is ``production``, the one with the
  highest sequence. A promotion never rewrites the previous production checkpoint, so it stays
  next in line: rolling back the current one (status ``rolled_back``) restores it.
* ``candidate`` — the newest checkpoint still waiting for the gate.

Lineage generations (parent chain depth) order checkpoints for the trainer's staleness bound.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from schemas.checkpoints import (
    CheckpointEvent,
    CheckpointKind,
    CheckpointStatus,
    by_status,
    newest_per_checkpoint,
)
from schemas.ids import uuid7
from trainer.errors import RegistryError

__all__ = ["Registry", "fold", "promotion", "rejection", "rollback", "transition"]


@dataclass(frozen=True)
class Registry:
    latest: dict[str, CheckpointEvent]  # checkpoint id -> its newest event
    history: tuple[CheckpointEvent, ...]  # every event read, by sequence

    @property
    def next_sequence(self) -> int:
        return max((e.sequence for e in self.history), default=0) + 1

    def get(self, checkpoint_id: str) -> CheckpointEvent:
        try:
            return self.latest[checkpoint_id]
        except KeyError:
            raise RegistryError(
                f"checkpoint {checkpoint_id!r} is not in the registry; "
                "see `rewardstream registry list` for the known ids"
            ) from None

    def _by_status(self, status: CheckpointStatus, model: str | None) -> list[CheckpointEvent]:
        return by_status(self.latest.values(), status, lambda e: model is None or e.model == model)

    def production(self, model: str | None = None) -> CheckpointEvent | None:
        found = self._by_status("production", model)
        return found[0] if found else None

    def previous_production(self, model: str | None = None) -> CheckpointEvent | None:
        found = self._by_status("production", model)
        return found[1] if len(found) > 1 else None

    def candidate(self, model: str | None = None) -> CheckpointEvent | None:
        found = self._by_status("candidate", model)
        return found[0] if found else None

    def aliases(self, checkpoint_id: str) -> list[str]:
        event = self.latest.get(checkpoint_id)
        if event is None:
            return []
        names = []
        for name, holder in (("production", self.production(event.model)),
                             ("candidate", self.candidate(event.model))):
            if holder is not None and holder.checkpoint_id == checkpoint_id:
                names.append(name)
        return names

    def generation(self, checkpoint_id: str) -> int | None:
        """Depth in the lineage (a root is 0); None for an unknown checkpoint."""
        depth, current, seen = 0, self.latest.get(checkpoint_id), set()
        if current is None:
            return None
        while current.parent_id is not None and current.checkpoint_id not in seen:
            seen.add(current.checkpoint_id)
            depth += 1
            parent = self.latest.get(current.parent_id)
            if parent is None:
                break
            current = parent
        return depth


def fold(events: Iterable[CheckpointEvent]) -> Registry:
    """The registry after ``events`` (any order; sequence decides)."""
    history = tuple(sorted(events, key=lambda e: e.sequence))
    return Registry(latest=newest_per_checkpoint(history), history=history)


def transition(
    registry: Registry, checkpoint_id: str, kind: CheckpointKind, status: CheckpointStatus,
    now: datetime, actor: str, evidence: dict[str, Any],
    new_id: Callable[[], str] = lambda: str(uuid7()),
) -> CheckpointEvent:
    """The checkpoint's state carried forward with a new kind, status, evidence and actor."""
    current = registry.get(checkpoint_id)
    return current.model_copy(update={
        "event_id": new_id(), "sequence": registry.next_sequence, "occurred_at": now,
        "kind": kind, "status": status, "actor": actor, "evidence": evidence,
    })


def promotion(registry: Registry, checkpoint_id: str, now: datetime, actor: str,
              evidence: dict[str, Any]) -> CheckpointEvent:
    event = registry.get(checkpoint_id)
    incumbent = registry.production(event.model)
    if incumbent is not None and incumbent.checkpoint_id == checkpoint_id:
        raise RegistryError(f"checkpoint {checkpoint_id!r} is already production")
    evidence = {"previous_production": incumbent.checkpoint_id if incumbent else None, **evidence}
    return transition(registry, checkpoint_id, "promoted", "production", now, actor, evidence)


def rejection(registry: Registry, checkpoint_id: str, now: datetime, actor: str,
              evidence: dict[str, Any]) -> CheckpointEvent:
    return transition(registry, checkpoint_id, "rejected", "rejected", now, actor, evidence)


def rollback(registry: Registry, model: str | None, now: datetime, actor: str,
             reason: str) -> list[CheckpointEvent]:
    """Two events: production marked rolled back, and the previous production promoted again."""
    current = registry.production(model)
    previous = registry.previous_production(model)
    if current is None or previous is None:
        raise RegistryError(
            "nothing to roll back to: the registry needs a production checkpoint and an earlier "
            "one that is still eligible (status production); promote one with "
            "`rewardstream registry promote ID`"
        )
    evidence = {"reason": reason, "restored": previous.checkpoint_id}
    down = transition(registry, current.checkpoint_id, "rolled_back", "rolled_back", now, actor,
                      evidence)
    after = fold([*registry.history, down])
    up = transition(after, previous.checkpoint_id, "promoted", "production", now, actor,
                    {"reason": reason, "rollback_of": current.checkpoint_id})
    return [down, up]
