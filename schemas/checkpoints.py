"""The checkpoint registry: its events, on the compacted ``checkpoints`` topic keyed by
checkpoint id, the one fold of them everyone uses (trainer, gate, gateway, monitors, console,
CLI), and the events its commands make.

Each event carries the checkpoint's whole current state (``status``), so compaction, which keeps
only the newest event per checkpoint, still leaves enough to rebuild the registry; ``sequence``
orders events across checkpoints, so the fold does not depend on the order it reads them in.
Aliases, per model family:

* ``production``: of the checkpoints whose newest status is ``production``, the one with the
  highest sequence. A promotion never rewrites the previous production checkpoint, so it stays
  next in line.
* ``candidate``: the newest checkpoint still waiting for the gate.
* ``canary``: the checkpoint that passed the gate's offline evaluation and serves the canary
  arm until its A/B decides (``enter_canary``, then ``conclude_canary``): the newest whose
  canary has started (``start_canary``: a stated share of users, the fleet's or one org's),
  else the newest waiting for its start.

Promotion through a canary needs both halves: the offline gate (``enter_canary`` takes only a
passed gate) and a non-inferior A/B (``conclude_canary`` promotes only when the A/B passed, else
rejects); the event that decides carries the gate's evidence and, under ``ab``, the A/B's.

A rollback is two events when it rolls back production: the checkpoint marked ``rolled_back``,
and the previous production promoted again (so the log says what serves after it, and why); one
event otherwise (a candidate or an older checkpoint taken out of the running). Lineage
generations (parent chain depth) order checkpoints for the trainer's staleness bound.

A checkpoint served outside the platform is registered by name only (``external``): alerts and
history can name it, but the platform neither serves, promotes nor rolls it back
(``Registry.platform_serves``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, PositiveInt

from schemas.errors import RegistryError
from schemas.ids import uuid7

__all__ = [
    "CanarySpec",
    "CheckpointEvent",
    "CheckpointKind",
    "CheckpointStatus",
    "DataManifest",
    "Registry",
    "conclude_canary",
    "enter_canary",
    "fold",
    "promotion",
    "rejection",
    "rollback",
    "transition",
]

CheckpointKind = Literal["created", "evaluated", "canary_started", "canary_look", "promoted",
                         "rejected", "aborted", "rolled_back", "registered"]
CheckpointStatus = Literal["candidate", "canary", "production", "rejected", "rolled_back",
                           "retired", "external"]
# What the platform serves (the gateway routes arms to them); the rest it only names.
_SERVED = ("candidate", "canary", "production")


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class CanarySpec(_Frozen):
    """A started canary: who gets it, against what, and the rule that decides it."""

    share: float = Field(gt=0.0, lt=1.0)  # of the scope's users (past any holdout), sticky
    org: str | None = None  # the one org whose users get it; None: the fleet
    baseline: str  # the production checkpoint it is compared with
    started_at: AwareDatetime
    salt: str  # users are drawn afresh for each canary: hash(salt, user) < share
    rule: dict[str, Any] = {}  # the sequential rule's parameters (streams.release.rule)
    baseline_arm: str = "production"  # the gateway arm production's users are on
    covariate_lookback_s: float = Field(86_400.0, ge=0.0)  # task history before the start


class DataManifest(_Frozen):
    """What data trained a checkpoint made elsewhere: an export's manifest, by content."""

    path: str
    sha256: str
    bytes: int = Field(ge=0)


class CheckpointEvent(_Frozen):
    event_id: str
    sequence: PositiveInt  # 1, 2, ...: the order of events across checkpoints
    occurred_at: AwareDatetime
    kind: CheckpointKind
    status: CheckpointStatus
    checkpoint_id: str
    model: str  # the model family (base model name) the checkpoint belongs to
    parent_id: str | None = None
    path: str = ""  # directory of the weights (safetensors) or LoRA adapter; "" if external
    adapter: bool = False  # True: path holds a peft LoRA adapter over base_path
    base_path: str | None = None
    reward_spec_version: str | None = None
    orgs: list[str] = []  # the organisations whose records trained it (lineage)
    # Kafka offsets consumed to make it: {"topic:partition": [first, last]}.
    offsets: dict[str, list[int]] = {}
    data_manifest: DataManifest | None = None  # or the manifest of an export it was trained on
    hyperparams: dict[str, Any] = {}
    stats: dict[str, Any] = {}
    # The gate's or the operator's reasons: intervals, per-family differences, alert ids.
    evidence: dict[str, Any] = {}
    actor: str = "trainer"
    canary: CanarySpec | None = None  # set when its canary starts, kept in its later events


