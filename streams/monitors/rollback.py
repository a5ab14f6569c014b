"""Rolling a checkpoint back: a ``rolled_back`` registry event on ``checkpoints``.

A rollback is a request in the registry's own language: the checkpoint's newest event, copied
with ``kind``/``status`` ``rolled_back``, the next sequence number, the operator (or
``auto-protect``) as actor and the reason and alert as evidence. Serving follows the registry,
so the previous production checkpoint (the newest other ``production`` event) takes over; the
trainer's registry sees the same event. The console and auto-protect both build it here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from schemas.alerts import Alert
from schemas.checkpoints import CheckpointEvent, by_status, newest_per_checkpoint
from schemas.ids import uuid7
from streams.monitors.errors import AlertActionError

__all__ = ["CheckpointHistory", "auto_protect_target", "rollback_event"]


@dataclass
class CheckpointHistory:
    """A read view of the registry: every event in order, the newest per checkpoint."""

    events: list[CheckpointEvent] = field(default_factory=list)
    latest: dict[str, CheckpointEvent] = field(default_factory=dict)

    def add(self, event: CheckpointEvent) -> None:
        self.events.append(event)
        self.latest = newest_per_checkpoint([event], self.latest)

    @property
    def next_sequence(self) -> int:
        return 1 + max((e.sequence for e in self.events), default=0)

    def production(self) -> CheckpointEvent | None:
        """The serving checkpoint: newest-sequence checkpoint whose status is production."""
        live = by_status(self.latest.values(), "production")
        return live[0] if live else None


def rollback_event(
    history: CheckpointHistory, checkpoint_id: str, *, actor: str, reason: str, now: datetime,
    alert_fingerprint: str | None = None,
) -> CheckpointEvent:
    latest = history.latest.get(checkpoint_id)
    if latest is None:
        raise AlertActionError(
            f"checkpoint_id {checkpoint_id!r}: not in the registry (checkpoints topic)")
    if latest.status == "rolled_back":
        raise AlertActionError(f"checkpoint_id {checkpoint_id!r}: already rolled back")
    if not reason.strip():
        raise AlertActionError("reason: say why the checkpoint is rolled back")
    evidence = {"reason": reason, "previous_status": latest.status}
    if alert_fingerprint:
        evidence["alert_fingerprint"] = alert_fingerprint
    return latest.model_copy(update={
        "event_id": str(uuid7()), "sequence": history.next_sequence, "occurred_at": now,
        "kind": "rolled_back", "status": "rolled_back", "evidence": evidence, "actor": actor,
    })


def auto_protect_target(history: CheckpointHistory, alert: Alert) -> str | None:
    """The checkpoint to roll back: a critical alert against the current production checkpoint."""
    if alert.severity != "critical":
        return None
    production = history.production()
    checkpoint_id = alert.labels.get("checkpoint")
    if production is None or production.checkpoint_id != checkpoint_id:
        return None
    return checkpoint_id
