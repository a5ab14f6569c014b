"""Arms to servable checkpoints: which checkpoint of the registry (``schemas.checkpoints``)
each arm is served by, and the backend model name that serves it."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from schemas.checkpoints import CheckpointEvent, Registry
from serving.gateway.arms import CanaryOverlay

__all__ = ["Target", "canary_overlay", "resolve_targets"]


@dataclass(frozen=True)
class Target:
    """What a request is served by: a checkpoint id and the backend model name that serves it.

    ``adapter_path`` is set for LoRA checkpoints, which the backend hot-loads under
    ``served_name`` (the checkpoint id, so every version has its own name).
    """

    checkpoint_id: str
    served_name: str
    adapter_path: str | None = None


def _servable(base_path: str | None) -> Callable[[CheckpointEvent], bool]:
    """Checkpoints the backend can serve: adapters, or a full model that is the base itself."""
    return lambda e: e.adapter or (base_path is not None and e.path == base_path)


def _as_target(event: CheckpointEvent | None, base: Target) -> Target:
    if event is None or not event.adapter:
        return base if event is None else Target(event.checkpoint_id, base.served_name)
    return Target(event.checkpoint_id, event.checkpoint_id, event.path)


def resolve_targets(
    registry: Registry, arm_targets: Mapping[str, str], base: Target,
    base_path: str | None = None,
) -> dict[str, Target]:
    """Each arm's target: ``production`` (the base before any promotion), ``candidate`` or
    ``canary`` (else production), ``base``, or a pinned checkpoint id (production when it is
    gone or bad)."""
    servable = _servable(base_path)
    prod = _as_target(registry.production(keep=servable), base)
    resolved: dict[str, Target] = {}
    for arm, target in arm_targets.items():
        pinned = registry.latest.get(target)
        if target == "base":
            resolved[arm] = base
        elif target == "candidate":
            candidate = registry.candidate(keep=servable)
            resolved[arm] = prod if candidate is None else _as_target(candidate, base)
        elif target == "canary":
            canary = registry.canary(keep=servable)
            resolved[arm] = prod if canary is None else _as_target(canary, base)
        elif target != "production" and pinned is not None and servable(pinned) and \
                pinned.status in ("candidate", "canary", "production"):
            resolved[arm] = _as_target(pinned, base)
        else:
            resolved[arm] = prod
    return resolved


def canary_overlay(registry: Registry, base_path: str | None = None) -> CanaryOverlay | None:
    """The started canary's share and scope, when the backend can serve it."""
    canary = registry.canary(keep=_servable(base_path))
    if canary is None or canary.canary is None:
        return None
    spec = canary.canary
    return CanaryOverlay(spec.share, spec.salt, spec.org)