class Registry:
    """Every registry event read, and each checkpoint's newest (all compaction keeps).

    ``add`` takes events in any order: a replayed older event of a checkpoint changes nothing."""

    def __init__(self, events: Iterable[CheckpointEvent] = ()) -> None:
        self.events: list[CheckpointEvent] = []
        self.latest: dict[str, CheckpointEvent] = {}
        for event in events:
            self.add(event)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Registry) and self.latest == other.latest \
            and self.history == other.history

    def add(self, event: CheckpointEvent) -> None:
        self.events.append(event)
        current = self.latest.get(event.checkpoint_id)
        if current is None or event.sequence >= current.sequence:
            self.latest[event.checkpoint_id] = event

    @property
    def history(self) -> list[CheckpointEvent]:
        """Every event read, by sequence."""
        return sorted(self.events, key=lambda e: e.sequence)

    @property
    def next_sequence(self) -> int:
        return max((e.sequence for e in self.events), default=0) + 1

    def get(self, checkpoint_id: str) -> CheckpointEvent:
        try:
            return self.latest[checkpoint_id]
        except KeyError:
            raise RegistryError(
                f"checkpoint {checkpoint_id!r} is not in the registry; "
                "see `rewardstream registry list` for the known ids"
            ) from None

    def by_status(self, status: CheckpointStatus, model: str | None = None,
                  keep: Callable[[CheckpointEvent], bool] = lambda _: True,
                  ) -> list[CheckpointEvent]:
        """Checkpoints (of ``model``, when given) whose newest status is ``status``, newest
        first: the first ``production`` one is production, the next is what a rollback
        restores."""
        found = [e for e in self.latest.values()
                 if e.status == status and (model is None or e.model == model) and keep(e)]
        return sorted(found, key=lambda e: e.sequence, reverse=True)

    def production(self, model: str | None = None,
                   keep: Callable[[CheckpointEvent], bool] = lambda _: True,
                   ) -> CheckpointEvent | None:
        found = self.by_status("production", model, keep)
        return found[0] if found else None

    def previous_production(self, model: str | None = None) -> CheckpointEvent | None:
        found = self.by_status("production", model)
        return found[1] if len(found) > 1 else None

    def candidate(self, model: str | None = None,
                  keep: Callable[[CheckpointEvent], bool] = lambda _: True,
                  ) -> CheckpointEvent | None:
        found = self.by_status("candidate", model, keep)
        return found[0] if found else None

    def canary(self, model: str | None = None,
               keep: Callable[[CheckpointEvent], bool] = lambda _: True,
               ) -> CheckpointEvent | None:
        """The checkpoint serving the canary arm: it passed the gate, its A/B is undecided;
        one whose canary has started before one waiting for its start."""
        found = self.by_status("canary", model, keep)
        started = [e for e in found if e.canary is not None]
        return (started or found)[0] if found else None

    def platform_serves(self, checkpoint_id: str) -> bool:
        """Whether the platform serves the checkpoint now (so it can roll it back)."""
        event = self.latest.get(checkpoint_id)
        return event is not None and event.status in _SERVED

    def aliases(self, checkpoint_id: str) -> list[str]:
        event = self.latest.get(checkpoint_id)
        if event is None:
            return []
        names = []
        for name, holder in (("production", self.production(event.model)),
                             ("candidate", self.candidate(event.model)),
                             ("canary", self.canary(event.model))):
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
    return Registry(events)


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


def _served_here(event: CheckpointEvent) -> None:
    if event.status == "external":
        raise RegistryError(f"checkpoint {event.checkpoint_id!r} is served outside the platform "
                            "(registered by name only): promote or roll it back where it is "
                            "served")


