"""Detector transitions to alert lifecycle events (the lifecycle itself is
``schemas.alert_lifecycle``)."""

from __future__ import annotations

from schemas.alert_lifecycle import AlertState, stable_event_id
from schemas.alerts import AlertEvent
from streams.monitors.detectors import Transition

__all__ = ["plan"]


def plan(state: AlertState, transitions: list[Transition]) -> list[AlertEvent]:
    """The events to publish for detector transitions, skipping what the topic already has."""
    events = []
    for t in transitions:
        fp, at = t.alert.fingerprint, t.alert.window_end
        event_id = stable_event_id(t.kind, fp, at.isoformat())
        if event_id in state.seen:
            continue
        record = state.alerts.get(fp)
        if t.kind == "resolved" and (
            record is None or not record.open or record.opened_window_end >= at
        ):
            continue  # an operator resolved it already, or it belongs to an older episode
        note = "condition cleared" if t.kind == "resolved" else ""
        events.append(AlertEvent(event_id=event_id, kind=t.kind, occurred_at=at,
                                 actor="detector", fingerprint=fp, alert=t.alert, note=note))
    return events
