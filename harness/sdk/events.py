"""Typed constructors, one per event type of ``schemas.events``; each validates before queueing.

Every constructor takes the :class:`Trajectory` the event belongs to, the payload's fields as
keyword arguments, and an optional ``occurred_at`` (default: now); it returns the new event id.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from uuid import UUID

from schemas import events as ev
from schemas.ids import uuid7

__all__ = ["EventConstructors", "Trajectory"]


@dataclass(frozen=True)
class Trajectory:
    """Who and where: the envelope fields shared by every event of one trajectory."""

    trajectory_id: str
    session_id: str
    user: str  # the client's own user id; ingest replaces it with a keyed pseudonym
    checkpoint_id: str
    arm: str = "default"


class EventConstructors:
    """Mixed into the client, which supplies :meth:`emit`."""

    def emit(self, event: ev.Event) -> bool:
        raise NotImplementedError

    def _new(self, model: type, trajectory: Trajectory, payload: object,
             occurred_at: datetime | None) -> UUID:
        when = occurred_at or datetime.now(UTC)
        event_id = uuid7(int(when.timestamp() * 1000))
        # sent_at is rewritten on every send attempt; occurred_at is its placeholder until then.
        self.emit(model(event_id=event_id, occurred_at=when, sent_at=when, payload=payload,
                        **asdict(trajectory)))
        return event_id

    def completion_served(
        self, trajectory: Trajectory, *, completion_id: str, model: str,
        prompt_token_ids: Sequence[int], completion_token_ids: Sequence[int],
        behaviour_logprobs: Sequence[float], ttft_ms: float, latency_ms: float,
        sampling: ev.SamplingParams | None = None, finish_reason: ev.FinishReason = "stop",
        occurred_at: datetime | None = None,
    ) -> UUID:
        payload = ev.CompletionServedPayload(
            completion_id=completion_id, model=model, prompt_token_ids=list(prompt_token_ids),
            completion_token_ids=list(completion_token_ids),
            behaviour_logprobs=list(behaviour_logprobs), sampling=sampling or ev.SamplingParams(),
            ttft_ms=ttft_ms, latency_ms=latency_ms, finish_reason=finish_reason)
        return self._new(ev.CompletionServed, trajectory, payload, occurred_at)

    def tool_called(
        self, trajectory: Trajectory, *, call_id: str, tool: str, valid: bool,
        error_kind: ev.ToolErrorKind | None = None, duration_ms: float = 0.0,
        parallel_group: int | None = None, occurred_at: datetime | None = None,
    ) -> UUID:
        payload = ev.ToolCalledPayload(
            call_id=call_id, tool=tool, valid=valid, error_kind=error_kind,
            duration_ms=duration_ms, parallel_group=parallel_group)
        return self._new(ev.ToolCalled, trajectory, payload, occurred_at)

    def edit_proposed(
        self, trajectory: Trajectory, *, edit_id: str, path: str, lines_added: int = 0,
        lines_removed: int = 0, occurred_at: datetime | None = None,
    ) -> UUID:
        payload = ev.EditProposedPayload(edit_id=edit_id, path=path, lines_added=lines_added,
                                      lines_removed=lines_removed)
        return self._new(ev.EditProposed, trajectory, payload, occurred_at)

    def edit_decided(
        self, trajectory: Trajectory, *, edit_id: str, decision: ev.EditDecision,
        occurred_at: datetime | None = None,
    ) -> UUID:
        payload = ev.EditDecidedPayload(edit_id=edit_id, decision=decision)
        return self._new(ev.EditDecided, trajectory, payload, occurred_at)

    def edit_persistence(
        self, trajectory: Trajectory, *, edit_id: str, horizon_s: int, surviving_fraction: float,
        occurred_at: datetime | None = None,
    ) -> UUID:
        payload = ev.EditPersistencePayload(edit_id=edit_id, horizon_s=horizon_s,
                                         surviving_fraction=surviving_fraction)
        return self._new(ev.EditPersistence, trajectory, payload, occurred_at)

    def followup_sent(
        self, trajectory: Trajectory, *, sentiment: ev.Sentiment,
        occurred_at: datetime | None = None,
    ) -> UUID:
        return self._new(ev.FollowupSent, trajectory, ev.FollowupSentPayload(sentiment=sentiment),
                         occurred_at)

    def clarification_asked(
        self, trajectory: Trajectory, *, request_ambiguity: float | None = None,
        occurred_at: datetime | None = None,
    ) -> UUID:
        payload = ev.ClarificationAskedPayload(request_ambiguity=request_ambiguity)
        return self._new(ev.ClarificationAsked, trajectory, payload, occurred_at)

    def trajectory_ended(
        self, trajectory: Trajectory, *, outcome: ev.TrajectoryOutcome, turns: int,
        task_family: str = "default",
        occurred_at: datetime | None = None,
    ) -> UUID:
        payload = ev.TrajectoryEndedPayload(outcome=outcome, turns=turns, task_family=task_family)
        return self._new(ev.TrajectoryEnded, trajectory, payload, occurred_at)
