"""The checkpoint registry as the gateway sees it: a pure fold over ``CheckpointEvent``s, and
the resolution of each arm's target to a servable checkpoint.

Production is the checkpoint whose newest event has status ``production`` and the highest
``sequence``; a rolled-back checkpoint's newest status is ``rolled_back``, so the fold falls back
to the previous production without anyone re-announcing it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from schemas.checkpoints import CheckpointEvent, CheckpointStatus, by_status, newest_per_checkpoint

__all__ = ["Registry", "Target", "fold", "fold_all", "newest_candidate", "production",
           "resolve_targets"]

Registry = Mapping[str, CheckpointEvent]  # checkpoint id -> its newest event


@dataclass(frozen=True)
class Target:
    """What a request is served by: a checkpoint id and the backend model name that serves it.

    ``adapter_path`` is set for LoRA checkpoints, which the backend hot-loads under
    ``served_name`` (the checkpoint id, so every version has its own name).
    """

    checkpoint_id: str
    served_name: str
    adapter_path: str | None = None


def fold(registry: Registry, event: CheckpointEvent) -> dict[str, CheckpointEvent]:
    """The registry after ``event``; a replayed older event for a checkpoint changes nothing."""
    return newest_per_checkpoint([event], dict(registry))


def fold_all(events: Iterable[CheckpointEvent], registry: Registry | None = None) -> dict:
    return newest_per_checkpoint(events, dict(registry or {}))


def _newest(registry: Registry, status: CheckpointStatus,
            servable: set[str]) -> CheckpointEvent | None:
    found = by_status(registry.values(), status, lambda e: e.checkpoint_id in servable)
    return found[0] if found else None


def _servable(registry: Registry, base_path: str | None) -> set[str]:
    """Checkpoints the backend can serve: adapters, or a full model that is the base itself."""
    return {
        cid for cid, e in registry.items()
        if e.adapter or (base_path is not None and e.path == base_path)
    }


def production(registry: Registry, base_path: str | None = None) -> CheckpointEvent | None:
    return _newest(registry, "production", _servable(registry, base_path))


def newest_candidate(registry: Registry, base_path: str | None = None) -> CheckpointEvent | None:
    return _newest(registry, "candidate", _servable(registry, base_path))


def _as_target(event: CheckpointEvent | None, base: Target) -> Target:
    if event is None or not event.adapter:
        return base if event is None else Target(event.checkpoint_id, base.served_name)
    return Target(event.checkpoint_id, event.checkpoint_id, event.path)


def resolve_targets(
    registry: Registry, arm_targets: Mapping[str, str], base: Target,
    base_path: str | None = None,
) -> dict[str, Target]:
    """Each arm's target: ``production`` (the base before any promotion), ``candidate`` (else
    production), ``base``, or a pinned checkpoint id (production when it is gone or bad)."""
    prod = _as_target(production(registry, base_path), base)
    servable = _servable(registry, base_path)
    resolved: dict[str, Target] = {}
    for arm, target in arm_targets.items():
        if target == "base":
            resolved[arm] = base
        elif target == "candidate":
            candidate = newest_candidate(registry, base_path)
            resolved[arm] = prod if candidate is None else _as_target(candidate, base)
        elif target != "production" and target in servable and \
                registry[target].status in ("candidate", "production"):
            resolved[arm] = _as_target(registry[target], base)
        else:
            resolved[arm] = prod
    return resolved
