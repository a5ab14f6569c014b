"""The alert lifecycle as a fold over ``alerts`` events, and the operator actions that drive
it; the monitors, the console and alert delivery all fold with it.

States: firing → acknowledged → resolved (acknowledging is optional). A ``fired`` event for an
open fingerprint is a duplicate: it refreshes the evidence and counts. After ``resolved`` the
same fingerprint may fire again, opening a new episode. Silences hide matching alerts from
delivery until they expire or are lifted. Applying an event id twice changes nothing, so the
state is a pure function of the topic and replays cleanly.
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from schemas.alerts import Alert, AlertEvent, Silence
from schemas.errors import AlertActionError
from schemas.ids import uuid7

__all__ = [
    "AlertRecord",
    "AlertState",
    "acknowledge",
    "active_silences",
    "apply",
    "lift_silence",
    "resolve",
    "silence_alert",
    "silenced_by",
    "stable_event_id",
]

Status = Literal["firing", "acknowledged", "resolved"]


@dataclass
class AlertRecord:
    alert: Alert
    status: Status
    started_at: datetime
    updated_at: datetime
    opened_window_end: datetime
    resolved_at: datetime | None = None
    acknowledged_by: str | None = None
    resolved_by: str | None = None
    duplicates: int = 0
    history: list[dict[str, str]] = field(default_factory=list)

    @property
    def open(self) -> bool:
        return self.status != "resolved"


@dataclass
class AlertState:
    alerts: dict[str, AlertRecord] = field(default_factory=dict)
    silences: dict[str, Silence] = field(default_factory=dict)
    seen: set[str] = field(default_factory=set)


def _log(record: AlertRecord, event: AlertEvent) -> None:
    record.updated_at = event.occurred_at
    record.history.append({"kind": event.kind, "at": event.occurred_at.isoformat(),
                           "actor": event.actor, "note": event.note})


def _fired(state: AlertState, event: AlertEvent) -> None:
    assert event.alert is not None and event.fingerprint is not None
    record = state.alerts.get(event.fingerprint)
    if record is not None and record.open:
        record.alert, record.duplicates = event.alert, record.duplicates + 1
        return
    record = AlertRecord(alert=event.alert, status="firing", started_at=event.occurred_at,
                         updated_at=event.occurred_at, opened_window_end=event.alert.window_end)
    state.alerts[event.fingerprint] = record
    _log(record, event)


def apply(state: AlertState, event: AlertEvent) -> AlertState:
    """Fold one event into the state (in place) and return it."""
    if event.event_id in state.seen:
        return state
    state.seen.add(event.event_id)
    if event.kind == "fired":
        _fired(state, event)
    elif event.kind == "silenced" and event.silence is not None:
        state.silences[event.silence.silence_id] = event.silence
    elif event.kind == "silence_lifted" and event.silence_id is not None:
        state.silences.pop(event.silence_id, None)
    elif event.fingerprint in state.alerts:
        record = state.alerts[event.fingerprint]
        if event.kind == "acknowledged" and record.status == "firing":
            record.status, record.acknowledged_by = "acknowledged", event.actor
            _log(record, event)
        elif event.kind == "resolved" and record.open:
            record.status, record.resolved_by = "resolved", event.actor
            record.resolved_at = event.occurred_at
            _log(record, event)
    return state


def active_silences(state: AlertState, now: datetime) -> list[Silence]:
    return [s for s in state.silences.values() if s.ends_at > now]


def silenced_by(state: AlertState, alert: Alert, now: datetime) -> Silence | None:
    """The first unexpired silence whose matchers all equal the alert's labels."""
    for silence in active_silences(state, now):
        if all(alert.labels.get(k) == v for k, v in silence.matchers.items()):
            return silence
    return None


def stable_event_id(*parts: str) -> str:
    """A deterministic id, so a replayed detector transition is recognised as already sent."""
    digest = hashlib.sha256("|".join(parts).encode()).digest()
    return str(uuid.UUID(bytes=digest[:16]))


def _open_record(state: AlertState, fingerprint: str) -> AlertRecord:
    record = state.alerts.get(fingerprint)
    if record is None:
        raise AlertActionError(f"fingerprint {fingerprint!r}: no such alert; list them first")
    if not record.open:
        raise AlertActionError(f"fingerprint {fingerprint!r}: the alert is already resolved")
    return record


def acknowledge(state: AlertState, fingerprint: str, actor: str, now: datetime,
                note: str = "") -> AlertEvent:
    record = _open_record(state, fingerprint)
    if record.status == "acknowledged":
        raise AlertActionError(
            f"fingerprint {fingerprint!r}: already acknowledged by {record.acknowledged_by}")
    return AlertEvent(event_id=str(uuid7()), kind="acknowledged", occurred_at=now, actor=actor,
                      fingerprint=fingerprint, note=note)


def resolve(state: AlertState, fingerprint: str, actor: str, now: datetime,
            note: str = "") -> AlertEvent:
    _open_record(state, fingerprint)
    return AlertEvent(event_id=str(uuid7()), kind="resolved", occurred_at=now, actor=actor,
                      fingerprint=fingerprint, note=note)


def silence_alert(state: AlertState, fingerprint: str, actor: str, now: datetime,
                  ends_at: datetime, comment: str = "") -> AlertEvent:
    """Silence everything with this alert's name, checkpoint, arm and org until ``ends_at``."""
    record = state.alerts.get(fingerprint)
    if record is None:
        raise AlertActionError(f"fingerprint {fingerprint!r}: no such alert; list them first")
    if ends_at <= now:
        raise AlertActionError(f"ends_at {ends_at.isoformat()} is not in the future")
    matchers = {k: v for k, v in record.alert.labels.items() if k != "severity"}
    silence = Silence(silence_id=str(uuid7()), matchers=matchers, ends_at=ends_at,
                      created_by=actor, comment=comment)
    return AlertEvent(event_id=str(uuid7()), kind="silenced", occurred_at=now, actor=actor,
                      silence=silence, note=comment)


def lift_silence(state: AlertState, silence_id: str, actor: str, now: datetime) -> AlertEvent:
    if silence_id not in state.silences:
        raise AlertActionError(f"silence_id {silence_id!r}: no such silence")
    return AlertEvent(event_id=str(uuid7()), kind="silence_lifted", occurred_at=now, actor=actor,
                      silence_id=silence_id)
