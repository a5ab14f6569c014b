"""Registry events of the release loop (``schemas.checkpoints`` holds the rest): a canary's
start, its interim looks and its abort, and a checkpoint served outside the platform registered
by name.

A canary's life on ``checkpoints``: ``evaluated`` (the gate passed: status ``canary``, waiting)
→ ``canary_started`` (its ``CanarySpec``: share, scope, baseline, rule) → ``canary_look``
events (the sequential rule's state, as evidence) → ``promoted`` or ``rejected``
(``conclude_canary``), or ``aborted`` (a critical alert, production changed under it, or by
hand). Every event carries the spec forward, so compaction keeps what the canary was.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from schemas.checkpoints import CanarySpec, CheckpointEvent, Registry, transition
from schemas.errors import RegistryError
from schemas.ids import uuid7

__all__ = ["CANARY_ARM", "abort_canary", "canary_look", "external_registration",
           "live_canary", "start_canary"]

CANARY_ARM = "canary"  # the arm the gateway gives a started canary's users


def live_canary(registry: Registry, model: str | None = None) -> CheckpointEvent | None:
    """The started, undecided canary (of ``model``, when given), if one is."""
    found = registry.canary(model)
    return found if found is not None and found.canary is not None else None


def start_canary(registry: Registry, checkpoint_id: str, now: datetime, actor: str,
                 spec: CanarySpec) -> CheckpointEvent:
    """A checkpoint waiting in ``canary`` status starts serving its share of users."""
    current = registry.get(checkpoint_id)
    if current.status != "canary":
        raise RegistryError(f"checkpoint {checkpoint_id!r} is {current.status}: only a checkpoint "
                            "that passed the gate (status canary) starts a canary")
    if current.canary is not None:
        raise RegistryError(f"the canary of {checkpoint_id!r} started at "
                            f"{current.canary.started_at.isoformat()}; conclude or abort it")
    running = live_canary(registry, current.model)
    if running is not None:
        raise RegistryError(f"{running.checkpoint_id!r} is already the canary of model "
                            f"{current.model!r}; conclude or abort it first")
    production = registry.production(current.model)
    if production is None or production.checkpoint_id != spec.baseline:
        raise RegistryError(f"baseline {spec.baseline!r} is not production of model "
                            f"{current.model!r}")
    event = transition(registry, checkpoint_id, "canary_started", "canary", now, actor,
                       {**current.evidence, "canary": spec.model_dump(mode="json")})
    return event.model_copy(update={"canary": spec})


def _started(registry: Registry, checkpoint_id: str) -> CheckpointEvent:
    current = registry.get(checkpoint_id)
    if current.status != "canary" or current.canary is None:
        raise RegistryError(f"checkpoint {checkpoint_id!r} has no running canary "
                            f"(it is {current.status}); see `rewardstream canary status`")
    return current


def canary_look(registry: Registry, checkpoint_id: str, now: datetime, actor: str,
                look: dict[str, Any]) -> CheckpointEvent:
    """An interim look of the running canary; the gate's evidence stays, the look is ``ab``."""
    current = _started(registry, checkpoint_id)
    evidence = {**current.evidence, "ab": look}
    return transition(registry, checkpoint_id, "canary_look", "canary", now, actor, evidence)


def abort_canary(registry: Registry, checkpoint_id: str, now: datetime, actor: str,
                 reason: str, evidence: dict[str, Any] | None = None) -> CheckpointEvent:
    """The running canary stopped before its rule decided: the checkpoint is rejected."""
    if not reason.strip():
        raise RegistryError("reason: say why the canary is aborted")
    current = _started(registry, checkpoint_id)
    detail = {**current.evidence, "ab": {**current.evidence.get("ab", {}), "decision": "abort",
                                         "passed": False, "reason": reason, **(evidence or {})}}
    return transition(registry, checkpoint_id, "aborted", "rejected", now, actor, detail)


def external_registration(registry: Registry, name: str, model: str, now: datetime,
                          actor: str, note: str = "") -> CheckpointEvent:
    """A checkpoint served outside the platform, by name: no weights, never served here."""
    if not name.strip() or any(ord(c) < 32 for c in name):
        raise RegistryError(f"name {name!r}: give the id the outside model's events carry "
                            "(no control characters)")
    if name in registry.latest:
        raise RegistryError(f"checkpoint {name!r} is already in the registry "
                            f"({registry.latest[name].status})")
    return CheckpointEvent(
        event_id=str(uuid7()), sequence=registry.next_sequence, occurred_at=now,
        kind="registered", status="external", checkpoint_id=name, model=model, actor=actor,
        evidence={"reason": note or "served outside the platform; registered by name"})
