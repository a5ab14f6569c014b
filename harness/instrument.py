"""Instrumentation: typed events on a simulated clock, handed to a pluggable sink.

The sink is any ``Callable[[Event], None]``: a list's ``append`` in tests, the SDK's
``Telemetry`` (or a small adapter to it) in the demo. Event times come from a
:class:`SimClock`, so a trajectory and its persistence checks an hour later are emitted in
milliseconds of wall-clock time, and the reward join sees them in the right event-time order.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from pydantic import BaseModel

from schemas.events import EVENT_MODELS, Event
from schemas.ids import uuid7

__all__ = ["EventSink", "Recorder", "SimClock", "TrajectoryContext"]

EventSink = Callable[[Event], None]



def _payload_model(event_model: type[BaseModel]) -> type[BaseModel]:
    payload = event_model.model_fields["payload"].annotation
    assert isinstance(payload, type) and issubclass(payload, BaseModel), event_model
    return payload


# Each payload model belongs to exactly one event type.
_EVENT_CLASSES: dict[type[BaseModel], type] = {
    _payload_model(model): model for model in EVENT_MODELS.values()}


@dataclass
class SimClock:
    """Simulated time: advanced explicitly, never read from the wall."""

    now: datetime = field(default_factory=lambda: datetime(2025, 1, 1, tzinfo=UTC))

    def advance(self, seconds: float) -> datetime:
        self.now += timedelta(seconds=seconds)
        return self.now


@dataclass(frozen=True)
class TrajectoryContext:
    trajectory_id: str
    session_id: str
    user: str
    arm: str = "default"


class Recorder:
    """Builds one trajectory's envelopes (context, event id, time) and sends them to the sink."""

    def __init__(self, sink: EventSink, context: TrajectoryContext, clock: SimClock) -> None:
        self.sink = sink
        self.context = context
        self.clock = clock
        self.checkpoint_id = "unknown"  # the checkpoint that served the latest completion

    def emit(self, payload: BaseModel, at: datetime | None = None) -> Event:
        when = at or self.clock.now
        event = _EVENT_CLASSES[type(payload)](
            event_id=uuid7(int(when.timestamp() * 1000)), occurred_at=when, sent_at=when,
            trajectory_id=self.context.trajectory_id, session_id=self.context.session_id,
            user=self.context.user, arm=self.context.arm, checkpoint_id=self.checkpoint_id,
            payload=payload,
        )
        self.sink(event)
        return event