def promotion(registry: Registry, checkpoint_id: str, now: datetime, actor: str,
              evidence: dict[str, Any]) -> CheckpointEvent:
    event = registry.get(checkpoint_id)
    _served_here(event)
    incumbent = registry.production(event.model)
    if incumbent is not None and incumbent.checkpoint_id == checkpoint_id:
        raise RegistryError(f"checkpoint {checkpoint_id!r} is already production")
    evidence = {"previous_production": incumbent.checkpoint_id if incumbent else None, **evidence}
    return transition(registry, checkpoint_id, "promoted", "production", now, actor, evidence)


def rejection(registry: Registry, checkpoint_id: str, now: datetime, actor: str,
              evidence: dict[str, Any]) -> CheckpointEvent:
    return transition(registry, checkpoint_id, "rejected", "rejected", now, actor, evidence)


def enter_canary(registry: Registry, checkpoint_id: str, now: datetime, actor: str,
                 gate: dict[str, Any]) -> CheckpointEvent:
    """A candidate whose offline gate passed (``gate["passed"]``) starts serving the canary arm."""
    if registry.get(checkpoint_id).status != "candidate":
        raise RegistryError(f"checkpoint {checkpoint_id!r} is not a candidate; only a candidate "
                            "enters the canary")
    if gate.get("passed") is not True:
        raise RegistryError(f"checkpoint {checkpoint_id!r} did not pass the offline gate; it "
                            "cannot serve the canary arm")
    return transition(registry, checkpoint_id, "evaluated", "canary", now, actor, gate)


def conclude_canary(registry: Registry, checkpoint_id: str, now: datetime, actor: str,
                    ab: dict[str, Any]) -> CheckpointEvent:
    """The canary's decision: promoted when its offline gate passed and its A/B is non-inferior
    (``ab["passed"]``), else rejected; the event keeps the gate's evidence and adds ``ab``."""
    current = registry.get(checkpoint_id)
    if current.status != "canary":
        raise RegistryError(f"checkpoint {checkpoint_id!r} is {current.status}, not serving the "
                            "canary arm; there is no A/B to conclude")
    evidence = {**current.evidence, "ab": ab}
    if current.evidence.get("passed") is True and ab.get("passed") is True:
        return promotion(registry, checkpoint_id, now, actor, evidence)
    return rejection(registry, checkpoint_id, now, actor, evidence)


def rollback(registry: Registry, checkpoint_id: str | None, now: datetime, actor: str,
             reason: str, evidence: dict[str, Any] | None = None) -> list[CheckpointEvent]:
    """Roll back ``checkpoint_id`` (None: the production checkpoint of the only model).

    Production: it is marked ``rolled_back`` and the previous production promoted again (the
    base model serves when there is none). Any other checkpoint still in the running: it is
    marked ``rolled_back``. ``evidence`` (an alert's fingerprint, ...) joins the reason."""
    if not reason.strip():
        raise RegistryError("reason: say why the checkpoint is rolled back")
    if checkpoint_id is None:
        current = registry.production()
        if current is None:
            raise RegistryError("nothing to roll back: no checkpoint is production; name one")
        checkpoint_id = current.checkpoint_id
    target = registry.get(checkpoint_id)
    _served_here(target)
    if target.status in ("rolled_back", "rejected", "retired"):
        raise RegistryError(f"checkpoint {checkpoint_id!r} is already {target.status}")
    is_production = registry.production(target.model) == target
    previous = registry.previous_production(target.model) if is_production else None
    detail = {"reason": reason, "previous_status": target.status, **(evidence or {})}
    if previous is not None:
        detail["restored"] = previous.checkpoint_id
    down = transition(registry, checkpoint_id, "rolled_back", "rolled_back", now, actor, detail)
    if previous is None:
        return [down]
    after = Registry([*registry.events, down])
    up = transition(after, previous.checkpoint_id, "promoted", "production", now, actor,
                    {"reason": reason, "rollback_of": checkpoint_id, **(evidence or {})})
    return [down, up]
