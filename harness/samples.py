"""A realistic single trajectory of events, for the quick-start and for tests."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TypedDict
from uuid import UUID

from schemas.events import (
    ClarificationAsked,
    ClarificationAskedPayload,
    CompletionServed,
    CompletionServedPayload,
    EditDecided,
    EditDecidedPayload,
    EditPersistence,
    EditPersistencePayload,
    EditProposed,
    EditProposedPayload,
    Event,
    FollowupSent,
    FollowupSentPayload,
    ToolCalled,
    ToolCalledPayload,
    TrajectoryEnded,
    TrajectoryEndedPayload,
)
from schemas.ids import uuid7

__all__ = ["sample_trajectory"]


class _Envelope(TypedDict):
    event_id: UUID
    occurred_at: datetime
    sent_at: datetime
    trajectory_id: str
    session_id: str
    user: str
    checkpoint_id: str
    arm: str


def sample_trajectory(
    trajectory_id: str, start: datetime | None = None, checkpoint_id: str = "ckpt-0"
) -> list[Event]:
    """One served completion, a valid and a broken tool call, an accepted edit, its persistence
    check, a clarifying question, a follow-up and the end: every event type once."""
    t0 = start or datetime.now(UTC)

    def at(seconds: float) -> _Envelope:
        when = t0 + timedelta(seconds=seconds)
        return _Envelope(event_id=uuid7(int(when.timestamp() * 1000)), occurred_at=when,
                         sent_at=when, trajectory_id=trajectory_id,
                         session_id=f"session-{trajectory_id}", user="user-1",
                         checkpoint_id=checkpoint_id, arm="control")

    return [
        CompletionServed(**at(0), payload=CompletionServedPayload(
            completion_id=f"{trajectory_id}-c0", model="tiny", prompt_token_ids=[1, 2, 3],
            completion_token_ids=[4, 5], behaviour_logprobs=[-0.5, -1.25], ttft_ms=12.0,
            latency_ms=40.0)),
        ToolCalled(**at(1), payload=ToolCalledPayload(call_id="t0", tool="read_file", valid=True)),
        ToolCalled(**at(2), payload=ToolCalledPayload(
            call_id="t1", tool="edit_file", valid=False, error_kind="malformed_call")),
        EditProposed(**at(3), payload=EditProposedPayload(edit_id="e0", path="src/app.py",
                                                          lines_added=3, lines_removed=1)),
        EditDecided(**at(4), payload=EditDecidedPayload(edit_id="e0", decision="accepted")),
        ClarificationAsked(**at(5), payload=ClarificationAskedPayload(request_ambiguity=0.2)),
        FollowupSent(**at(6), payload=FollowupSentPayload(sentiment="satisfied")),
        TrajectoryEnded(**at(7), payload=TrajectoryEndedPayload(outcome="completed", turns=2)),
        EditPersistence(**at(600), payload=EditPersistencePayload(
            edit_id="e0", horizon_s=600, surviving_fraction=1.0)),
    ]
