"""Checkpoint registry events, on the compacted ``checkpoints`` topic, keyed by checkpoint id.

Each event carries the checkpoint's whole current state (``status``), so compaction, which keeps
only the newest event per checkpoint, still leaves enough to rebuild the registry. ``sequence``
orders events across checkpoints: production is the checkpoint whose newest event has status
``production`` and the highest sequence.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict

__all__ = [
    "CheckpointEvent",
    "CheckpointKind",
    "CheckpointStatus",
    "by_status",
    "newest_per_checkpoint",
]

CheckpointKind = Literal["created", "evaluated", "promoted", "rejected", "rolled_back"]
CheckpointStatus = Literal["candidate", "production", "rejected", "rolled_back", "retired"]


class CheckpointEvent(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    event_id: str
    sequence: int
    occurred_at: AwareDatetime
    kind: CheckpointKind
    status: CheckpointStatus
    checkpoint_id: str
    model: str  # the model family (base model name) the checkpoint belongs to
    parent_id: str | None = None
    path: str  # directory holding the weights (safetensors) or the LoRA adapter
    adapter: bool = False  # True: path holds a peft LoRA adapter over base_path
    base_path: str | None = None
    reward_spec_version: str | None = None
    # Kafka offsets consumed to make it: {"topic:partition": [first, last]}.
    offsets: dict[str, list[int]] = {}
    hyperparams: dict[str, Any] = {}
    stats: dict[str, Any] = {}
    # The gate's or the operator's reasons: intervals, per-family differences, alert ids.
    evidence: dict[str, Any] = {}
    actor: str = "trainer"


def newest_per_checkpoint(
    events: Iterable[CheckpointEvent], into: dict[str, CheckpointEvent] | None = None
) -> dict[str, CheckpointEvent]:
    """Each checkpoint's event with the highest sequence — exactly what compaction keeps — so a
    replayed older event changes nothing."""
    latest = dict(into or {})
    for event in events:
        current = latest.get(event.checkpoint_id)
        if current is None or event.sequence >= current.sequence:
            latest[event.checkpoint_id] = event
    return latest


def by_status(
    latest: Iterable[CheckpointEvent], status: CheckpointStatus,
    keep: Callable[[CheckpointEvent], bool] = lambda _: True,
) -> list[CheckpointEvent]:
    """Checkpoints whose newest status is ``status``, newest first: the first ``production`` one
    is production, the next one is what a rollback restores."""
    found = [e for e in latest if e.status == status and keep(e)]
    return sorted(found, key=lambda e: e.sequence, reverse=True)
