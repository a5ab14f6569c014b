"""The alert lifecycle fold: states, dedupe, silences with expiry, replay, planning."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from pydantic import ValidationError

from schemas.alert_lifecycle import (
    AlertState,
    acknowledge,
    apply,
    lift_silence,
    resolve,
    silence_alert,
    silenced_by,
)
from schemas.alerts import Alert, AlertEvent, alert_fingerprint
from schemas.errors import AlertActionError
from streams.monitors.detectors import Transition
from streams.monitors.lifecycle import plan

T0 = datetime(2026, 1, 1, tzinfo=UTC)
LABELS = {"checkpoint": "c1", "arm": "a", "org": "*"}
FP = alert_fingerprint("edit_rate_collapse", LABELS)


def _alert(minute: int, summary: str = "s") -> Alert:
    return Alert(detector="edit_rate_collapse", fingerprint=FP, title="t", severity="critical",
                 summary=summary, evidence={}, runbook="r",
                 labels={"alertname": "edit_rate_collapse", **LABELS, "severity": "critical"},
                 window_end=T0 + timedelta(minutes=minute))


def _fold(events: list[AlertEvent], state: AlertState | None = None) -> AlertState:
    state = state or AlertState()
    for event in events:
        apply(state, event)
    return state


def test_fingerprint_is_stable_and_label_order_free() -> None:
    assert alert_fingerprint("d", {"a": "1", "b": "2"}) == \
        alert_fingerprint("d", {"b": "2", "a": "1"})
    assert alert_fingerprint("d", {"a": "1"}) != alert_fingerprint("e", {"a": "1"})


def test_firing_acknowledged_resolved_with_dedupe_and_a_new_episode() -> None:
    state = AlertState()
    apply(state, plan(state, [Transition("fired", _alert(1))])[0])
    apply(state, plan(state, [Transition("fired", _alert(2, "newer"))])[0])  # duplicate
    record = state.alerts[FP]
    assert (record.status, record.duplicates, record.alert.summary) == ("firing", 1, "newer")
    apply(state, acknowledge(state, FP, "ana", T0))
    assert (record.status, record.acknowledged_by) == ("acknowledged", "ana")
    with pytest.raises(AlertActionError, match="already acknowledged"):
        acknowledge(state, FP, "bob", T0)
    apply(state, resolve(state, FP, "ana", T0, "rolled back"))
    assert record.status == "resolved" and record.resolved_by == "ana"
    with pytest.raises(AlertActionError, match="already resolved"):
        resolve(state, FP, "ana", T0)
    apply(state, plan(state, [Transition("fired", _alert(9))])[0])
    assert state.alerts[FP].status == "firing" and state.alerts[FP].duplicates == 0
    assert [h["kind"] for h in state.alerts[FP].history] == ["fired"]


def test_replay_is_idempotent_and_planning_skips_what_was_sent() -> None:
    state = AlertState()
    events = plan(state, [Transition("fired", _alert(1))])
    _fold(events, state)
    events.append(acknowledge(state, FP, "ana", T0))
    _fold(events[1:], state)
    replayed = _fold(events + events)  # every event twice
    assert replayed.alerts[FP].status == "acknowledged"
    assert replayed.alerts[FP].duplicates == 0
    assert plan(replayed, [Transition("fired", _alert(1))]) == []


def test_auto_resolve_only_closes_the_episode_it_belongs_to() -> None:
    state = AlertState()
    _fold(plan(state, [Transition("fired", _alert(5))]), state)
    assert plan(state, [Transition("resolved", _alert(3))]) == []  # older than the episode
    cleared = plan(state, [Transition("resolved", _alert(8))])
    assert [e.kind for e in cleared] == ["resolved"] and cleared[0].actor == "detector"
    apply(state, resolve(state, FP, "ana", T0))
    assert plan(state, [Transition("resolved", _alert(9))]) == []  # operator resolved it


def test_silences_match_labels_and_expire() -> None:
    state = AlertState()
    _fold(plan(state, [Transition("fired", _alert(1))]), state)
    alert = state.alerts[FP].alert
    with pytest.raises(AlertActionError, match="not in the future"):
        silence_alert(state, FP, "ana", T0, T0)
    event = silence_alert(state, FP, "ana", T0, T0 + timedelta(hours=1), "known")
    apply(state, event)
    assert event.silence is not None
    assert silenced_by(state, alert, T0 + timedelta(minutes=30)) == event.silence
    assert silenced_by(state, alert, T0 + timedelta(hours=2)) is None  # expired
    other = alert.model_copy(update={"labels": {**alert.labels, "arm": "b"}})
    assert silenced_by(state, other, T0) is None
    apply(state, lift_silence(state, event.silence.silence_id, "ana", T0))
    assert silenced_by(state, alert, T0) is None


def test_an_event_without_what_its_kind_needs_is_not_an_alert_event() -> None:
    fired = AlertEvent(event_id="e1", kind="fired", occurred_at=T0, actor="detector",
                       fingerprint=FP, alert=_alert(1))
    broken = {
        "a 'fired' event needs alert": {"alert": None},
        "a 'fired' event needs fingerprint and alert": {"alert": None, "fingerprint": None},
        "is not the alert's": {"fingerprint": "another"},
        "a 'silenced' event needs silence": {"kind": "silenced"},
        "a 'silence_lifted' event needs silence_id": {"kind": "silence_lifted"},
    }
    for reason, changes in broken.items():
        with pytest.raises(ValidationError, match=reason):
            AlertEvent.model_validate({**fired.model_dump(), **changes})
